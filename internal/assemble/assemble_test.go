package assemble

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/token"
)

var update = flag.Bool("update", false, "rewrite golden files")

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// ver builds a version as a write would store it, block counts included.
func ver(project, key, content string, mods ...func(*ctxtype.Version)) *ctxtype.Version {
	v := &ctxtype.Version{Project: project, Key: key, Version: 1, Fields: ctxtype.Fields{
		Kind: "knowledge", Source: "project", Content: content, Authority: "evidence", Confidence: "probable",
		Slot: "system", Trigger: ctxtype.Trigger{Always: true}, Metadata: json.RawMessage(`{}`),
	}, CreatedAt: t0.Add(-time.Hour)}
	for _, m := range mods {
		m(v)
	}
	b, err := token.CountAll(render.MarkdownItemBlock(v.Title, v.Content))
	if err != nil {
		panic(err)
	}
	v.BlockTokens = b
	return v
}

func cands(vs ...*ctxtype.Version) []Candidate {
	out := make([]Candidate, len(vs))
	for i, v := range vs {
		out[i] = Candidate{Version: v}
	}
	return out
}

func req(mods ...func(*ctxtype.Request)) *ctxtype.Request {
	r := &ctxtype.Request{TargetRole: "implementer"}
	for _, m := range mods {
		m(r)
	}
	if err := r.Normalize(); err != nil {
		panic(err)
	}
	return r
}

func run(t *testing.T, r *ctxtype.Request, cs []Candidate) *Result {
	t.Helper()
	res, err := Assemble(Input{Project: "acme", Request: r, Candidates: cs, Now: t0})
	require.NoError(t, err)
	checkInvariants(t, r, res)
	return res
}

// checkInvariants holds for every packet: the budget is kept unless the
// inviolable parts alone exceed it, spans are disjoint and inside the text,
// the used count is the exact count of the text.
func checkInvariants(t *testing.T, r *ctxtype.Request, res *Result) {
	t.Helper()
	n, err := token.Count(r.Tokenizer, res.Rendered)
	require.NoError(t, err)
	require.Equal(t, n, res.Used, "used is the exact count of the rendered text")
	inviolable := false
	for _, g := range res.Gaps {
		inviolable = inviolable || g.Reason == "budget_exceeded_by_inviolable"
	}
	if !inviolable {
		require.LessOrEqual(t, res.Used, res.Allocated)
	}
	var spans []ctxtype.Span
	for _, rec := range res.Records {
		if rec.Span != nil {
			require.True(t, rec.Span.Start < rec.Span.End && rec.Span.End <= len(res.Rendered), "span %v", rec.Span)
			spans = append(spans, *rec.Span)
		}
		if rec.Decision == ctxtype.Included {
			require.NotNil(t, rec.Span, "an included record has a span: %+v", rec)
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start })
	for i := 1; i < len(spans); i++ {
		require.LessOrEqual(t, spans[i-1].End, spans[i].Start, "spans overlap")
	}
}

func find(res *Result, key string) *ctxtype.Record {
	for i := range res.Records {
		if res.Records[i].SubjectKind == ctxtype.SubjectItem && res.Records[i].SubjectKey == key {
			return &res.Records[i]
		}
	}
	return nil
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./internal/assemble -update to create it")
	require.Equal(t, string(want), got)
}

// richScenario has a bit of everything: task, criteria, plan, host state,
// shared and project items, a skill, a tool, a message slot, a contradiction.
func richScenario() (*ctxtype.Request, []Candidate) {
	r := req(func(r *ctxtype.Request) {
		r.TargetRole = "critic"
		r.Task = &ctxtype.Task{TaskID: "T-42", StepID: "review", StepAttempt: 2, Objective: "Review the refund patch.\nCheck the edge cases.",
			AllowedOutcomes: []string{"approve", "reject"}, PermissionCeiling: "read-only"}
		r.AcceptanceCriteria = []ctxtype.Criterion{{ID: "AC1", Description: "Refunds over 500 EUR need approval", VerificationKind: "critic", TargetRef: "src/refund.go", Required: true}}
		r.Plan = &ctxtype.Plan{PlanHash: "abc123", ActiveStepIndex: 1, TotalSteps: 3, SettledDecisions: []string{"Use the ledger API"}}
		r.History = []ctxtype.Message{{Role: "user", Author: "person", Content: "Please check the refund flow."}}
		r.ToolResults = []ctxtype.ToolResult{{Tool: "run_tests", Status: "ok", Content: "PASS"}}
		r.AgentContext = map[string]any{"branch": "feat/refunds", "openFiles": []any{}, "ci": map[string]any{"status": "green"}}
	})
	cs := cands(
		ver("_shared", "style", "Be concise.", func(v *ctxtype.Version) { v.Title = "Style" }),
		ver("acme", "refund.window", "Refunds within 30 days.", func(v *ctxtype.Version) {
			v.StateKey, v.Authority, v.Title = "refund.window", "policy", "Refund window"
		}),
		ver("acme", "refund.window.old", "Refunds within 14 days.", func(v *ctxtype.Version) { v.StateKey = "refund.window" }),
		ver("acme", "refund.rules", "Refunds over 500 EUR need a manager.\nLog every refund.", func(v *ctxtype.Version) {
			v.Trigger = ctxtype.Trigger{Keywords: []string{"refund"}}
			v.Priority = 5
		}),
		ver("acme", "deploy.state", "Staging is frozen.", func(v *ctxtype.Version) { v.Kind = "state" }),
		ver("acme", "review.skill", "Read the diff twice.", func(v *ctxtype.Version) { v.Kind, v.Title = "skill", "Reviewing" }),
		ver("acme", "tests.tool", "Runs the test suite.", func(v *ctxtype.Version) {
			v.Slot, v.Title, v.Trigger = "tools", "run_tests", ctxtype.Trigger{Tool: ptr("run_tests")}
		}),
		ver("acme", "greeting", "Hello, critic.", func(v *ctxtype.Version) { v.Slot = "messages" }),
	)
	return r, cs
}

func ptr[T any](v T) *T { return &v }

func TestGoldenFormats(t *testing.T) {
	t.Parallel()
	for _, f := range []ctxtype.Format{ctxtype.Markdown, ctxtype.Blocks, ctxtype.JSON} {
		r, cs := richScenario()
		r.Format = f
		res := run(t, r, cs)
		golden(t, "rich."+string(f), res.Rendered)
		if f == ctxtype.JSON {
			var doc map[string]any
			require.NoError(t, json.Unmarshal([]byte(res.Rendered), &doc), "the json format is one JSON document")
		}
		// Every included item's span is exactly its block in the text.
		for _, rec := range res.Records {
			if rec.SubjectKind == ctxtype.SubjectItem && rec.Decision == ctxtype.Included {
				block := res.Rendered[rec.Span.Start:rec.Span.End]
				require.NotEmpty(t, block)
			}
		}
	}
}

func TestPipelineDecisions(t *testing.T) {
	t.Parallel()
	r, cs := richScenario()
	res := run(t, r, cs)
	rec := find(res, "refund.rules")
	require.Equal(t, ctxtype.Included, rec.Decision)
	require.Equal(t, `keyword:"refund"@history[0]`, rec.Rule)
	require.Equal(t, render.ProjectKnowledge, rec.Section)
	require.Equal(t, "- Refunds over 500 EUR need a manager.\n  Log every refund.\n", res.Rendered[rec.Span.Start:rec.Span.End])
	old := find(res, "refund.window.old")
	require.Equal(t, ctxtype.Excluded, old.Decision)
	require.Equal(t, ctxtype.ReasonContradicted, old.Reason)
	require.Contains(t, old.Detail, "refund.window v1")
	line := res.Rendered[old.Span.Start:old.Span.End]
	require.Equal(t, "- ⚠️ state \"refund.window\": kept: \"Refunds within 30 days.\" (policy) over \"Refunds within 14 days.\" (evidence) [`refund.window` v1 over `refund.window.old` v1]\n", line,
		"the line names the facts, as KXM prints the losing fact")
	require.Equal(t, 1, strings.Count(res.Rendered, "14 days"), "the loser's content is only in its contradiction line")
	require.Greater(t, old.Tokens, 0, "the line is budgeted: the loser's record carries its tokens")

	// A packet of render version 1 named only the keys, and replays so.
	res2, err := Assemble(Input{Project: "acme", Request: r, Candidates: cs, Now: t0, Render: Render1})
	require.NoError(t, err)
	old2 := find(res2, "refund.window.old")
	require.Equal(t, "- ⚠️ state \"refund.window\": kept `refund.window` v1 (policy) over `refund.window.old` v1 (evidence)\n", res2.Rendered[old2.Span.Start:old2.Span.End])
	require.NotContains(t, res2.Rendered, "14 days")
	require.Equal(t, "tool:run_tests", find(res, "tests.tool").Rule)
	require.Equal(t, render.Tools, find(res, "tests.tool").Section)
	require.Equal(t, render.Messages, find(res, "greeting").Section)
	require.Equal(t, render.ActiveSkills, find(res, "review.skill").Section)
	require.Equal(t, render.CurrentState, find(res, "deploy.state").Section)
	require.Equal(t, render.SharedDefaults, find(res, "style").Section)
	require.Equal(t, "shared", find(res, "style").Layer)
	// The host state goes first under Current State, with its empty array said in words.
	require.Contains(t, res.Rendered, "### Current State\nbranch: feat/refunds\nci:\n  status: green\nNo open files loaded.\n- Staging is frozen.\n")
	// Rank: policy first, then priority.
	require.Equal(t, 1, find(res, "refund.window").Rank)
	require.Equal(t, 2, find(res, "refund.rules").Rank)
}

func TestKeywordsFireOnlyOnWhatAPersonSaid(t *testing.T) {
	t.Parallel()
	kw := ver("acme", "refunds", "Refund policy.", func(v *ctxtype.Version) { v.Trigger = ctxtype.Trigger{Keywords: []string{"refund", "money back"}} })
	for _, tc := range []struct {
		name    string
		history []ctxtype.Message
		rule    string
	}{
		{"person", []ctxtype.Message{{Role: "user", Author: "person", Content: "hi"}, {Role: "user", Author: "person", Content: "I want a Refund!"}}, `keyword:"refund"@history[1]`},
		{"phrase", []ctxtype.Message{{Role: "user", Author: "person", Content: "Can I get my money back?"}}, `keyword:"money back"@history[0]`},
		{"agent in a user message", []ctxtype.Message{{Role: "user", Author: "agent", Content: "refund"}}, ""},
		{"library summary", []ctxtype.Message{{Role: "user", Author: "library", Content: "Summary: the user asked for a refund."}}, ""},
		{"assistant", []ctxtype.Message{{Role: "assistant", Author: "agent", Content: "I can refund that."}}, ""},
		{"not a whole word", []ctxtype.Message{{Role: "user", Author: "person", Content: "refunds and prerefund"}}, ""},
		{"first matching message wins", []ctxtype.Message{{Role: "user", Author: "agent", Content: "refund"}, {Role: "user", Author: "person", Content: "money back please"}, {Role: "user", Author: "person", Content: "refund"}}, `keyword:"money back"@history[1]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, req(func(r *ctxtype.Request) { r.History = tc.history }), cands(kw))
			rec := find(res, "refunds")
			if tc.rule == "" {
				require.Nil(t, rec, "did not fire, so not recorded")
				require.NotContains(t, res.Rendered, "Refund policy.")
				return
			}
			require.NotNil(t, rec)
			require.Equal(t, tc.rule, rec.Rule)
		})
	}
}

// TestKeywordsMatchByStems: a stem-mode trigger matches inflected forms
// (as a phrase of stems), says so in its rule with the words that
// matched, and explains itself when it did not fire; a whole-word trigger
// with the same keywords does not match them.
func TestKeywordsMatchByStems(t *testing.T) {
	t.Parallel()
	stem := ver("acme", "cb.stem", "Chargeback policy.", func(v *ctxtype.Version) {
		v.Trigger = ctxtype.Trigger{Keywords: []string{"chargeback", "dispute resolution"}, Match: ctxtype.MatchStem}
	})
	word := ver("acme", "cb.word", "Chargeback words.", func(v *ctxtype.Version) {
		v.Trigger = ctxtype.Trigger{Keywords: []string{"chargeback", "dispute resolution"}}
	})
	for _, tc := range []struct {
		name, said, stemRule, wordRule string
	}{
		{"plural", "We got two CHARGEBACKS.", `keyword(stem):"chargeback"@history[0] matched "chargebacks"`, ""},
		{"same word", "a chargeback", `keyword(stem):"chargeback"@history[0] matched "chargeback"`, `keyword:"chargeback"@history[0]`},
		{"phrase of stems", "disputed resolutions", `keyword(stem):"dispute resolution"@history[0] matched "disputed resolutions"`, ""},
		{"not a phrase", "resolutions disputed", "", ""},
		{"other words", "charge backs", "", ""},
		{"other stem", "chargebackish", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req(func(r *ctxtype.Request) {
				r.History = []ctxtype.Message{{Role: "user", Author: "person", Content: tc.said}}
			})
			res := run(t, r, cands(stem, word))
			for key, want := range map[string]string{"cb.stem": tc.stemRule, "cb.word": tc.wordRule} {
				rec := find(res, key)
				if want == "" {
					require.Nil(t, rec, "%s did not fire", key)
					continue
				}
				require.NotNil(t, rec, key)
				require.Equal(t, want, rec.Rule)
			}
			if tc.stemRule == "" {
				require.Contains(t, NotTriggered(r, stem), `(match stem)`)
			}
		})
	}
	require.NotContains(t, NotTriggered(req(), word), "stem")
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	tmpl := func(key, content string) *ctxtype.Version {
		return ver("acme", key, content, func(v *ctxtype.Version) { v.Template = true })
	}
	r := req(func(r *ctxtype.Request) {
		r.Variables = map[string]any{"customer": "Ada", "limit": json.Number("5e2")}
		r.Task = &ctxtype.Task{Objective: "Ship it"}
	})
	res := run(t, r, cands(
		tmpl("ok", "Hello {{customer}} in {{ project }} as {{target_role}} at {{now}}: {{task.objective}}, limit {{limit}}."),
		tmpl("hole", "Dear {{customer}}, your order {{order_id}} shipped."),
	))
	require.Contains(t, res.Rendered, "- Hello Ada in acme as implementer at 2026-11-29T12:00:00Z: Ship it, limit 500.\n")
	hole := find(res, "hole")
	require.Equal(t, ctxtype.ReasonTemplateUnresolved, hole.Reason)
	require.Contains(t, hole.Detail, "order_id")
	require.NotContains(t, res.Rendered, "{{")
	require.NotContains(t, res.Rendered, "Dear")
}

func TestSharedOverriddenByProject(t *testing.T) {
	t.Parallel()
	res := run(t, req(), cands(
		ver("_shared", "tone", "Be formal."),
		ver("acme", "tone", "Be friendly.", func(v *ctxtype.Version) { v.Trigger = ctxtype.Trigger{PinnedOnly: true} }),
		ver("_shared", "lang", "Answer in English."),
	))
	var over *ctxtype.Record
	for i := range res.Records {
		if res.Records[i].SubjectKey == "tone" && res.Records[i].SubjectProject == "_shared" {
			over = &res.Records[i]
		}
	}
	require.NotNil(t, over)
	require.Equal(t, ctxtype.ReasonOverridden, over.Reason)
	require.Contains(t, over.Detail, "project item tone v1")
	require.NotContains(t, res.Rendered, "Be formal.")
	require.NotContains(t, res.Rendered, "Be friendly.", "the project item overrides even when it does not fire")
	require.Contains(t, res.Rendered, "### Shared Defaults\n- Answer in English.\n")
}

func TestContradictionsResolvedByAuthorityThenConfidenceThenPriorityThenAge(t *testing.T) {
	t.Parallel()
	mk := func(key, content, auth, conf string, prio int, age time.Duration) *ctxtype.Version {
		return ver("acme", key, content, func(v *ctxtype.Version) {
			v.StateKey, v.Authority, v.Confidence, v.Priority, v.CreatedAt = "s", auth, conf, prio, t0.Add(-age)
		})
	}
	for _, tc := range []struct {
		name   string
		a, b   *ctxtype.Version
		winner string
	}{
		{"authority", mk("a", "A", "hypothesis", "verified", 9, 0), mk("b", "B", "policy", "uncertain", 0, time.Hour), "b"},
		{"confidence", mk("a", "A", "evidence", "verified", 0, time.Hour), mk("b", "B", "evidence", "probable", 9, 0), "a"},
		{"priority", mk("a", "A", "evidence", "probable", 1, 0), mk("b", "B", "evidence", "probable", 2, time.Hour), "b"},
		{"newer", mk("a", "A", "evidence", "probable", 0, time.Minute), mk("b", "B", "evidence", "probable", 0, time.Hour), "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, req(), cands(tc.a, tc.b))
			loser := map[string]string{"a": "b", "b": "a"}[tc.winner]
			require.Equal(t, ctxtype.Included, find(res, tc.winner).Decision)
			require.Equal(t, ctxtype.ReasonContradicted, find(res, loser).Reason)
			require.Contains(t, res.Rendered, "### Active Contradictions\n")
		})
	}
	// The same content under one state key is no contradiction.
	res := run(t, req(), cands(mk("a", "Same", "evidence", "probable", 0, 0), mk("b", "Same", "policy", "probable", 0, 0)))
	require.Equal(t, ctxtype.Included, find(res, "a").Decision)
	require.Equal(t, ctxtype.Included, find(res, "b").Decision)
}

func TestVisibilityAndValidity(t *testing.T) {
	t.Parallel()
	res := run(t, req(), cands(
		ver("acme", "secret", "Rubric for critics only.", func(v *ctxtype.Version) { v.Roles = ctxtype.Roles{VisibleTo: []string{"critic"}} }),
		ver("acme", "notyet", "Future rule.", func(v *ctxtype.Version) { v.ValidFrom = ptr(t0.Add(time.Hour)) }),
		ver("acme", "expired", "Old rule.", func(v *ctxtype.Version) { v.ValidUntil = ptr(t0) }),
		ver("acme", "now", "Current rule.", func(v *ctxtype.Version) { v.ValidFrom, v.ValidUntil = ptr(t0), ptr(t0.Add(time.Second)) }),
	))
	hidden := find(res, "secret")
	require.Equal(t, ctxtype.ReasonHidden, hidden.Reason)
	require.True(t, hidden.AdminOnly)
	require.NotContains(t, res.Rendered, "Rubric")
	require.Nil(t, find(res, "notyet"))
	require.Nil(t, find(res, "expired"))
	require.Equal(t, ctxtype.Included, find(res, "now").Decision)
}

func TestBudget(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("word ", 300)
	cs := cands(
		ver("acme", "a.big", big, func(v *ctxtype.Version) { v.Priority = 9 }),
		ver("acme", "b.small", "Short fact.", func(v *ctxtype.Version) { v.Priority = 1 }),
	)
	res := run(t, req(func(r *ctxtype.Request) { r.TokenBudget = 60 }), cs)
	require.Equal(t, ctxtype.ReasonBudget, find(res, "a.big").Reason)
	require.Equal(t, ctxtype.Included, find(res, "b.small").Decision, "a smaller later item still fits")
	require.Equal(t, []ctxtype.Gap{{Key: "a.big", Version: 1, Tokens: find(res, "a.big").Tokens, Reason: "budget"}}, res.Gaps)
	require.Greater(t, find(res, "a.big").Tokens, 250)

	// Inviolable parts alone over the budget: still a packet, with the gap.
	res = run(t, req(func(r *ctxtype.Request) {
		r.TokenBudget = 10
		r.Task = &ctxtype.Task{Objective: big}
	}), cs)
	require.Greater(t, res.Used, res.Allocated)
	require.Equal(t, "budget_exceeded_by_inviolable", res.Gaps[0].Reason)
	require.Contains(t, res.Rendered, big[:100])
	require.Equal(t, ctxtype.ReasonBudget, find(res, "b.small").Reason)
}

// TestEditorBridge is the editor seed's example: the host's state reaches
// the agent as a plain object; media listed or "No media assets loaded.";
// the tools the model may call listed.
func TestEditorBridge(t *testing.T) {
	t.Parallel()
	tool := ver("acme", "tool.transcribe", "Transcribe a video asset to text. Arguments: asset id.", func(v *ctxtype.Version) {
		v.Slot, v.Kind, v.Title = "tools", "tool", "transcribe_video"
	})
	withMedia := req(func(r *ctxtype.Request) {
		r.AgentContext = map[string]any{"projectId": "proj-1", "activeSceneId": "scene-1", "playbackTimeMs": json.Number("1200"),
			"mediaAssets": []any{
				map[string]any{"id": "v1", "name": "clip.mp4", "type": "video", "duration": json.Number("30")},
				map[string]any{"id": "v2", "name": "intro.mov", "type": "video", "duration": json.Number("12.5")},
			}}
	})
	res := run(t, withMedia, cands(tool))
	golden(t, "editor.media.markdown", res.Rendered)
	require.Contains(t, res.Rendered, "  - duration: 30, id: v1, name: clip.mp4, type: video\n")
	require.Contains(t, res.Rendered, "  - duration: 12.5, id: v2, name: intro.mov, type: video\n")
	require.Contains(t, res.Rendered, "## 6. Tools\n- transcribe_video: Transcribe a video asset")

	empty := req(func(r *ctxtype.Request) {
		r.AgentContext = map[string]any{"projectId": nil, "activeSceneId": nil, "mediaAssets": []any{}, "playbackTimeMs": json.Number("0")}
	})
	res = run(t, empty, cands(tool))
	golden(t, "editor.empty.markdown", res.Rendered)
	require.Contains(t, res.Rendered, "No media assets loaded.\n")
	require.Contains(t, res.Rendered, "transcribe_video")
}

// TestProperties runs many random packets through the invariants, twice
// each, and checks that hidden items never appear.
func TestProperties(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"refund", "ledger", "deploy", "alpha", "beta", "gamma", "delta", "policy", "money", "back"}
	text := func(n int) string {
		var b []string
		for range n {
			b = append(b, words[rng.IntN(len(words))])
		}
		return strings.Join(b, " ")
	}
	for iter := range 150 {
		var vs []*ctxtype.Version
		for i := range rng.IntN(25) {
			project := "acme"
			if rng.IntN(4) == 0 {
				project = "_shared"
			}
			vs = append(vs, ver(project, fmt.Sprintf("k%02d", i), text(1+rng.IntN(60))+fmt.Sprintf(" marker%02d", i), func(v *ctxtype.Version) {
				v.Priority = rng.IntN(5)
				v.Authority = []string{"policy", "instruction", "evidence", "hypothesis"}[rng.IntN(4)]
				v.Kind = []string{"knowledge", "state", "skill", "decision"}[rng.IntN(4)]
				v.Slot = []string{"system", "system", "system", "tools", "messages"}[rng.IntN(5)]
				if rng.IntN(5) == 0 {
					v.Roles = ctxtype.Roles{HiddenFrom: []string{"implementer"}}
				}
				if rng.IntN(4) == 0 {
					v.StateKey = fmt.Sprintf("s%d", rng.IntN(3))
				}
				if rng.IntN(3) == 0 {
					v.Trigger = ctxtype.Trigger{Keywords: []string{words[rng.IntN(len(words))]}}
				}
				if rng.IntN(6) == 0 {
					v.Title = "T" + text(1)
				}
			}))
		}
		r := req(func(r *ctxtype.Request) {
			r.TokenBudget = 40 + rng.IntN(600)
			r.Format = []ctxtype.Format{ctxtype.Markdown, ctxtype.Blocks, ctxtype.JSON, ctxtype.Navi}[rng.IntN(4)]
			r.Tokenizer = []token.Tokenizer{token.O200kBase, token.Cl100kBase}[rng.IntN(2)]
			r.History = []ctxtype.Message{{Role: "user", Author: "person", Content: text(5)}}
			if rng.IntN(2) == 0 {
				r.Task = &ctxtype.Task{Objective: text(1 + rng.IntN(40))}
			}
		})
		res1 := run(t, r, cands(vs...))
		res2 := run(t, r, cands(vs...))
		require.Equal(t, res1.Rendered, res2.Rendered, "iteration %d: same input, same bytes", iter)
		require.Equal(t, res1.Records, res2.Records)
		for _, v := range vs {
			if !v.Roles.Visible("implementer") {
				require.NotContains(t, res1.Rendered, strings.Fields(v.Content)[len(strings.Fields(v.Content))-1], "iteration %d: hidden %s appeared", iter, v.Key)
			}
		}
		for _, rec := range res1.Records {
			if rec.SubjectKind == ctxtype.SubjectItem && rec.Decision == ctxtype.Included {
				marker := "marker" + strings.TrimPrefix(rec.SubjectKey, "k")
				require.Contains(t, res1.Rendered[rec.Span.Start:rec.Span.End], marker, "iteration %d: the span holds the item", iter)
			}
		}
	}
}

// BenchmarkPipeline is the pure pipeline on 300 candidates (200 always-on,
// 100 keyword items), 16k budget, markdown, stored block counts.
func BenchmarkPipeline(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	words := strings.Fields("refund ledger deploy alpha beta gamma delta policy money back customer order invoice")
	var vs []*ctxtype.Version
	for i := range 300 {
		var sb strings.Builder
		for sb.Len() < 500 {
			sb.WriteString(words[rng.IntN(len(words))] + " ")
		}
		vs = append(vs, ver("acme", fmt.Sprintf("k%03d", i), sb.String(), func(v *ctxtype.Version) {
			v.Priority = rng.IntN(5)
			if i >= 200 {
				v.Trigger = ctxtype.Trigger{Keywords: []string{words[rng.IntN(len(words))]}}
			}
		}))
	}
	r := req(func(r *ctxtype.Request) {
		r.History = []ctxtype.Message{{Role: "user", Author: "person", Content: "my refund for the order failed"}}
	})
	cs := cands(vs...)
	for b.Loop() {
		if _, err := Assemble(Input{Project: "acme", Request: r, Candidates: cs, Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestExactFitIncludesEverything: when the whole packet fits the budget
// exactly, nothing is left out — the per-block estimate may overcount, the
// exact count decides.
func TestExactFitIncludesEverything(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 9))
	for iter := range 60 {
		var vs []*ctxtype.Version
		for i := range 1 + rng.IntN(12) {
			vs = append(vs, ver("acme", fmt.Sprintf("k%02d", i), strings.Repeat("fact ", 1+rng.IntN(8)), func(v *ctxtype.Version) {
				v.Kind = []string{"knowledge", "state", "skill"}[rng.IntN(3)]
				v.Slot = []string{"system", "system", "tools", "messages"}[rng.IntN(4)]
				if rng.IntN(2) == 0 {
					v.Title = "T"
				}
				if rng.IntN(3) == 0 {
					v.Project = "_shared"
				}
			}))
		}
		format := []ctxtype.Format{ctxtype.Markdown, ctxtype.Blocks, ctxtype.JSON, ctxtype.Navi}[rng.IntN(4)]
		all := run(t, req(func(r *ctxtype.Request) { r.Format = format; r.TokenBudget = ctxtype.MaxBudget }), cands(vs...))
		exact := run(t, req(func(r *ctxtype.Request) { r.Format = format; r.TokenBudget = all.Used }), cands(vs...))
		require.Empty(t, exact.Gaps, "iteration %d (%s): budget %d fits everything", iter, format, all.Used)
		require.Equal(t, all.Rendered, exact.Rendered)
	}
}

// TestContradictionWinnerFitsWithoutItsPairLines: when the winner fits
// but its Active Contradictions lines do not, the fact still goes in.
func TestContradictionWinnerFitsWithoutItsPairLines(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("policy text ", 40)
	w := ver("acme", "w", big, func(v *ctxtype.Version) { v.StateKey, v.Authority = "s", "policy" })
	l := ver("acme", "l", "Loser short", func(v *ctxtype.Version) { v.StateKey = "s" })
	alone := run(t, req(func(r *ctxtype.Request) { r.TokenBudget = ctxtype.MaxBudget }), cands(w))
	res := run(t, req(func(r *ctxtype.Request) { r.TokenBudget = alone.Used + 2 }), cands(w, l))
	require.Equal(t, ctxtype.Included, find(res, "w").Decision)
	require.Equal(t, ctxtype.ReasonContradicted, find(res, "l").Reason)
	require.Nil(t, find(res, "l").Span, "the pair line did not fit")
	require.Empty(t, res.Gaps)
	roomy := run(t, req(func(r *ctxtype.Request) { r.TokenBudget = ctxtype.MaxBudget }), cands(w, l))
	require.NotNil(t, find(roomy, "l").Span, "with room, the pair is listed")
}

func TestScore(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0.42: "0.42", 0.1: "0.10", 1: "1.00", 0.033333: "0.0333", 0.00001: "0.00"} {
		require.Equal(t, want, score(in), "%v", in)
	}
}

// TestHiddenProjectItemDoesNotShadowShared: for a role that may not see
// the project item, the _shared one stands, and nothing tells the role why.
func TestHiddenProjectItemDoesNotShadowShared(t *testing.T) {
	t.Parallel()
	res := run(t, req(), cands(
		ver("_shared", "ovr", "Shared default visible."),
		ver("acme", "ovr", "Project secret.", func(v *ctxtype.Version) { v.Roles = ctxtype.Roles{HiddenFrom: []string{"implementer"}} }),
	))
	require.Contains(t, res.Rendered, "Shared default visible.")
	require.NotContains(t, res.Rendered, "Project secret.")
	for _, r := range res.Records {
		if r.SubjectKey == "ovr" && r.SubjectProject == "acme" {
			require.Equal(t, ctxtype.ReasonHidden, r.Reason)
			require.True(t, r.AdminOnly)
		}
		if r.SubjectKey == "ovr" && r.SubjectProject == ctxtype.SharedProject {
			require.Equal(t, ctxtype.Included, r.Decision)
		}
	}
}
