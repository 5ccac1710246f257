package packet_test

// The budget's cutoff (pipeline 2, docs/packets.md "Bounded assembly"): after the
// first candidate that does not fit, 32 more are tried and the rest are
// counted, not tried.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/token"
)

// TestCutoffAfterExactlyThirtyTwoTries: a first candidate that cannot fit,
// then 31, 32 or 33 small ones that all would fit. With 31 or 32 every
// candidate is tried (no cutoff); with 33 the last one is excluded untried.
func TestCutoffAfterExactlyThirtyTwoTries(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, after := range []int{31, 32, 33, 40} {
		proj := fmt.Sprintf("tries%d", after)
		w.project(proj)
		items := []spec{{Key: "huge", Content: strings.Repeat("word ", 400), Priority: 1000}}
		keys := pk("huge")
		for i := range after {
			k := fmt.Sprintf("small.%03d", i)
			items = append(items, spec{Key: k, Content: "tiny", Priority: int32(500 - i)})
			keys = append(keys, ikey{k, "project"})
		}
		w.batch(proj, items)
		sup := w.reader("support", proj)
		p := w.assemble(proj, sup, ctxtype.Request{TargetRole: "support", TokenBudget: 300})
		recs := w.check(p)
		byKey := itemRecords(recs)
		require.Equal(t, "budget", byKey[ikey{"huge", "project"}].Reason)
		require.Equal(t, 1, byKey[ikey{"huge", "project"}].Rank)
		tried := min(after, tries)
		for i := range after {
			k := ikey{fmt.Sprintf("small.%03d", i), "project"}
			if i < tried {
				require.Equal(t, ctxtype.Included, byKey[k].Decision, "%v is one of the %d tries and fits", k, tries)
			} else {
				require.NotContains(t, byKey, k, "%v is past the cutoff: no record", k)
				require.NotContains(t, p.Rendered, fmt.Sprintf("small.%03d", i))
			}
		}
		if after <= tries {
			require.Nil(t, p.Cutoff, "after=%d: every candidate was tried", after)
			require.Equal(t, 0, p.GapsMore)
		} else {
			require.NotNil(t, p.Cutoff, "after=%d", after)
			require.Equal(t, &assemble.Cutoff{Rank: tries + 2, Headroom: 300 - p.Used, Count: after - tries}, p.Cutoff)
			require.Equal(t, after-tries, p.GapsMore, "the untried are budget exclusions beyond the one listed gap")
		}
		res := w.whyAll(p, recs, keys, noneHidden)
		require.Equal(t, max(0, after-tries), res.reasons["budget_cutoff"])
		require.Equal(t, tried, res.reasons["included"])
	}
}

// TestStageDropsDoNotUseTheTries: after the first miss, items that a stage
// drops (a template without its value, a contradiction loser, a _shared
// item overridden by the project, an item hidden from the role, an expired
// one) do not use up the 32 tries, and are still recorded; the admin sees
// the hidden record and its count; injections name the packet for what it
// included, not for the untried.
func TestStageDropsDoNotUseTheTries(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("zone")
	items := []spec{{Key: "huge", Content: strings.Repeat("word ", 400), Priority: 1000}}
	keys := pk("huge")
	for i := range 60 {
		k := fmt.Sprintf("small.%03d", i)
		it := spec{Key: k, Content: fmt.Sprintf("tiny %d", i), Priority: int32(500 - 2*i)}
		switch i {
		case 3:
			it.Template, it.Content = true, "Needs {{absent}} here."
		case 5:
			it.StateKey, it.Authority = "zone.state", "hypothesis" // loser; ranks after every evidence item
		case 6:
			it.StateKey = "zone.state" // winner (evidence)
		case 7:
			it.Roles = hiddenFrom("support")
		case 8:
			it.ValidUntil = past
		}
		items = append(items, it)
		keys = append(keys, ikey{k, "project"})
	}
	w.batch("zone", items)
	// A _shared item overridden by small.010, ranked in the try zone.
	w.batch(ctxtype.SharedProject, []spec{{Key: "small.010", Content: "shared version", Priority: 481}})
	keys = append(keys, sk("small.010")...)
	sup := w.reader("support", "zone")
	hidden := func(k ikey) bool { return k.key == "small.007" && k.layer == "project" }
	req := ctxtype.Request{TargetRole: "support", TokenBudget: 300}
	p := w.assemble("zone", sup, req)
	recs := w.check(p)
	byKey := itemRecords(recs)
	require.Equal(t, 1, byKey[ikey{"huge", "project"}].Rank)
	require.Equal(t, tries+2, p.Cutoff.Rank, "stage drops did not take any of the 32 tries")
	require.Equal(t, "template_unresolved", byKey[ikey{"small.003", "project"}].Reason)
	require.Equal(t, ctxtype.ReasonContradicted, byKey[ikey{"small.005", "project"}].Reason, "the loser of a group met before the cutoff is recorded")
	require.Equal(t, "overridden", byKey[ikey{"small.010", "shared"}].Reason)
	require.NotContains(t, byKey, ikey{"small.007", "project"}, "a hidden item is not recorded for a non-admin")
	require.NotContains(t, byKey, ikey{"small.008", "project"}, "an expired item is not a candidate")
	require.NotContains(t, p.Rendered, "shared version")
	require.NotContains(t, p.Rendered, "Needs")
	// Visible candidates: huge + 60 small − template, loser, hidden, expired.
	require.Equal(t, 1+60-4, p.cutRank()-1+p.cutCount(), "every visible candidate is tried or counted")
	res := w.whyAll(p, recs, keys, hidden)
	require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"])
	require.Equal(t, 0, res.pastCut)
	require.Equal(t, "not_candidate/not_valid", whyLabel(res.answers[ikey{"small.008", "project"}]))

	// The admin sees the hidden record, its count, and the same text.
	ap := w.assemble("zone", w.admin, req)
	require.Equal(t, p.Rendered, ap.Rendered)
	require.Equal(t, budgetOf(p.Packet), budgetOf(ap.Packet))
	arecs := w.check(ap)
	require.Equal(t, "hidden", itemRecords(arecs)[ikey{"small.007", "project"}].Reason)
	require.Equal(t, 1, ap.Excluded()["hidden"])
	require.Equal(t, 1, w.get("zone", w.admin, p.ID).Excluded()["hidden"], "an admin sees the hidden count of a support packet")
	g := w.get("zone", sup, ap.ID)
	require.NotContains(t, g.Excluded(), "hidden", "the role never sees a hidden count, whoever assembled")
	require.Equal(t, p.Excluded(), g.Excluded())

	// Injections name the packet for what it included, not for the untried.
	injected := func(key string) []string {
		inj, _, _, err := w.svc.Packets.Injections(t.Context(), sup, "zone", key, packet.InjectionParams{Limit: 100})
		require.NoError(t, err)
		var ids []string
		for _, x := range inj {
			ids = append(ids, x.PacketID)
		}
		return ids
	}
	ids := injected("small.000")
	require.Contains(t, ids, p.ID)
	require.Contains(t, ids, ap.ID)
	require.Empty(t, injected("small.059"), "an item past the cutoff was injected nowhere")
}

// budgetView is a packet's budget as its answer shows it.
type budgetView struct {
	Allocated, Used, GapsMore int
	Gaps                      []ctxtype.Gap
	Cutoff                    *assemble.Cutoff
}

func budgetOf(p *packet.Packet) budgetView {
	return budgetView{Allocated: p.Allocated, Used: p.Used, GapsMore: p.GapsMore, Gaps: p.Gaps, Cutoff: p.Cutoff}
}

// TestNoCutoffWhenEveryCandidateIsTried: with a budget that holds
// everything there is no cutoff (in the packet and the stored packet), no
// budget_cutoff count, no gap, and why never says budget_cutoff. With a
// budget that misses more than 20 but no more than 32 after the first miss
// there is still no cutoff, and the gaps are capped at 20.
func TestNoCutoffWhenEveryCandidateIsTried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("roomy")
	var items []spec
	var keys []ikey
	for i := range 40 {
		k := fmt.Sprintf("fact.%03d", i)
		items = append(items, spec{Key: k, Content: filler(i, 6), Priority: int32(100 - i)})
		keys = append(keys, ikey{k, "project"})
	}
	w.batch("roomy", items)
	sup := w.reader("support", "roomy")
	p := w.assemble("roomy", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 100000})
	require.Nil(t, p.Cutoff)
	require.Equal(t, 0, p.GapsMore)
	require.Empty(t, p.Gaps)
	require.Empty(t, p.Excluded())
	recs := w.check(p)
	res := w.whyAll(p, recs, keys, noneHidden)
	require.Equal(t, 40, res.reasons["included"])
	require.Nil(t, w.get("roomy", sup, p.ID).Cutoff)

	// The first item fits, every later one is too big: 30 misses <= 32.
	w.project("tight")
	items = []spec{{Key: "a.first", Content: "short", Priority: 1000}}
	keys = pk("a.first")
	for i := range 30 {
		k := fmt.Sprintf("b.big.%03d", i)
		items = append(items, spec{Key: k, Content: filler(i, 60), Priority: int32(500 - i)})
		keys = append(keys, ikey{k, "project"})
	}
	w.batch("tight", items)
	sup2 := w.reader("support", "tight")
	p = w.assemble("tight", sup2, ctxtype.Request{TargetRole: "support", TokenBudget: 150})
	require.Nil(t, p.Cutoff, "30 misses are all tried")
	require.Equal(t, 30, p.Excluded()["budget"])
	require.Len(t, p.Gaps, 20)
	require.Equal(t, 10, p.GapsMore)
	recs = w.check(p)
	res = w.whyAll(p, recs, keys, noneHidden)
	require.Equal(t, 30, res.reasons["budget"])
	require.Equal(t, 0, res.reasons["budget_cutoff"])
}

// TestTriesCountFromTheFirstExclusion: "after the first candidate that
// does not fit, 32 more are tried". For some budgets the window of 32
// opens one candidate early, at one that was finally included, so only 31
// are tried after the first budget exclusion and one more is cut.
func TestTriesCountFromTheFirstExclusion(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("window")
	kinds := []string{"knowledge", "state", "skill", "decision", "instruction", "episode", "evidence"}
	var items []spec
	for i := range 60 {
		items = append(items, spec{Key: fmt.Sprintf("f.%03d", i), Kind: kinds[i%len(kinds)],
			Content: fmt.Sprintf("Fact %d %s", i, strings.Repeat("mot ", i%11)), Priority: int32(500 - i)})
	}
	w.batch("window", items)
	for _, tk := range []token.Tokenizer{"o200k_base", "cl100k_base"} {
		for b := 120; b <= 200; b += 2 {
			p := w.assemble("window", w.admin, ctxtype.Request{TargetRole: "support", TokenBudget: b, Tokenizer: tk})
			require.NotNil(t, p.Cutoff)
			first := 0
			for _, r := range w.get("window", w.admin, p.ID).Records {
				if r.SubjectKind == ctxtype.SubjectItem && r.Reason == "budget" && first == 0 {
					first = r.Rank
				}
			}
			require.Equal(t, first+tries+1, p.cutRank(), "%s budget %d: first budget exclusion at rank %d, cutoff %+v", tk, b, first, *p.Cutoff)
			require.Equal(t, 60-(first+tries), p.cutCount(), "%s budget %d", tk, b)
		}
	}
}

// TestRequestPartsAreInviolable: a task text larger than the budget is
// rendered whole; every item is excluded for budget (32 tried, the rest
// cut); used is the exact count of the text and exceeds the budget only by
// the request parts. (A budget of 0 is the API's: internal/server.)
func TestRequestPartsAreInviolable(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("task")
	items, keys := ladder("l.", 60)
	w.batch("task", items)
	sup := w.reader("support", "task")
	objective := strings.Repeat("Reconcile the ledger for every account and report each difference. ", 12)
	for _, budget := range []int{10, 60} {
		p := w.assemble("task", sup, ctxtype.Request{TargetRole: "support", TokenBudget: budget,
			Task:               &ctxtype.Task{TaskID: "T-big", Objective: objective},
			AcceptanceCriteria: []ctxtype.Criterion{{ID: "AC1", Description: "Every account is reconciled.", VerificationKind: "gate", Required: true}}})
		require.Contains(t, p.Rendered, strings.TrimSpace(objective), "the objective is never cut")
		require.Contains(t, p.Rendered, "Every account is reconciled.")
		require.Greater(t, p.Used, budget)
		require.Equal(t, "budget_exceeded_by_inviolable", p.Gaps[0].Reason, "the inviolable gap comes first")
		recs := w.check(p)
		for _, r := range recs {
			if r.SubjectKind == ctxtype.SubjectItem {
				require.Equal(t, "budget", r.Reason, "no item fits: %v", r.SubjectKey)
			} else {
				require.Equal(t, ctxtype.Included, r.Decision, "request parts are inviolable: %v", r.SubjectKey)
			}
		}
		require.NotNil(t, p.Cutoff)
		require.Equal(t, tries+2, p.Cutoff.Rank)
		require.Equal(t, 61-(tries+1), p.cutCount())
		require.Equal(t, p.Allocated-p.Used, p.Cutoff.Headroom)
		res := w.whyAll(p, recs, keys, noneHidden)
		require.Equal(t, tries+1, res.reasons["budget"])
		require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"])
	}
}

// TestCutoffBoundsTheRecordsNotTheProject: over a project of 3,000
// always-on items a packet with a cutoff keeps records bounded by what was
// tried, and counts every other visible candidate. (That its answer stays
// bounded by its text is internal/server's TestPacketAnswerIsBoundedByItsText.)
func TestCutoffBoundsTheRecordsNotTheProject(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("huge")
	var items []spec
	for i := range 3000 {
		it := spec{Key: fmt.Sprintf("h.%04d", i), Content: filler(i, 4+i%5), Priority: int32(i % 17), Title: fmt.Sprintf("Item %d", i)}
		if i%9 == 0 {
			it.Roles = hiddenFrom("support")
		}
		items = append(items, it)
	}
	w.batch("huge", items)
	sup := w.reader("support", "huge")
	for _, budget := range []int{300, 4000} {
		for _, viewer := range []*auth.Agent{sup, w.admin} {
			p := w.assemble("huge", viewer, ctxtype.Request{TargetRole: "support", TokenBudget: budget})
			require.NotNil(t, p.Cutoff)
			recs := w.check(p)
			require.Less(t, len(recs), p.cutRank()+200, "records are bounded by the tries, not the project")
			require.Equal(t, 3000-334, p.cutRank()-1+p.cutCount())
			require.Len(t, p.Gaps, 20)
			require.Equal(t, tries+1+p.cutCount()-20, p.GapsMore)
		}
	}
}

// TestCutoffCountsTheUntried: a packet over a project of many always-on
// items tries 32 candidates after the first that does not fit and counts
// the rest: records stay bounded, the cutoff and excluded.budget_cutoff say
// how many were not tried, the gaps list at most 20 and GapsMore the rest,
// why answers budget_cutoff with a rank for an untried item and the
// stage's reason for one a stage would have dropped, a hidden item is
// answered for the role as a key that never existed, the stored packet
// answers the same, and a replay is identical.
func TestCutoffCountsTheUntried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("big")
	const n = 300
	var items []spec
	for i := range n {
		it := spec{Key: fmt.Sprintf("fact.%03d", i), Kind: "knowledge",
			Content: fmt.Sprintf("Fact number %d: %s", i, strings.Repeat("words of filler text ", 8)), Priority: int32(i % 7)}
		switch {
		case i%10 == 3:
			it.Roles = hiddenFrom("support")
		case i == 250:
			it.Template = true
			it.Content = "Needs {{missing_value}} to render."
			it.Priority = 0
		}
		items = append(items, it)
	}
	w.batch("big", items)
	support := w.reader("support", "big")

	p := w.assemble("big", support, ctxtype.Request{TargetRole: "support", TokenBudget: 600})
	require.NotNil(t, p.Cutoff)
	count, rank := p.Cutoff.Count, p.Cutoff.Rank
	require.Equal(t, 600-p.Used, p.Cutoff.Headroom)
	excluded := p.Excluded()
	require.Equal(t, count, excluded[assemble.ReasonBudgetCutoff], "excluded counts the untried")
	require.NotContains(t, excluded, "hidden", "a non-admin never counts hidden items")

	items0, budgetRecs, tried := 0, 0, 0
	for _, rec := range w.get("big", w.admin, p.ID).Records {
		if rec.SubjectKind != ctxtype.SubjectItem {
			continue
		}
		items0++
		if rec.Reason == "budget" {
			budgetRecs++
		}
		if rec.Rank > 0 {
			tried++
		}
	}
	require.LessOrEqual(t, budgetRecs, 33, "at most the first miss and 32 more are budget exclusions")
	require.Equal(t, rank-1, tried, "the cutoff's rank follows the last tried")
	visible := n - n/10
	hiddenMet := items0 - tried
	require.Less(t, items0, 120, "records do not grow with the project")
	require.Equal(t, visible, tried+count, "every visible candidate is tried or counted (%d hidden records)", hiddenMet)
	require.LessOrEqual(t, len(p.Gaps), 20)
	require.Equal(t, budgetRecs-len(p.Gaps)+count, p.GapsMore)

	// why for the last item by rank (priority 0, oldest key order): past
	// the cutoff, with its rank after the cutoff's.
	why := w.why(p, support, ikey{"fact.294", ""})
	require.Equal(t, ctxtype.Excluded, why.Decision)
	require.Equal(t, assemble.ReasonBudgetCutoff, why.Reason)
	require.Greater(t, whyRank(why), rank)
	require.Equal(t, p.Cutoff, why.Cutoff)
	// The template with no value ranks last but a stage excludes it first.
	why = w.why(p, support, ikey{"fact.250", ""})
	require.Equal(t, "template_unresolved", why.Reason, "%+v", why)
	// A hidden item is not there for the role, and is for an admin.
	hid := w.why(p, support, ikey{"fact.293", ""})
	never := w.why(p, support, ikey{"fact.never", ""})
	never.Detail = strings.ReplaceAll(never.Detail, "fact.never", "fact.293")
	require.Equal(t, never, hid, "as a key that never existed")
	why = w.why(p, w.admin, ikey{"fact.293", ""})
	require.Equal(t, "hidden", why.Reason, "%+v", why)

	got := w.get("big", support, p.ID)
	require.Equal(t, budgetOf(p.Packet), budgetOf(got), "the stored packet answers the same budget")
	require.Equal(t, excluded, got.Excluded())
	rep := w.replay("big", w.admin, p.ID)
	require.True(t, rep.Identical, "%+v", rep.Differences)
	require.Empty(t, rep.Differences)
}
