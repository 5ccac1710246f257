package assemble

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
)

// selection is every stage before the budget, in Assemble's order.
var selection = []func(*pipeline){
	(*pipeline).candidates, (*pipeline).triggers, (*pipeline).overrides, (*pipeline).visibility,
	(*pipeline).templates, (*pipeline).contradictions, (*pipeline).rank, (*pipeline).requestParts, (*pipeline).itemRecords,
}

// subjects names records as kind:key[:reason], in their order.
func subjects(recs []ctxtype.Record) []string {
	out := []string{}
	for _, r := range recs {
		s := r.SubjectKind + ":" + r.SubjectKey
		if r.Reason != "" {
			s += ":" + r.Reason
		}
		out = append(out, s)
	}
	return out
}

// TestStageRequestParts: the request's parts get their records first, in a
// fixed order, and the document their refs.
func TestStageRequestParts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mod  func(*ctxtype.Request)
		want []string
	}{
		{"none", func(*ctxtype.Request) {}, []string{}},
		{"all", func(r *ctxtype.Request) {
			r.Task = &ctxtype.Task{TaskID: "T"}
			r.AcceptanceCriteria = []ctxtype.Criterion{{ID: "AC1", VerificationKind: "gate"}}
			r.Plan = &ctxtype.Plan{PlanHash: "h"}
			r.AgentContext = map[string]any{"branch": "main"}
		}, []string{"request:task", "request:objective", "request:criteria", "request:plan", "handoff:h1", "handoff:h2", "request:agent_context"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := Input{Project: "acme", Request: req(tc.mod), Now: t0}
			if tc.name == "all" {
				in.Predecessors = []ctxtype.Predecessor{{ID: "h1"}, {ID: "h2"}}
			}
			p := newPipeline(in)
			p.requestParts()
			require.Equal(t, tc.want, subjects(p.recs))
			for i, r := range p.recs {
				require.Equal(t, ctxtype.Included, r.Decision, "request parts are inviolable")
				if r.SubjectKind == ctxtype.SubjectHandoff {
					require.Equal(t, i-4, r.Position, "predecessors keep the request's order")
					require.Equal(t, i, p.doc.Predecessors[r.Position].Ref)
				}
			}
			if tc.name == "all" {
				d := p.doc
				require.Equal(t, []int{0, 1, 2, 3, 6}, []int{d.TaskRef, d.ObjectiveRef, d.CriteriaRef, d.PlanRef, d.AgentContextRef})
			}
			require.Empty(t, p.doc.Sections, "no item is placed before the budget")
		})
	}
}

// TestStageItemRecords: ranked items, then losers, then the earlier
// exclusions by reason, key and project.
func TestStageItemRecords(t *testing.T) {
	t.Parallel()
	hidden := func(v *ctxtype.Version) { v.Roles = ctxtype.Roles{HiddenFrom: []string{"implementer"}} }
	r := req(func(r *ctxtype.Request) { r.Task = &ctxtype.Task{Objective: "Go"} })
	stages := selection[:len(selection)-1]
	p := setup(t, r, cands(
		ver("acme", "b.hidden", "x", hidden),
		ver("_shared", "a.hidden", "x", hidden),
		ver("acme", "a.hidden", "x", hidden),
		ver("acme", "tmpl", "{{nope}}", func(v *ctxtype.Version) { v.Template = true }),
		ver("_shared", "over", "x"),
		ver("acme", "over", "y", func(v *ctxtype.Version) { v.Kind = "skill" }),
		ver("acme", "win", "30", func(v *ctxtype.Version) { v.StateKey, v.Authority = "s", "policy" }),
		ver("acme", "lose", "14", func(v *ctxtype.Version) { v.StateKey = "s" }),
	), stages...)
	p.itemRecords()
	require.Equal(t, []string{
		"request:task", "request:objective",
		"item:win", "item:over",
		"item:lose:contradicted",
		"item:a.hidden:hidden", "item:a.hidden:hidden", "item:b.hidden:hidden", "item:over:overridden", "item:tmpl:template_unresolved",
	}, subjects(p.recs))
	require.Equal(t, ctxtype.SharedProject, p.recs[5].SubjectProject, "hidden a.hidden: _shared before acme")
	require.Equal(t, []int{1, 2}, []int{p.recs[2].Rank, p.recs[3].Rank})
	require.Equal(t, []string{render.ProjectKnowledge, render.ActiveSkills}, []string{p.recs[2].Section, p.recs[3].Section})
	for _, c := range append(append([]*cand{}, p.ranked...), p.losers...) {
		require.Equal(t, c.v.Key, p.recs[c.ref].SubjectKey, "a candidate's ref is its record")
	}
	require.Equal(t, `contradicted by win v1 on state_key "s" (policy/probable/priority 0 over evidence/probable/priority 0)`, p.recs[4].Detail)
}

// sameSize is n always-on items whose blocks count the same, ranked by key.
func sameSize(n int) []Candidate {
	var vs []*ctxtype.Version
	for i := range n {
		vs = append(vs, ver("acme", fmt.Sprintf("k%02d", i), fmt.Sprintf("fact number %02d", i), func(v *ctxtype.Version) { v.Priority = n - i }))
	}
	return cands(vs...)
}

// TestStageBudget: entries go in by rank while they fit, one that does not
// is skipped rather than ending the pass, and request parts over the
// budget leave no room at all.
func TestStageBudget(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("word ", 200)
	cs := cands(
		ver("acme", "a.big", big, func(v *ctxtype.Version) { v.Priority = 9 }),
		ver("acme", "b.small", "Short fact.", func(v *ctxtype.Version) { v.Priority = 5 }),
		ver("acme", "c.small", "Other fact.", func(v *ctxtype.Version) { v.Priority = 1 }),
	)
	roomy := setup(t, req(func(r *ctxtype.Request) { r.TokenBudget = ctxtype.MaxBudget }), cs, selection...)
	require.NoError(t, roomy.budget())
	require.Equal(t, []bool{true, true, true}, roomy.included)
	parts := ctxtype.MaxBudget - roomy.ranked[0].remaining // what the request's own parts cost
	a, b, c := roomy.ranked[0], roomy.ranked[1], roomy.ranked[2]
	require.Greater(t, a.needed, a.blockCost, "the first entry of a section brings its heading")
	require.Equal(t, b.blockCost, b.needed, "later entries of a started section do not")

	// Room for the two small ones, the second with its heading: the big one is skipped, not the end.
	budget := parts + b.needed + (a.needed - a.blockCost) + c.needed
	tight := setup(t, req(func(r *ctxtype.Request) { r.TokenBudget = budget }), cs, selection...)
	require.NoError(t, tight.budget())
	require.Equal(t, []bool{false, true, true}, tight.included)
	require.False(t, tight.inviolable)
	require.Equal(t, budget-parts, tight.ranked[0].remaining, "what was left when the big one was priced")

	over := setup(t, req(func(r *ctxtype.Request) { r.TokenBudget = 5; r.Task = &ctxtype.Task{Objective: big} }), cs, selection...)
	require.NoError(t, over.budget())
	require.True(t, over.inviolable)
	require.Equal(t, []ctxtype.Gap{{Reason: gapInviolable}}, over.gaps)
	require.Equal(t, []bool{false, false, false}, over.included)
}

// TestStageRender: the exact count has the last word, dropping from the
// bottom, and the second pass is bounded.
func TestStageRender(t *testing.T) {
	t.Parallel()
	cs := sameSize(10)
	all := setup(t, req(func(r *ctxtype.Request) { r.TokenBudget = ctxtype.MaxBudget }), cs, selection...)
	require.NoError(t, all.budget())
	require.NoError(t, all.render())
	require.NotContains(t, all.included, false)

	// The estimate let everything in, but the exact text is over: the
	// lowest-ranked entry goes, and nothing else.
	r := req(func(r *ctxtype.Request) { r.TokenBudget = ctxtype.MaxBudget })
	p := setup(t, r, cs, selection...)
	require.NoError(t, p.budget())
	r.TokenBudget = all.used - 1
	require.NoError(t, p.render())
	require.Equal(t, []bool{true, true, true, true, true, true, true, true, true, false}, p.included)
	n, err := p.count(p.text)
	require.NoError(t, err)
	require.Equal(t, n, p.used)
	require.LessOrEqual(t, p.used, r.TokenBudget)
	require.Equal(t, render.Text(p.pieces), p.text)

	// Left out by the estimate, all fit exactly: the second pass takes at
	// most maxFillTries of them, by rank.
	q := setup(t, req(func(r *ctxtype.Request) { r.TokenBudget = ctxtype.MaxBudget }), cs, selection...)
	require.NoError(t, q.budget())
	clear(q.included)
	require.NoError(t, q.render())
	require.Equal(t, []bool{true, true, true, true, true, true, true, true, false, false}, q.included)
	require.Contains(t, q.text, "fact number 07")
	require.NotContains(t, q.text, "fact number 08")
}

// TestStageRecords: spans, positions, budget exclusions and their gaps, and
// no record for a request part with no text.
func TestStageRecords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		budget     int
		objective  string
		detail     string
		wantFirsts []string
	}{
		{"budget", 0, "", "needed ", []string{"request:task"}},
		{"inviolable", 5, strings.Repeat("long objective ", 20), "alone exceed the budget of 5", []string{"request:task", "request:objective"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := sameSize(3)
			r := req(func(r *ctxtype.Request) {
				r.TokenBudget = ctxtype.MaxBudget
				r.Task = &ctxtype.Task{TaskID: "T", Objective: tc.objective}
			})
			probe := setup(t, r, cs, selection...)
			require.NoError(t, probe.budget())
			require.NoError(t, probe.render())
			r.TokenBudget = tc.budget
			if r.TokenBudget == 0 {
				r.TokenBudget = probe.used - 1 // the last entry must go
			}
			p := setup(t, r, cs, selection...)
			require.NoError(t, p.budget())
			require.NoError(t, p.render())
			require.NoError(t, p.records())
			require.Equal(t, tc.wantFirsts, subjects(p.recs)[:len(tc.wantFirsts)], "an empty objective has no record")
			var gaps []ctxtype.Gap
			for i, rec := range p.recs {
				if rec.SubjectKind != ctxtype.SubjectItem {
					require.NotNil(t, rec.Span)
					continue
				}
				if rec.Decision == ctxtype.Included {
					require.Equal(t, i-len(tc.wantFirsts), rec.Position, "positions count within the section")
					require.Equal(t, blockOf(t, p, rec), p.text[rec.Span.Start:rec.Span.End])
					continue
				}
				require.Nil(t, rec.Span)
				require.Equal(t, ctxtype.ReasonBudget, rec.Reason)
				require.Contains(t, rec.Detail, tc.detail)
				require.Positive(t, rec.Tokens)
				gaps = append(gaps, ctxtype.Gap{Key: rec.SubjectKey, Version: 1, Tokens: rec.Tokens, Reason: ctxtype.ReasonBudget})
			}
			require.NotEmpty(t, gaps)
			require.Equal(t, gaps, p.gaps[len(p.gaps)-len(gaps):], "one gap per entry the budget left out")
		})
	}
}

// blockOf is the markdown block of the item a record is about.
func blockOf(t *testing.T, p *pipeline, rec ctxtype.Record) string {
	t.Helper()
	for _, c := range p.ranked {
		if c.v.Key == rec.SubjectKey {
			return render.MarkdownItemBlock(c.title, c.content)
		}
	}
	t.Fatalf("no candidate %s", rec.SubjectKey)
	return ""
}
