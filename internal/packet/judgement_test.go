package packet_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
)

// diffWorld writes one world of TestBudgetDoesNotChangeJudgement: both
// layers with every trigger, overrides, hidden items, state keys,
// templates and windows. It returns every key and the hidden ones.
func diffWorld(w *world, rng *rand.Rand, proj string, words []string, text func(int) string, sharedSoFar *[]ikey) ([]ikey, map[ikey]bool) {
	w.t.Helper()
	keys := append([]ikey(nil), (*sharedSoFar)...)
	hid := map[ikey]bool{}
	var plain []string // always-on, visible, open project items: the ones a _shared item overrides
	for _, layer := range []string{proj, ctxtype.SharedProject} {
		var items []spec
		seen := map[string]bool{}
		for i := range 70 {
			key := fmt.Sprintf("%s.k%03d", proj, i)
			lname := "project"
			if layer == ctxtype.SharedProject {
				lname = "shared"
				key = fmt.Sprintf("%s.s%03d", proj, i)
				if rng.IntN(3) == 0 && len(plain) > 0 {
					// An override. (An override of a project item that is no
					// candidate is TestWhyAnswersTheLayerAsked.)
					key = plain[rng.IntN(len(plain))]
				}
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			k := ikey{key, lname}
			p := rng.IntN(6)
			if lname == "shared" {
				// A _shared item never outranks the project item that
				// overrides it (that case is TestWhyAnswersTheLayerAsked).
				p = -1 - rng.IntN(3)
			}
			it := spec{Key: key, Kind: []string{"knowledge", "state", "skill", "decision"}[rng.IntN(4)],
				Content: text(3+rng.IntN(30)) + fmt.Sprintf(" marker%d", i), Priority: int32(p), Source: "human",
				Authority:  []string{"policy", "instruction", "evidence", "hypothesis"}[rng.IntN(4)],
				Confidence: []string{"verified", "probable", "uncertain"}[rng.IntN(3)]}
			if lname == "shared" {
				it.Authority = "hypothesis"
			}
			switch rng.IntN(8) {
			case 0:
				it.Trigger = keywords(words[rng.IntN(len(words))])
			case 1:
				it.Trigger = tool("lookup")
			case 2:
				it.Trigger = relevance()
			}
			if rng.IntN(7) == 0 && lname == "project" {
				it.Roles = hiddenFrom("support")
				hid[k] = true
			}
			if rng.IntN(5) == 0 && lname == "project" {
				it.StateKey = fmt.Sprintf("%s.s%d", proj, rng.IntN(4))
			}
			if rng.IntN(10) == 0 {
				it.Template = true
				it.Content = []string{"For {{customer}}: ", "Order {{order_id}}: "}[rng.IntN(2)] + text(3)
			}
			if rng.IntN(12) == 0 {
				it.ValidUntil = past
			}
			if lname == "project" && it.Trigger == nil && it.Roles == nil && it.ValidUntil == "" && !it.Template {
				plain = append(plain, key)
			}
			items = append(items, it)
			keys = append(keys, k)
			if lname == "shared" {
				*sharedSoFar = append(*sharedSoFar, k)
			}
		}
		w.batch(layer, items)
	}
	return keys, hid
}

// TestBudgetDoesNotChangeJudgement: over a random world of every trigger,
// both layers, overrides, contradictions, roles, windows and templates, a
// cutting budget and a roomy one give every item the same verdict except
// for the budget: not_candidate and stage reasons are equal; what the
// roomy packet included is included, budget or budget_cutoff in the
// cutting one, with the same rank before the cutoff.
func TestBudgetDoesNotChangeJudgement(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rng := rand.New(rand.NewPCG(88, 8))
	words := []string{"refund", "ledger", "deploy", "alpha", "beta", "gamma", "policy", "money", "invoice", "tariff"}
	text := func(k int) string {
		var out []string
		for range k {
			out = append(out, words[rng.IntN(len(words))])
		}
		return strings.Join(out, " ")
	}
	var sharedSoFar []ikey // _shared is one layer for every project of the database
	for world := range 2 {
		proj := fmt.Sprintf("dw%d", world)
		w.project(proj)
		keys, hid := diffWorld(w, rng, proj, words, text, &sharedSoFar)
		hidden := func(k ikey) bool { return hid[k] }
		req := func(budget int) ctxtype.Request {
			return ctxtype.Request{TargetRole: "support", TokenBudget: budget, Query: "ledger invoice money",
				History:     []ctxtype.Message{{Role: "user", Author: "person", Content: "about the refund and the deploy"}},
				ToolResults: []ctxtype.ToolResult{{Tool: "lookup", Status: "ok", Content: "{}"}},
				Pins:        []string{fmt.Sprintf("%s.k%03d", proj, 7)},
				Variables:   map[string]any{"customer": "Ada"}}
		}
		roomy := w.assemble(proj, w.admin, req(200000))
		require.Nil(t, roomy.Cutoff)
		rrecs := w.check(roomy)
		rres := w.whyAll(roomy, rrecs, keys, hidden)

		budget := []int{150, 400}[world]
		small := w.assemble(proj, w.admin, req(budget))
		require.NotNil(t, small.Cutoff, "world %d budget %d", world, budget)
		srecs := w.check(small)
		sres := w.whyAll(small, srecs, keys, hidden)
		for _, k := range keys {
			ra, sa := rres.answers[k], sres.answers[k]
			rl, sl := whyLabel(ra), whyLabel(sa)
			if rl == "included" {
				require.Contains(t, []string{"included", "budget", "budget_cutoff"}, sl, "world %d budget %d %v: %+v", world, budget, k, sa)
				if whyRank(sa) < small.cutRank() {
					require.Equal(t, whyRank(ra), whyRank(sa), "world %d budget %d %v: the rank does not depend on the budget", world, budget, k)
				} else {
					require.GreaterOrEqual(t, whyRank(sa), whyRank(ra), "world %d %v", world, k)
				}
				require.Equal(t, whyRule(ra), whyRule(sa), "world %d budget %d %v", world, budget, k)
			} else {
				require.Equal(t, rl, sl, "world %d budget %d %v: a stage's verdict does not depend on the budget: %+v | %+v", world, budget, k, ra, sa)
			}
		}
	}
}
