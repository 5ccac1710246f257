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
// gaps the text lists are the budget exclusions (the first MaxGaps of
// them, then how many more); the same input gives the same bytes.
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
	settles := map[bool]int{}
	for iter := range 120 {
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
		res := run(t, r, cands(vs...))
		if iter%2 == 1 {
			// Pipeline 2, from a source that reads text on demand.
			src := &MemorySource{Versions: vs, Narrow: true}
			var err error
			res, _, err = AssembleBounded(context.Background(), Input{Project: "acme", PacketID: "ctxpkt_b", Request: r, Now: t0}, src, Options{})
			require.NoError(t, err)
			checkInvariants(t, r, res)
		}
		est, _, gaps := kxmBudget(t, res.Rendered)
		require.Equal(t, res.Used, est, "iteration %d: estimatedTokens is budget.used", iter)
		var want []string
		budgetGaps := 0
		for _, g := range res.Gaps {
			if g.Reason == ctxtype.ReasonBudget {
				budgetGaps++
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
		if budgetGaps > 0 {
			want = append(want, fmt.Sprintf("budget: %d entries left out (the packet's budget.unresolved_gaps lists them)", budgetGaps))
		}
		if want == nil {
			want = []string{}
		}
		require.Equal(t, want, gaps, "iteration %d", iter)
		for _, rec := range res.Records {
			if rec.SubjectKind == ctxtype.SubjectItem && rec.Decision == ctxtype.Included {
				marker := "marker" + strings.TrimPrefix(rec.SubjectKey, "k")
				require.Contains(t, res.Rendered[rec.Span.Start:rec.Span.End], marker, "iteration %d: the span holds the item", iter)
			}
		}
		if iter%2 == 0 {
			again := run(t, r, cands(vs...))
			require.Equal(t, res.Rendered, again.Rendered, "iteration %d: same input, same bytes", iter)
		}
		settles[budgetGaps > 0]++
	}
	require.Positive(t, settles[true], "some packets left entries out")
	require.Positive(t, settles[false], "some packets held everything")
}
