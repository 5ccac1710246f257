package assemble

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
)

// setup returns a pipeline on the request and candidates that has run the
// given stages, so that a test can look at the next stage alone.
func setup(t *testing.T, r *ctxtype.Request, cs []Candidate, stages ...func(*pipeline)) *pipeline {
	t.Helper()
	p := newPipeline(Input{Project: "acme", Request: r, Candidates: cs, Now: t0})
	for _, s := range stages {
		s(p)
	}
	return p
}

// ids names candidates as project/key, in their order.
func ids(cs []*cand) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.v.Project+"/"+c.v.Key)
	}
	return out
}

// TestStageCandidates: tombstones and versions outside their window drop
// out unrecorded, the rest come by key then project, and only visible
// project items shadow.
func TestStageCandidates(t *testing.T) {
	t.Parallel()
	hidden := func(v *ctxtype.Version) { v.Roles = ctxtype.Roles{HiddenFrom: []string{"implementer"}} }
	for _, tc := range []struct {
		name    string
		vs      []*ctxtype.Version
		want    []string
		shadows []string
	}{
		{"tombstone", []*ctxtype.Version{ver("acme", "a", "x", func(v *ctxtype.Version) { v.Deleted = true })}, []string{}, nil},
		{"not yet valid", []*ctxtype.Version{ver("acme", "a", "x", func(v *ctxtype.Version) { v.ValidFrom = ptr(t0.Add(time.Nanosecond)) })}, []string{}, nil},
		{"expired at now", []*ctxtype.Version{ver("acme", "a", "x", func(v *ctxtype.Version) { v.ValidUntil = ptr(t0) })}, []string{}, nil},
		{"valid from now", []*ctxtype.Version{ver("acme", "a", "x", func(v *ctxtype.Version) { v.ValidFrom = ptr(t0) })}, []string{"acme/a"}, []string{"a"}},
		{"by key then project", []*ctxtype.Version{ver("acme", "b", "x"), ver("acme", "a", "x"), ver("_shared", "a", "x")},
			[]string{"_shared/a", "acme/a", "acme/b"}, []string{"a", "b"}},
		{"a hidden project item shadows nothing", []*ctxtype.Version{ver("acme", "a", "x", hidden), ver("_shared", "a", "x")},
			[]string{"_shared/a", "acme/a"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := setup(t, req(), cands(tc.vs...), (*pipeline).candidates)
			require.Equal(t, tc.want, ids(p.cands))
			var shadows []string
			for k := range p.shadows {
				shadows = append(shadows, k)
			}
			require.ElementsMatch(t, tc.shadows, shadows)
			for _, c := range p.cands {
				require.Equal(t, LayerOf(c.v.Project), c.layer)
			}
			require.Empty(t, p.excluded, "lifecycle drops leave no record")
		})
	}
}

// TestStageTriggers: each trigger fires on what the request holds and names
// its rule; one that does not fire leaves no record.
func TestStageTriggers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		trigger   ctxtype.Trigger
		relevance *float64
		mod       func(*ctxtype.Request)
		rule      string // "" when it must not fire
	}{
		{"always", ctxtype.Trigger{Always: true}, nil, nil, "always"},
		{"pin beats its trigger", ctxtype.Trigger{PinnedOnly: true}, nil, func(r *ctxtype.Request) { r.Pins = []string{"k"} }, "pin"},
		{"pinned only, not pinned", ctxtype.Trigger{PinnedOnly: true}, nil, nil, ""},
		{"tool", ctxtype.Trigger{Tool: ptr("grep")}, nil, func(r *ctxtype.Request) { r.ToolResults = []ctxtype.ToolResult{{Tool: "grep"}} }, "tool:grep"},
		{"other tool", ctxtype.Trigger{Tool: ptr("grep")}, nil, func(r *ctxtype.Request) { r.ToolResults = []ctxtype.ToolResult{{Tool: "ls"}} }, ""},
		{"relevance", ctxtype.Trigger{Relevance: true}, ptr(0.42), nil, "relevance:0.42"},
		{"not among the matches", ctxtype.Trigger{Relevance: true}, nil, nil, ""},
		{"keyword from an agent", ctxtype.Trigger{Keywords: []string{"refund"}}, nil,
			func(r *ctxtype.Request) {
				r.History = []ctxtype.Message{{Role: "user", Author: "agent", Content: "refund"}}
			}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mods := []func(*ctxtype.Request){}
			if tc.mod != nil {
				mods = append(mods, tc.mod)
			}
			v := ver("acme", "k", "x", func(v *ctxtype.Version) { v.Trigger = tc.trigger })
			p := setup(t, req(mods...), []Candidate{{Version: v, Relevance: tc.relevance}}, (*pipeline).candidates)
			p.triggers()
			require.Empty(t, p.excluded, "an item that does not fire is not recorded")
			if tc.rule == "" {
				require.Empty(t, p.cands)
				return
			}
			require.Len(t, p.cands, 1)
			require.Equal(t, tc.rule, p.cands[0].rule)
		})
	}
}

// TestStageOverrides: a visible project item shadows the _shared item of its
// key, a hidden one does not.
func TestStageOverrides(t *testing.T) {
	t.Parallel()
	hidden := func(v *ctxtype.Version) { v.Roles = ctxtype.Roles{HiddenFrom: []string{"implementer"}} }
	for _, tc := range []struct {
		name      string
		vs        []*ctxtype.Version
		kept      []string
		adminOnly bool // of the overridden record, when there is one
	}{
		{"project shadows shared", []*ctxtype.Version{ver("_shared", "k", "s"), ver("acme", "k", "p", func(v *ctxtype.Version) { v.Version = 3 })},
			[]string{"acme/k"}, false},
		{"a hidden shared item's record is for admins", []*ctxtype.Version{ver("_shared", "k", "s", hidden), ver("acme", "k", "p", func(v *ctxtype.Version) { v.Version = 3 })},
			[]string{"acme/k"}, true},
		{"a hidden project item does not shadow", []*ctxtype.Version{ver("_shared", "k", "s"), ver("acme", "k", "p", hidden)},
			[]string{"_shared/k", "acme/k"}, false},
		{"shared alone stands", []*ctxtype.Version{ver("_shared", "k", "s"), ver("acme", "other", "p")},
			[]string{"_shared/k", "acme/other"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := setup(t, req(), cands(tc.vs...), (*pipeline).candidates, (*pipeline).triggers)
			p.overrides()
			require.Equal(t, tc.kept, ids(p.cands))
			if len(p.cands) == len(tc.vs) {
				require.Empty(t, p.excluded)
				return
			}
			require.Len(t, p.excluded, 1)
			r := p.excluded[0]
			require.Equal(t, []string{ctxtype.SharedProject, "k", ctxtype.Excluded, ctxtype.ReasonOverridden, "overridden by project item k v3"},
				[]string{r.SubjectProject, r.SubjectKey, r.Decision, r.Reason, r.Detail})
			require.Equal(t, tc.adminOnly, r.AdminOnly)
		})
	}
}

// TestStageVisibility: an item the role may not see leaves with an
// admin-only record.
func TestStageVisibility(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		roles   ctxtype.Roles
		visible bool
	}{
		{"everyone", ctxtype.Roles{}, true},
		{"listed", ctxtype.Roles{VisibleTo: []string{"critic", "implementer"}}, true},
		{"not listed", ctxtype.Roles{VisibleTo: []string{"critic"}}, false},
		{"hidden wins over listed", ctxtype.Roles{VisibleTo: []string{"implementer"}, HiddenFrom: []string{"implementer"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := ver("acme", "k", "x", func(v *ctxtype.Version) { v.Roles = tc.roles })
			p := setup(t, req(), cands(v), (*pipeline).candidates, (*pipeline).triggers, (*pipeline).overrides)
			p.visibility()
			if tc.visible {
				require.Len(t, p.cands, 1)
				require.Empty(t, p.excluded)
				return
			}
			require.Empty(t, p.cands)
			require.Len(t, p.excluded, 1)
			require.Equal(t, ctxtype.ReasonHidden, p.excluded[0].Reason)
			require.True(t, p.excluded[0].AdminOnly, "only admins learn a hidden item exists")
			require.Contains(t, p.excluded[0].Detail, `not visible to role "implementer"`)
		})
	}
}

// TestStageTemplates: placeholders are filled, built-ins win, and a template
// with a hole leaves, naming every missing value once.
func TestStageTemplates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		template       bool
		title, content string
		task           *ctxtype.Task
		want           string // the content shown, or the detail of the exclusion
		excluded       bool
	}{
		{"not a template", false, "", "{{customer}}", nil, "{{customer}}", false},
		{"filled", true, "", "Dear {{ customer }} at {{now}}", nil, "Dear Ada at 2026-11-29T12:00:00Z", false},
		{"built-ins win over variables", true, "", "{{project}} as {{target_role}}", nil, "acme as implementer", false},
		{"objective when the task has one", true, "", "{{task.objective}}", &ctxtype.Task{Objective: "Ship"}, "Ship", false},
		{"no objective, no value, whatever the variables say", true, "", "{{task.objective}}", &ctxtype.Task{}, "no value for task.objective", true},
		{"missing names once each, title first", true, "{{b}}", "{{a}} {{b}} {{a}}", nil, "no value for b, a", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := req(func(r *ctxtype.Request) {
				r.Task = tc.task
				r.Variables = map[string]any{"customer": "Ada", "project": "evil", "target_role": "admin", "task.objective": "forged"}
			})
			v := ver("acme", "k", tc.content, func(v *ctxtype.Version) { v.Template, v.Title = tc.template, tc.title })
			p := setup(t, r, cands(v), (*pipeline).candidates, (*pipeline).triggers, (*pipeline).overrides, (*pipeline).visibility)
			p.templates()
			if tc.excluded {
				require.Empty(t, p.cands)
				require.Len(t, p.excluded, 1)
				require.Equal(t, ctxtype.ReasonTemplateUnresolved, p.excluded[0].Reason)
				require.Equal(t, tc.want, p.excluded[0].Detail)
				return
			}
			require.Len(t, p.cands, 1)
			require.Equal(t, tc.want, p.cands[0].content)
		})
	}
}

// TestStageContradictions: the strongest of a state key goes on, the others
// with other content become its losers.
func TestStageContradictions(t *testing.T) {
	t.Parallel()
	state := func(sk, auth string) func(*ctxtype.Version) {
		return func(v *ctxtype.Version) { v.StateKey, v.Authority = sk, auth }
	}
	p := setup(t, req(), cands(
		ver("acme", "w", "30 days", state("window", "policy")),
		ver("acme", "l1", "14 days", state("window", "evidence")),
		ver("acme", "agree", "30 days", state("window", "hypothesis")),
		ver("acme", "l0", "7 days", state("window", "hypothesis")),
		ver("acme", "alone", "frozen", state("deploy", "evidence")),
		ver("acme", "plain", "no state key"),
	), (*pipeline).candidates, (*pipeline).triggers, (*pipeline).overrides, (*pipeline).visibility, (*pipeline).templates)
	p.contradictions()
	require.Equal(t, []string{"acme/agree", "acme/alone", "acme/plain", "acme/w"}, ids(p.ranked), "the same content is agreement")
	require.Equal(t, []string{"acme/l0", "acme/l1"}, ids(p.losers), "losers in candidate order")
	byKey := map[string]*cand{}
	for _, c := range p.cands {
		byKey[c.v.Key] = c
	}
	require.Equal(t, []string{"acme/l1", "acme/l0"}, ids(byKey["w"].losers), "the winner's losers, strongest first")
	require.Same(t, byKey["w"], byKey["l0"].loserOf)
	require.Nil(t, byKey["agree"].loserOf)
	require.Empty(t, p.excluded, "losers are recorded with the ranked items, not before")
}

// TestStageRank: each factor of the order outweighs the next.
func TestStageRank(t *testing.T) {
	t.Parallel()
	mk := func(key string, mod func(*cand)) *cand {
		c := &cand{v: ver("acme", key, "x")}
		mod(c)
		return c
	}
	for _, tc := range []struct {
		name        string
		first, next func(*cand)
	}{
		{"pin over authority", func(c *cand) { c.pinned = true }, func(c *cand) { c.v.Authority = "policy" }},
		{"authority over priority", func(c *cand) { c.v.Authority = "instruction" }, func(c *cand) { c.v.Priority = 9 }},
		{"priority over confidence", func(c *cand) { c.v.Priority = 1 }, func(c *cand) { c.v.Confidence = "verified" }},
		{"confidence over relevance", func(c *cand) { c.v.Confidence = "verified" }, func(c *cand) { c.relevance = ptr(0.9) }},
		{"relevance over age", func(c *cand) { c.relevance = ptr(0.1) }, func(c *cand) { c.v.CreatedAt = t0 }},
		{"a relevance of zero over none", func(c *cand) { c.relevance = ptr(0.0) }, func(c *cand) {}},
		{"newer over key", func(c *cand) { c.v.CreatedAt = t0 }, func(c *cand) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The winner's key sorts last, so only the factor under test can put it first.
			p := &pipeline{ranked: []*cand{mk("a", tc.next), mk("z", tc.first)}}
			p.rank()
			require.Equal(t, []string{"acme/z", "acme/a"}, ids(p.ranked))
		})
	}
	p := &pipeline{ranked: []*cand{mk("b", func(*cand) {}), {v: ver("acme", "a", "x")}, {v: ver("_shared", "a", "x")}}}
	p.rank()
	require.Equal(t, []string{"_shared/a", "acme/a", "acme/b"}, ids(p.ranked), "key, then project, make it total")
}
