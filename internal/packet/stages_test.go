package packet_test

// The stages of assembly across the budget's cutoff: contradictions,
// _shared overrides, pins, windows and deletes, and the lanes (keyword,
// tool, template) keep their verdicts whether a candidate was tried or not.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/packet"
)

// TestContradictionsAcrossTheCutoff: groups by state_key whose winner and
// loser sit on either side of the cutoff, or both after it; a winner
// hidden from the role or out of its window does not contradict; equal
// content agrees; every byte of the text is one record's span or
// scaffolding, and the contradiction line is the loser's record.
func TestContradictionsAcrossTheCutoff(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("clash")
	items, keys := ladder("l.", 80)
	add := func(it spec) {
		items = append(items, it)
		keys = append(keys, ikey{it.Key, "project"})
	}
	// A: winner tried (policy, ranks first), loser far past the cutoff.
	add(spec{Key: "a.win", Source: "human", Content: "The refund window is 30 days.", StateKey: "refund.window", Authority: "policy"})
	add(spec{Key: "a.lose", Content: "The refund window is 14 days.", StateKey: "refund.window", Authority: "hypothesis"})
	// B: the loser ranks first (higher priority, lower confidence), the
	// winner (verified) past the cutoff.
	add(spec{Key: "b.lose", Content: "Deploys happen on Mondays.", StateKey: "deploy.day", Priority: 9000, Confidence: "uncertain"})
	add(spec{Key: "b.win", Content: "Deploys happen on Tuesdays.", StateKey: "deploy.day", Priority: 1, Confidence: "verified"})
	// C: both past the cutoff.
	add(spec{Key: "c.win", Content: "The office is in Paris.", StateKey: "office", Priority: 2})
	add(spec{Key: "c.lose", Content: "The office is in Lyon.", StateKey: "office", Priority: 2, Authority: "hypothesis"})
	// D: the winner (policy) is hidden from support: the visible one
	// (evidence, in the try zone) stands alone.
	add(spec{Key: "d.win", Source: "human", Content: "Secret pricing is 9 EUR.", StateKey: "pricing", Authority: "policy", Priority: 9500, Roles: hiddenFrom("support")})
	add(spec{Key: "d.lose", Content: "Pricing is 12 EUR.", StateKey: "pricing", Priority: 9500})
	// E: the winner's window has closed.
	add(spec{Key: "e.win", Source: "human", Content: "Support hours are 9-17.", StateKey: "hours", Authority: "policy", Priority: 9400, ValidUntil: past})
	add(spec{Key: "e.lose", Content: "Support hours are 8-20.", StateKey: "hours", Priority: 9400})
	// F: equal content agrees (no contradiction).
	add(spec{Key: "f.one", Source: "human", Content: "The API is versioned.", StateKey: "api", Authority: "policy", Priority: 9300})
	add(spec{Key: "f.two", Content: "The API is versioned.", StateKey: "api", Priority: 9300})
	// G: a loser hidden from the role leaves no trace for it.
	add(spec{Key: "g.win", Content: "Invoices are monthly.", StateKey: "invoices", Priority: 9200, Confidence: "verified"})
	add(spec{Key: "g.lose", Content: "Invoices are weekly.", StateKey: "invoices", Priority: 9200, Confidence: "uncertain", Roles: hiddenFrom("support")})
	w.batch("clash", items)
	hidden := func(k ikey) bool { return k.key == "d.win" || k.key == "g.lose" }
	sup := w.reader("support", "clash")
	// Rank order: the policy items, then l.huge (the first miss), then the
	// evidence items of D, E, F, G and the ladder; B's loser is dropped.
	p := w.assemble("clash", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 260})
	require.NotNil(t, p.Cutoff)
	recs := w.check(p)
	res := w.whyAll(p, recs, keys, hidden)
	label := func(k string) string { return whyLabel(res.answers[ikey{k, "project"}]) }
	rank := func(k string) int { return whyRank(res.answers[ikey{k, "project"}]) }

	require.Equal(t, "included", label("a.win"))
	require.Equal(t, "contradicted", label("a.lose"), "a loser past the cutoff still answers contradicted")
	require.Contains(t, p.Rendered, "`a.win`")
	require.Contains(t, p.Rendered, "`a.lose`", "the Active Contradictions line of a group met before the cutoff")
	require.NotContains(t, p.Rendered, "- The refund window is 14 days.", "the loser is no entry")
	require.Equal(t, 1, strings.Count(p.Rendered, "14 days"), "its content is only quoted in its contradiction line")

	require.Equal(t, "contradicted", label("b.lose"), "the loser is dropped even though its winner was never tried")
	require.NotContains(t, p.Rendered, "Mondays")
	require.Equal(t, "budget_cutoff", label("b.win"))
	require.GreaterOrEqual(t, rank("b.win"), p.cutRank())

	require.Equal(t, "budget_cutoff", label("c.win"))
	require.Equal(t, "contradicted", label("c.lose"))
	require.Contains(t, res.answers[ikey{"c.lose", "project"}].Detail, "c.win")

	require.Equal(t, "included", label("d.lose"), "a winner hidden from the role does not exist for it")
	require.Contains(t, p.Rendered, "Pricing is 12 EUR.")
	require.NotContains(t, p.Rendered, "`d.win`")
	require.NotContains(t, p.Rendered, "Secret")
	require.Equal(t, "included", label("e.lose"), "a winner out of its window does not contradict")
	require.Equal(t, "not_candidate/not_valid", label("e.win"))
	require.Equal(t, "included", label("f.one"))
	require.Equal(t, "included", label("f.two"), "equal content agrees")
	require.Equal(t, "included", label("g.win"))
	require.NotContains(t, p.Rendered, "`g.lose`", "no contradiction line names an item hidden from the role")
	require.NotContains(t, p.Rendered, "weekly")

	// Every byte of the text is one record's span or scaffolding.
	start, end := 0, len(p.Rendered)
	ms, err := w.svc.Packets.Attribute(t.Context(), sup, "clash", p.ID, packet.AttributeParams{Start: &start, End: &end})
	require.NoError(t, err)
	covered := make([]int, len(p.Rendered))
	for _, m := range ms {
		spans := append([]ctxtype.Span(nil), m.Scaffolding...)
		for _, r := range m.Records {
			spans = append(spans, *r.Span)
		}
		for _, sp := range spans {
			for i := sp.Start; i < sp.End; i++ {
				covered[i]++
			}
		}
	}
	for i, c := range covered {
		require.Equal(t, 1, c, "byte %d (%q) is covered %d times", i, p.Rendered[i], c)
	}
	text := "a.lose"
	ms, err = w.svc.Packets.Attribute(t.Context(), sup, "clash", p.ID, packet.AttributeParams{Text: &text})
	require.NoError(t, err)
	require.Equal(t, "a.lose", ms[0].Records[0].SubjectKey, "the contradiction line is the loser's record")
}

// TestSharedOverridesPastTheCutoff: a project item overrides the _shared
// item of its key wherever either ranks; an overridden _shared item never
// renders, even when the project item that overrides it is never tried;
// a project item hidden from the role does not override.
func TestSharedOverridesPastTheCutoff(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("layers")
	items, keys := ladder("l.", 70)
	items = append(items,
		spec{Key: "o.early", Content: "project early", Priority: 9000},   // shared one late
		spec{Key: "o.late", Content: "project late", Priority: -50},      // shared one early
		spec{Key: "o.both", Content: "project both late", Priority: -50}, // shared one late too
		spec{Key: "o.hid", Content: "project hidden", Priority: 9000, Roles: hiddenFrom("support")},
		spec{Key: "o.hidlate", Content: "project hidden late", Priority: -50, Roles: hiddenFrom("support")},
	)
	keys = append(keys, pk("o.early", "o.both")...) // o.late (project): TestWhyAnswersTheLayerAsked
	w.batch("layers", items)
	w.batch(ctxtype.SharedProject, []spec{
		{Key: "o.early", Content: "shared late", Priority: -60},
		{Key: "o.late", Content: "shared early", Priority: 9100},
		{Key: "o.both", Content: "shared both late", Priority: -60},
		{Key: "o.hid", Content: "shared stands in for hidden", Priority: 9100},
		{Key: "o.hidlate", Content: "shared stands in for hidden late", Priority: -70},
		{Key: "sh.plain", Content: "shared plain late", Priority: -60},
	})
	keys = append(keys, sk("o.early", "o.late", "o.both", "o.hid", "o.hidlate", "sh.plain")...)
	sup := w.reader("support", "layers")
	p := w.assemble("layers", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 200})
	require.NotNil(t, p.Cutoff)
	recs := w.check(p)
	res := w.whyAllOf(p, recs, keys, noneHidden, true)
	label := func(k ikey) string { return whyLabel(res.answers[k]) }

	require.Contains(t, p.Rendered, "project early")
	require.Equal(t, "overridden", label(ikey{"o.early", "shared"}), "past the cutoff, judged by why")
	require.Equal(t, "overridden", label(ikey{"o.late", "shared"}), "met before its project item")
	require.NotContains(t, p.Rendered, "shared early", "overridden although the project item was never tried")
	require.Equal(t, "budget_cutoff", label(ikey{"o.both", "project"}))
	require.Equal(t, "overridden", label(ikey{"o.both", "shared"}))
	require.Equal(t, "included", label(ikey{"o.hid", "shared"}), "a hidden project item does not override for the role")
	require.Contains(t, p.Rendered, "shared stands in for hidden")
	require.Equal(t, "budget_cutoff", label(ikey{"o.hidlate", "shared"}))
	require.Equal(t, "budget_cutoff", label(ikey{"sh.plain", "shared"}))
	require.Equal(t, 2, res.pastCut, "the untried overridden _shared items are counted in the cutoff")
	require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"]+res.pastCut+1, "with o.late (project, see TestWhyAnswersTheLayerAsked), every untried candidate is counted")
	// For the role the hidden project item does not exist: why answers the
	// _shared item it would have overridden, and never the hidden one.
	a := w.why(p, sup, ikey{"o.hid", ""})
	require.NotNil(t, a.Record, "%+v", a)
	require.Equal(t, "shared", a.Record.Layer, "%+v", a)
	require.Equal(t, ctxtype.Included, a.Decision, "%+v", a)
	require.NotContains(t, a.Detail, "project hidden")
	require.NotContains(t, a.Item.Content, "project hidden")
	byKey := itemRecords(recs)
	require.Equal(t, "overridden", byKey[ikey{"o.late", "shared"}].Reason)
	require.NotContains(t, byKey, ikey{"o.late", "project"})
}

// TestWhyAnswersTheLayerAsked: why for item K answers for the item K of
// the asked layer (the project layer by default). It does not answer with
// the _shared item K's record when the project item K has none of its own:
// (1) the project item K ranks past the cutoff (it answers budget_cutoff);
// (2) for an admin, the project item K is hidden from the role and past
// the cutoff (hidden); (3) with no cutoff at all, the project item K did
// not fire (not_candidate, not_triggered) or is out of its window
// (not_valid); and (4) for the role, when the project item K is hidden
// from it, the _shared item K is answered (as a packet without a cutoff
// does), not did_not_exist.
func TestWhyAnswersTheLayerAsked(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("layers2")
	items, _ := ladder("l.", 70)
	items = append(items,
		spec{Key: "o.late", Content: "project late", Priority: -50},
		spec{Key: "o.hid", Content: "project hidden", Priority: -50, Roles: hiddenFrom("support")},
		spec{Key: "o.hidlate", Content: "project hidden late", Priority: -50, Roles: hiddenFrom("support")},
		spec{Key: "o.kw", Content: "project keyword", Trigger: keywords("never-said")},
		spec{Key: "o.expired", Content: "project expired", ValidUntil: past})
	w.batch("layers2", items)
	w.batch(ctxtype.SharedProject, []spec{
		{Key: "o.late", Content: "shared early", Priority: 9100},
		{Key: "o.hid", Content: "shared for hidden", Priority: 9100},
		{Key: "o.hidlate", Content: "shared for hidden late", Priority: -70},
		{Key: "o.kw", Content: "shared always", Priority: 9100},
		{Key: "o.expired", Content: "shared always too", Priority: 9100}})
	sup := w.reader("support", "layers2")
	p := w.assemble("layers2", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 200})
	require.NotNil(t, p.Cutoff)
	roomy := w.assemble("layers2", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 100000})
	require.Nil(t, roomy.Cutoff)
	layerOfAnswer := func(a *packet.WhyAnswer) string {
		require.NotNil(t, a.Record, "%+v", a)
		return a.Record.Layer
	}
	for _, l := range []string{"", "project"} {
		a := w.why(p, w.admin, ikey{"o.late", l}) // (1)
		require.Equal(t, "project", layerOfAnswer(a), "why o.late layer %q: %+v", l, a)
		require.Equal(t, "budget_cutoff", a.Reason, "%+v", a)
		require.Equal(t, p.Cutoff, a.Cutoff)
		a = w.why(p, w.admin, ikey{"o.hid", l}) // (2)
		require.Equal(t, "project", layerOfAnswer(a), "why o.hid layer %q: %+v", l, a)
		require.Equal(t, "hidden", a.Reason, "%+v", a)
		for _, pp := range []assembled{p, roomy} { // (3)
			a = w.why(pp, sup, ikey{"o.kw", l})
			require.Equal(t, "not_candidate", a.Decision, "why o.kw layer %q: %+v", l, a)
			require.Equal(t, "not_triggered", a.Reason, "%+v", a)
			a = w.why(pp, sup, ikey{"o.expired", l})
			require.Equal(t, "not_candidate", a.Decision, "why o.expired layer %q: %+v", l, a)
			require.Equal(t, "not_valid", a.Reason, "%+v", a)
		}
	}
	// (4): the roomy packet answers the _shared item; so must the cut one.
	a := w.why(roomy, sup, ikey{"o.hidlate", ""})
	require.Equal(t, "shared", layerOfAnswer(a), "%+v", a)
	a = w.why(p, sup, ikey{"o.hidlate", ""})
	require.Equal(t, "shared", layerOfAnswer(a), "%+v", a)
	require.Equal(t, "budget_cutoff", a.Reason, "%+v", a)
}

// TestPinsRankFirst: pinned items take the first ranks whatever their own
// rank fields, fit before anything else, and are tried once even when
// their natural place is past the cutoff; a pinned item hidden from the
// role, out of its window or deleted does not come in.
func TestPinsRankFirst(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("pins")
	items, keys := ladder("l.", 80)
	items = append(items,
		spec{Key: "p.only", Content: "pinned only item", Priority: -100, Authority: "hypothesis", Trigger: pinnedOnly()},
		spec{Key: "p.kw", Content: "pinned keyword item", Priority: -100, Trigger: keywords("never-said")},
		spec{Key: "p.restricted", Content: "pinned restricted", Priority: -100, Roles: visibleTo("support")},
		spec{Key: "p.hidden", Content: "pinned secret", Priority: -100, Roles: hiddenFrom("support"), Trigger: pinnedOnly()},
		spec{Key: "p.expired", Content: "pinned expired", Priority: -100, ValidUntil: past, Trigger: pinnedOnly()},
		spec{Key: "p.gone", Content: "pinned gone", Priority: -100, Trigger: pinnedOnly()},
		spec{Key: "p.unpinned", Content: "pinned-only but not asked for", Priority: 99999, Trigger: pinnedOnly()},
	)
	keys = append(keys, pk("p.only", "p.kw", "p.restricted", "p.hidden", "p.expired", "p.gone", "p.unpinned")...)
	w.batch("pins", items)
	w.del("pins", "p.gone")
	w.batch(ctxtype.SharedProject, []spec{{Key: "p.shared", Content: "pinned shared", Priority: -100, Trigger: pinnedOnly()}})
	keys = append(keys, sk("p.shared")...)
	sup := w.reader("support", "pins")
	pins := []string{"l.070", "p.only", "p.kw", "p.restricted", "p.hidden", "p.expired", "p.gone", "p.shared", "l.000"}
	p := w.assemble("pins", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 200, Pins: pins})
	require.NotNil(t, p.Cutoff)
	recs := w.check(p)
	hidden := func(k ikey) bool { return k.key == "p.hidden" }
	res := w.whyAll(p, recs, keys, hidden)
	pinned := map[ikey]bool{}
	for _, k := range append(pk("l.070", "p.only", "p.kw", "p.restricted", "l.000"), sk("p.shared")...) {
		pinned[k] = true
		a := res.answers[k]
		require.Equal(t, "included", whyLabel(a), "%v: %+v", k, a)
		require.Equal(t, "pin", whyRule(a), "%v", k)
	}
	ranksOfPins := map[int]bool{}
	for k := range pinned {
		ranksOfPins[whyRank(res.answers[k])] = true
	}
	for i := 1; i <= len(pinned); i++ {
		require.True(t, ranksOfPins[i], "pins take ranks 1..%d", len(pinned))
	}
	require.Equal(t, len(pinned)+1, itemRecords(recs)[ikey{"l.huge", "project"}].Rank, "the first unpinned candidate follows the pins")
	require.Equal(t, "not_candidate/not_valid", whyLabel(res.answers[ikey{"p.expired", "project"}]))
	require.Equal(t, "not_candidate/tombstoned", whyLabel(res.answers[ikey{"p.gone", "project"}]))
	require.Equal(t, "not_candidate/not_triggered", whyLabel(res.answers[ikey{"p.unpinned", "project"}]))
	require.NotContains(t, p.Rendered, "secret")
	var unresolved []string
	for _, g := range p.Gaps {
		if g.Reason == assemble.GapPinUnresolved {
			unresolved = append(unresolved, g.Key)
		}
	}
	require.Equal(t, []string{"p.expired", "p.gone", "p.hidden"}, unresolved, "the pins that name nothing the role may see are gaps")
	require.Equal(t, 1, strings.Count(p.Rendered, "ladder step 70\n"), "a pinned item is rendered once")
	// Visible candidates: 6 pins + huge + 80 ladder − 2 ladder items already pinned.
	require.Equal(t, 6+1+80-2, p.cutRank()-1+p.cutCount(), "pinned items are not counted twice")
	a := w.why(p, w.admin, ikey{"p.hidden", ""})
	require.Equal(t, "hidden", a.Reason, "%+v", a)
}

// TestValidityAndWritesKeepTheUntriedCountExact: windows, roles, deletes,
// revivals and trigger changes through Put and Batch keep the untried
// count exact: the candidates past the cutoff are exactly those why
// answers budget_cutoff for, for two roles, in both layers.
func TestValidityAndWritesKeepTheUntriedCountExact(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("churn")
	items, keys := ladder("l.", 100)
	items = append(items,
		spec{Key: "w.open", Content: "window holds", ValidFrom: past, ValidUntil: "2100-01-01T00:00:00Z", Priority: 4795},
		spec{Key: "w.open.late", Content: "window holds late", ValidFrom: past, Priority: -5},
		spec{Key: "w.expired", Content: "window closed", ValidUntil: past, Priority: 4785},
		spec{Key: "w.future", Content: "window ahead", ValidFrom: "2100-01-01T00:00:00Z", Priority: -5},
		spec{Key: "r.support", Content: "only support", Roles: visibleTo("support"), Priority: -5},
		spec{Key: "r.critic", Content: "only critic", Roles: visibleTo("critic"), Priority: -5},
	)
	keys = append(keys, pk("w.open", "w.open.late", "w.expired", "w.future", "r.support", "r.critic")...)
	w.batch("churn", items)
	put := func(s spec) { w.put("churn", s) }
	for i := 50; i < 60; i++ {
		w.del("churn", fmt.Sprintf("l.%03d", i))
	}
	put(spec{Key: "l.055", Content: "revived by PUT", Priority: 4450})
	w.batch("churn", []spec{{Key: "l.056", Content: "revived by batch", Priority: 4440},
		{Key: "l.064", Content: "now a keyword item", Priority: 4360, Trigger: keywords("zzz")}})
	put(spec{Key: "l.060", Content: "now a keyword item", Priority: 4400, Trigger: keywords("zzz")})
	put(spec{Key: "l.061", Content: "now pinned only", Priority: 4390, Trigger: pinnedOnly()})
	put(spec{Key: "l.062", Content: "now hidden", Priority: 4380, Roles: hiddenFrom("support")})
	put(spec{Key: "l.063", Content: "now expired", Priority: 4370, ValidUntil: past})
	put(spec{Key: "l.065", Content: "hidden then deleted", Priority: 4350, Roles: hiddenFrom("support")})
	w.del("churn", "l.065")
	put(spec{Key: "l.066", Content: "hidden then open again", Priority: 4340, Roles: hiddenFrom("support")})
	put(spec{Key: "l.066", Content: "open again", Priority: 4340})
	put(spec{Key: "l.067", Content: "windowed then open", Priority: 4330, ValidUntil: "2100-01-01T00:00:00Z"})
	put(spec{Key: "l.067", Content: "open after window", Priority: 4330})
	put(spec{Key: "l.068", Content: "keyword then always", Priority: 4320, Trigger: keywords("zzz")})
	put(spec{Key: "l.068", Content: "always again", Priority: 4320})
	w.batch(ctxtype.SharedProject, []spec{
		{Key: "s.a", Content: "shared open", Priority: 4795},
		{Key: "s.b", Content: "shared late", Priority: -10},
		{Key: "s.c", Content: "shared critic", Priority: -10, Roles: visibleTo("critic")},
		{Key: "s.d", Content: "shared deleted", Priority: -10},
	})
	w.del(ctxtype.SharedProject, "s.d")
	keys = append(keys, sk("s.a", "s.b", "s.c", "s.d")...)
	hiddenFor := map[string]map[string]bool{
		"support": {"project:r.critic": true, "shared:s.c": true, "project:l.062": true, "project:l.065": true},
		"critic":  {"project:r.support": true},
	}
	for role, hid := range hiddenFor {
		viewer := w.reader(role, "churn")
		hidden := func(k ikey) bool { return hid[k.String()] }
		p := w.assemble("churn", viewer, ctxtype.Request{TargetRole: role, TokenBudget: 200})
		require.NotNil(t, p.Cutoff, role)
		recs := w.check(p)
		res := w.whyAll(p, recs, keys, hidden)
		label := func(k ikey) string { return whyLabel(res.answers[k]) }
		require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"], role)
		require.Equal(t, "budget_cutoff", label(ikey{"w.open.late", "project"}), role)
		require.Equal(t, "not_candidate/not_valid", label(ikey{"w.expired", "project"}), role)
		require.Equal(t, "not_candidate/not_valid", label(ikey{"w.future", "project"}), role)
		require.Equal(t, "not_candidate/not_valid", label(ikey{"l.063", "project"}), role)
		require.Equal(t, "not_candidate/tombstoned", label(ikey{"l.050", "project"}), role)
		require.Equal(t, "not_candidate/tombstoned", label(ikey{"s.d", "shared"}), role)
		require.Equal(t, "not_candidate/not_triggered", label(ikey{"l.060", "project"}), role)
		require.Equal(t, "budget_cutoff", label(ikey{"l.068", "project"}), role)
		require.Equal(t, "included", label(ikey{"w.open", "project"}), "%s: an open window in the try zone", role)
	}
}

// TestLanesPastTheCutoff: keyword (said by a person only), tool and
// template items past the cutoff are counted and answer budget_cutoff, a
// keyword only an agent or the library said does not fire at all, and a
// template without its value answers template_unresolved wherever it
// ranks; in every format.
func TestLanesPastTheCutoff(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("lanes")
	items, keys := ladder("l.", 60)
	items = append(items,
		spec{Key: "k.person", Content: "refunds take 5 days", Priority: -10, Trigger: keywords("refund")},
		spec{Key: "k.person.early", Content: "refunds need approval", Priority: 20000, Trigger: keywords("refund")},
		spec{Key: "k.agent", Content: "deploys freeze Fridays", Priority: 20000, Trigger: keywords("deploy")},
		spec{Key: "k.library", Content: "invoices monthly", Priority: 20000, Trigger: keywords("invoice")},
		spec{Key: "t.late", Title: "lookup_order", Content: "Look up an order.", Kind: "tool", Slot: "tools", Priority: -10, Trigger: tool("lookup_order")},
		spec{Key: "t.early", Title: "lookup_order", Content: "Order ids are numeric.", Kind: "tool", Slot: "tools", Priority: 20000, Trigger: tool("lookup_order")},
		spec{Key: "t.other", Title: "other_tool", Content: "Another tool.", Kind: "tool", Slot: "tools", Priority: 20000, Trigger: tool("other_tool")},
		spec{Key: "tp.filled.late", Content: "The customer is {{customer}}.", Template: true, Priority: -10},
		spec{Key: "tp.hole.late", Content: "Order {{order_id}} shipped.", Template: true, Priority: -10},
		spec{Key: "tp.hole.early", Content: "Ticket {{ticket}} open.", Template: true, Priority: 20000},
		spec{Key: "tp.filled.early", Content: "Hello {{customer}}.", Template: true, Priority: 20000},
	)
	keys = append(keys, pk("k.person", "k.person.early", "k.agent", "k.library", "t.late", "t.early", "t.other", "tp.filled.late", "tp.hole.late", "tp.hole.early", "tp.filled.early")...)
	w.batch("lanes", items)
	sup := w.reader("support", "lanes")
	for _, f := range []ctxtype.Format{"markdown", "blocks", "json"} {
		p := w.assemble("lanes", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 260, Format: f,
			History: []ctxtype.Message{
				{Role: "user", Author: "person", Content: "Where is my refund?"},
				{Role: "assistant", Author: "agent", Content: "Let me check the deploy."},
				{Role: "system", Author: "library", Content: "Summary: an invoice question."},
			},
			ToolResults: []ctxtype.ToolResult{{Tool: "lookup_order", Status: "ok", Content: `{"id":7}`}},
			Variables:   map[string]any{"customer": "Ada"}})
		require.NotNil(t, p.Cutoff, f)
		recs := w.check(p)
		var res whyResult
		if f == "markdown" {
			res = w.whyAll(p, recs, keys, noneHidden)
		} else {
			res = w.whyAllOf(p, recs, keys[len(keys)-11:], noneHidden, true)
		}
		label := func(k string) string { return whyLabel(res.answers[ikey{k, "project"}]) }
		rule := func(k string) string { return whyRule(res.answers[ikey{k, "project"}]) }
		require.Equal(t, "included", label("k.person.early"), f)
		require.Equal(t, `keyword:"refund"@history[0]`, rule("k.person.early"))
		require.Equal(t, "budget_cutoff", label("k.person"), f)
		require.Equal(t, `keyword:"refund"@history[0]`, rule("k.person"), "past the cutoff why still names the rule that fired")
		require.Equal(t, "not_candidate/not_triggered", label("k.agent"), "%s: only what a person said fires", f)
		require.Equal(t, "not_candidate/not_triggered", label("k.library"), f)
		require.Equal(t, "included", label("t.early"), f)
		require.Equal(t, "tool:lookup_order", rule("t.early"))
		require.Equal(t, "budget_cutoff", label("t.late"), f)
		require.Equal(t, "not_candidate/not_triggered", label("t.other"), f)
		require.Equal(t, "included", label("tp.filled.early"), f)
		require.Contains(t, p.Rendered, "Hello Ada.")
		require.Equal(t, "template_unresolved", label("tp.hole.early"), f)
		require.Equal(t, "budget_cutoff", label("tp.filled.late"), f)
		require.Equal(t, "template_unresolved", label("tp.hole.late"), "%s: a stage's reason first", f)
		require.Equal(t, 1, res.pastCut, "%s: the late template without a value is counted, not judged", f)
		require.NotContains(t, p.Rendered, "Ticket")
		require.NotContains(t, p.Rendered, "Fridays")
	}
}
