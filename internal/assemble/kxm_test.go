package assemble

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/token"
)

// kxmBudget decodes a kxm packet's budget member.
func kxmBudget(t *testing.T, text string) (estimated, allocated int, gaps []string) {
	t.Helper()
	var doc struct {
		Budget struct {
			AllocatedTokens int      `json:"allocatedTokens"`
			EstimatedTokens int      `json:"estimatedTokens"`
			UnresolvedGaps  []string `json:"unresolvedGaps"`
		} `json:"budget"`
	}
	require.NoError(t, json.Unmarshal([]byte(text), &doc), "the kxm format is one JSON document")
	return doc.Budget.EstimatedTokens, doc.Budget.AllocatedTokens, doc.Budget.UnresolvedGaps
}

// TestKXMFormat: the rich scenario in kxm is one document whose
// estimatedTokens is the packet's used count, which is the exact count of
// the text; its id and time are the input's; every included record's span
// is its own part of the document.
func TestKXMFormat(t *testing.T) {
	t.Parallel()
	for _, tk := range []token.Tokenizer{token.O200kBase, token.Cl100kBase} {
		r, cs := richScenario()
		r.Format, r.Tokenizer = ctxtype.KXM, tk
		res, err := Assemble(Input{Project: "acme", PacketID: "ctxpkt_rich", Request: r, Candidates: cs, Now: t0})
		require.NoError(t, err)
		checkInvariants(t, r, res)
		if tk == token.O200kBase {
			golden(t, "rich.kxm", res.Rendered)
		}
		est, alloc, gaps := kxmBudget(t, res.Rendered)
		require.Equal(t, res.Used, est, "estimatedTokens is budget.used")
		require.Equal(t, res.Allocated, alloc)
		require.Empty(t, gaps)
		require.Contains(t, res.Rendered, `"packetId":"ctxpkt_rich"`)
		require.Contains(t, res.Rendered, `"generatedAt":"2026-11-29T12:00:00Z"`)
		for _, rec := range res.Records {
			if rec.Decision != ctxtype.Included || rec.Span == nil {
				continue
			}
			part := res.Rendered[rec.Span.Start:rec.Span.End]
			switch rec.SubjectKind {
			case ctxtype.SubjectItem:
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(part), &m), "an item's span is one object: %s", part)
				require.Equal(t, rec.SubjectKey, m["id"])
			case ctxtype.SubjectRequest:
				require.True(t, strings.HasPrefix(part, `"`) || strings.HasPrefix(part, `{`), "a request part's span is a member or an object: %s", part)
			}
		}
		require.Nil(t, findRequest(res, "objective"), "the objective is part of KXM's task, not a record of its own")
		require.NotNil(t, findRequest(res, "task"))
	}
}

func findRequest(res *Result, key string) *ctxtype.Record {
	for i := range res.Records {
		if res.Records[i].SubjectKind == ctxtype.SubjectRequest && res.Records[i].SubjectKey == key {
			return &res.Records[i]
		}
	}
	return nil
}

// TestKXMBudgetExact: over random candidates, budgets and both tokenizers,
// in both pipelines, the kxm packet's estimatedTokens equals its used
// count, which is the exact count of its text and within the budget; the
// gaps the text lists are the budget exclusions: from Render3 on the first
// of them by layer, key and version (at most MaxGaps, as many as fit),
// then how many more, before Render3 only how many; the same input gives
// the same bytes.
func TestKXMBudgetExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	words := []string{"refund", "ledger", "deploy", "alpha", "beta", "9", "1234", "policy", "ü", "<x>"}
	text := func(n int) string {
		var b []string
		for range n {
			b = append(b, words[rng.IntN(len(words))])
		}
		return strings.Join(b, " ")
	}
	settles := map[string]int{}
	for iter := range 160 {
		var vs []*ctxtype.Version
		for i := range rng.IntN(40) {
			project := []string{"acme", "acme", "_shared"}[rng.IntN(3)]
			vs = append(vs, ver(project, fmt.Sprintf("k%02d", i), text(1+rng.IntN(50))+fmt.Sprintf(" marker%02d", i), func(v *ctxtype.Version) {
				v.Priority = rng.IntN(5)
				v.Kind = []string{"knowledge", "state", "skill", "episode", "tool"}[rng.IntN(5)]
				if rng.IntN(4) == 0 {
					v.StateKey = fmt.Sprintf("s%d", rng.IntN(3))
				}
			}))
		}
		r := req(func(r *ctxtype.Request) {
			r.TokenBudget = 200 + rng.IntN(3000)
			r.Format = ctxtype.KXM
			r.Tokenizer = []token.Tokenizer{token.O200kBase, token.Cl100kBase}[rng.IntN(2)]
			if rng.IntN(2) == 0 {
				r.Task = &ctxtype.Task{Objective: text(1 + rng.IntN(20))}
			}
		})
		in := Input{Project: "acme", PacketID: "ctxpkt_b", Request: r, Candidates: cands(vs...), Now: t0, Render: []int{CurrentRender, Render2}[iter%4/3]}
		res, err := Assemble(in)
		require.NoError(t, err)
		checkInvariants(t, r, res)
		if iter%2 == 1 {
			// Pipeline 2, from a source that reads text on demand.
			src := &MemorySource{Versions: vs, Narrow: true}
			in.Candidates = nil
			res, _, err = AssembleBounded(context.Background(), in, src, Options{})
			require.NoError(t, err)
			checkInvariants(t, r, res)
		}
		est, _, gaps := kxmBudget(t, res.Rendered)
		require.Equal(t, res.Used, est, "iteration %d: estimatedTokens is budget.used", iter)
		want, kind := kxmWantGaps(t, res, in.Render, gaps)
		settles[kind]++
		require.Equal(t, want, gaps, "iteration %d", iter)
		for _, rec := range res.Records {
			if rec.SubjectKind == ctxtype.SubjectItem && rec.Decision == ctxtype.Included {
				marker := "marker" + strings.TrimPrefix(rec.SubjectKey, "k")
				require.Contains(t, res.Rendered[rec.Span.Start:rec.Span.End], marker, "iteration %d: the span holds the item", iter)
			}
		}
		if iter%2 == 0 {
			again, err := Assemble(in)
			require.NoError(t, err)
			require.Equal(t, res.Rendered, again.Rendered, "iteration %d: same input, same bytes", iter)
		}
	}
	for _, k := range []string{"counted before Render3", "named and counted", "counted", "all named", "held everything"} {
		require.Positive(t, settles[k], "some packets: %s (%v)", k, settles)
	}
}

// kxmWantGaps is what a kxm packet's unresolvedGaps must be, given how
// many entries its text names (gaps): the non-budget gaps, the first of
// the budget exclusions named by layer, key and version (at most
// MaxGaps), then the count of the rest the budget tried; and which of
// those shapes it is.
func kxmWantGaps(t *testing.T, res *Result, renderVersion int, gaps []string) ([]string, string) {
	t.Helper()
	want, names := []string{}, []string{}
	budgetGaps := 0
	layer := map[string]string{}
	for _, rec := range res.Records {
		if rec.Reason == ctxtype.ReasonBudget {
			layer[rec.SubjectKey] = rec.SubjectProject
		}
	}
	for _, g := range res.Gaps {
		if g.Reason == ctxtype.ReasonBudget {
			budgetGaps++
			names = append(names, fmt.Sprintf("budget: %s/%s v%d", layer[g.Key], g.Key, g.Version))
		} else {
			want = append(want, g.Reason)
		}
	}
	// Pipeline 2 lists MaxGaps and counts the rest, the untried ones
	// past its cutoff among them; the text counts what was tried.
	budgetGaps += res.GapsMore
	if res.Cutoff != nil {
		budgetGaps -= res.Cutoff.Count
	}
	named := 0
	for _, g := range gaps {
		if strings.HasPrefix(g, "budget: ") && !strings.Contains(g, "entries left out") {
			named++
		}
	}
	require.LessOrEqual(t, named, min(MaxGaps, budgetGaps))
	want = append(want, names[:named]...)
	switch rest := budgetGaps - named; {
	case rest > 0 && renderVersion == Render2:
		return append(want, fmt.Sprintf("budget: %d entries left out (the packet's budget.unresolved_gaps lists them)", rest)), "counted before Render3"
	case rest > 0 && named > 0:
		return append(want, fmt.Sprintf("budget: %d more entries left out", rest)), "named and counted"
	case rest > 0:
		return append(want, fmt.Sprintf("budget: %d entries left out", rest)), "counted"
	case named > 0:
		return want, "all named"
	}
	return want, "held everything"
}

// TestKXMNamesWhatWasLeftOut: a kxm document whose budget left entries
// out names them, by layer, key and version, in rank order, so it stands
// alone; when the budget cannot hold their names, it counts them.
func TestKXMNamesWhatWasLeftOut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Refunds need the order number and a reason. ", 30)
	vs := []*ctxtype.Version{
		ver("acme", "a.first", long, func(v *ctxtype.Version) { v.Priority = 3 }),
		ver("acme", "b.second", long, func(v *ctxtype.Version) { v.Priority = 2 }),
		ver("_shared", "c.third", long, func(v *ctxtype.Version) { v.Priority = 1; v.Version = 4 }),
	}
	assemble := func(budget int) (*Result, []string) {
		r := req(func(r *ctxtype.Request) { r.Format, r.TokenBudget = ctxtype.KXM, budget })
		res := run(t, r, cands(vs...))
		_, _, gaps := kxmBudget(t, res.Rendered)
		return res, gaps
	}
	res, gaps := assemble(600)
	require.Equal(t, ctxtype.Included, find(res, "a.first").Decision)
	require.Equal(t, []string{"budget: acme/b.second v1", "budget: _shared/c.third v4"}, gaps)
	require.Len(t, res.Gaps, 2)
	_, gaps = assemble(185)
	require.Equal(t, []string{"budget: acme/a.first v1", "budget: 2 more entries left out"}, gaps, "as many names as the budget holds")
	_, gaps = assemble(180)
	require.Equal(t, []string{"budget: 3 entries left out"}, gaps, "no room for a name: the count, which the budget reserved")
}
