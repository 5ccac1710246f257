package packet_test

// Items hidden from the packet's role around the budget's cutoff: they
// take no place, no try and no count, and the role never learns of them.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
)

// TestHiddenItemsTakeNoPlaceAroundTheCutoff: items hidden from the role
// before the first miss, inside the try zone and far after the cutoff
// never take a place (ranks, tries, count); a non-admin never learns of
// them (records, counts, why answers did_not_exist), an admin sees the
// ones met before the budget stopped as records and every one of them in
// why as hidden.
func TestHiddenItemsTakeNoPlaceAroundTheCutoff(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("veil")
	items, keys := ladder("l.", 120)
	hiddenKeys := map[string]bool{}
	for _, at := range []int{-1, 0, 5, 17, 30, 60, 110} { // -1: before the huge one
		k := fmt.Sprintf("h.%03d", at+1)
		prio := int32(5000 - 10*at - 5)
		if at < 0 {
			prio = 20000
		}
		items = append(items, spec{Key: k, Content: "secret " + k, Priority: prio, Roles: hiddenFrom("support")})
		keys = append(keys, ikey{k, "project"})
		hiddenKeys[k] = true
	}
	// visible_to another role only, in the try zone and after the cutoff.
	for _, at := range []int{8, 90} {
		k := fmt.Sprintf("v.%03d", at)
		items = append(items, spec{Key: k, Content: "critic only " + k, Priority: int32(5000 - 10*at - 5), Roles: visibleTo("critic")})
		keys = append(keys, ikey{k, "project"})
		hiddenKeys[k] = true
	}
	w.batch("veil", items)
	hidden := func(k ikey) bool { return hiddenKeys[k.key] }
	sup := w.reader("support", "veil")
	req := ctxtype.Request{TargetRole: "support", TokenBudget: 200}
	p := w.assemble("veil", sup, req)
	require.NotNil(t, p.Cutoff)
	// Ranks: the huge one is 1 although a hidden item outranks it.
	recs := w.check(p)
	byKey := itemRecords(recs)
	require.Equal(t, 1, byKey[ikey{"l.huge", "project"}].Rank, "a hidden item never takes a place")
	require.Equal(t, tries+2, p.Cutoff.Rank)
	require.Equal(t, 121-(tries+1), p.cutCount(), "hidden items are not counted")
	for k := range hiddenKeys {
		require.NotContains(t, p.Rendered, k)
	}
	// Nothing the role is given names or quotes a hidden item.
	require.NotContains(t, p.Rendered, "secret")
	for _, r := range p.Records {
		require.False(t, hiddenKeys[r.SubjectKey], "record of %s", r.SubjectKey)
	}
	for _, g := range p.Gaps {
		require.False(t, hiddenKeys[g.Key], "gap of %s", g.Key)
	}
	res := w.whyAll(p, recs, keys, hidden)
	require.Len(t, res.notFound, len(hiddenKeys))
	require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"])

	// The admin, assembling the same request and reading the support packet.
	for _, id := range []string{p.ID, w.assemble("veil", w.admin, req).ID} {
		ap := assembled{Packet: w.get("veil", w.admin, id), proj: "veil", asked: req, viewer: w.admin}
		require.NotNil(t, ap.Cutoff)
		require.Equal(t, p.Rendered, ap.Rendered)
		require.Equal(t, budgetOf(p.Packet), budgetOf(ap.Packet))
		arecs := w.check(ap)
		abyKey := itemRecords(arecs)
		for _, k := range []string{"h.000", "h.001", "h.006", "h.018", "v.008"} { // met before the budget stopped
			require.Equal(t, "hidden", abyKey[ikey{k, "project"}].Reason, "%s is recorded for admins", k)
			require.Equal(t, 0, abyKey[ikey{k, "project"}].Rank, "%s is not ranked", k)
		}
		for _, k := range []string{"h.111", "v.090"} { // far past the cutoff: never met
			require.NotContains(t, abyKey, ikey{k, "project"})
		}
		hiddenRecs := 0
		for _, r := range arecs {
			if r.Reason == "hidden" {
				hiddenRecs++
			}
		}
		require.Equal(t, hiddenRecs, ap.Excluded()["hidden"])
		ares := w.whyAll(ap, arecs, keys, hidden)
		require.Equal(t, len(hiddenKeys), ares.reasons["hidden"])
		require.Equal(t, p.cutCount(), ares.reasons["budget_cutoff"])
	}
}

// TestHiddenPastTheCutoffHasNoRank: "ranks count visible candidates only".
// A hidden item met before the budget stops is recorded with rank 0; one
// past the cutoff is not given a rank either — least of all the rank of a
// visible candidate.
func TestHiddenPastTheCutoffHasNoRank(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("veil2")
	items, _ := ladder("l.", 60)
	items = append(items, spec{Key: "h.late", Content: "secret", Priority: 5000 - 10*50 - 5, Roles: hiddenFrom("support")})
	w.batch("veil2", items)
	p := w.assemble("veil2", w.admin, ctxtype.Request{TargetRole: "support", TokenBudget: 200})
	require.NotNil(t, p.Cutoff)
	a := w.why(p, w.admin, ikey{"h.late", "project"})
	require.Equal(t, "hidden", a.Reason, "%+v", a)
	// h.late sits between l.050 and l.051 in rank order.
	next := w.why(p, w.admin, ikey{"l.051", "project"})
	require.Equal(t, "budget_cutoff", next.Reason, "%+v", next)
	require.Equal(t, 53, whyRank(next), "%+v", next)
	require.NotEqual(t, whyRank(next), whyRank(a), "a hidden item shares the rank of l.051: %+v", a)
	require.Zero(t, whyRank(a), "a hidden item is never ranked (its record before the cutoff says rank 0): %+v", a)
}

// TestWhyAgreesWithTheCutoffForEveryRole: in a world of plain always-on
// items in both layers with several roles, the why answers of every item
// agree with the records, and the number that answer budget_cutoff is the
// cutoff's count, for each role; the admin's view differs only by the
// hidden ones.
func TestWhyAgreesWithTheCutoffForEveryRole(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("clean")
	rng := rand.New(rand.NewPCG(8, 1))
	var items, shared []spec
	var keys []ikey
	roleOf := map[ikey]*ctxtype.Roles{}
	auths := []string{"policy", "instruction", "evidence", "hypothesis"}
	confs := []string{"verified", "probable", "uncertain"}
	for i := range 110 {
		k := fmt.Sprintf("c.%03d", i)
		it := spec{Key: k, Content: filler(i, 1+rng.IntN(8)), Priority: int32(rng.IntN(20)),
			Authority: auths[rng.IntN(4)], Confidence: confs[rng.IntN(3)], Source: "human"}
		switch rng.IntN(6) {
		case 0:
			it.Roles = hiddenFrom("support")
		case 1:
			it.Roles = visibleTo("critic")
		}
		if it.Roles != nil {
			roleOf[ikey{k, "project"}] = it.Roles
		}
		items = append(items, it)
		keys = append(keys, ikey{k, "project"})
	}
	for i := range 30 {
		k := fmt.Sprintf("s.%03d", i)
		it := spec{Key: k, Content: filler(1000+i, 1+rng.IntN(8)), Priority: int32(rng.IntN(20)), Authority: auths[rng.IntN(4)], Source: "human"}
		if i%7 == 0 {
			it.Roles = hiddenFrom("critic")
			roleOf[ikey{k, "shared"}] = it.Roles
		}
		shared = append(shared, it)
		keys = append(keys, ikey{k, "shared"})
	}
	w.batch("clean", items)
	w.batch(ctxtype.SharedProject, shared)
	hiddenFor := func(role string) func(ikey) bool {
		return func(k ikey) bool {
			r, ok := roleOf[k]
			if !ok {
				return false
			}
			if len(r.HiddenFrom) > 0 && r.HiddenFrom[0] == role {
				return true
			}
			return len(r.VisibleTo) > 0 && r.VisibleTo[0] != role
		}
	}
	for _, role := range []string{"support", "critic"} {
		viewer := w.reader(role, "clean")
		req := ctxtype.Request{TargetRole: role, TokenBudget: 500, Task: &ctxtype.Task{Objective: "Summarise the facts."}}
		p := w.assemble("clean", viewer, req)
		require.NotNil(t, p.Cutoff, role)
		recs := w.check(p)
		res := w.whyAll(p, recs, keys, hiddenFor(role))
		require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"], "%s: sum of budget_cutoff answers is cutoff.count", role)
		visible := 0
		for _, k := range keys {
			if !hiddenFor(role)(k) {
				visible++
			}
		}
		require.Equal(t, visible, p.cutRank()-1+p.cutCount(), "%s: every visible candidate is tried or counted", role)
		require.Equal(t, visible, res.reasons["included"]+res.reasons["budget"]+res.reasons["budget_cutoff"])
		require.Len(t, res.notFound, len(keys)-visible)

		// The admin's view of the same packet: same budget and text; the
		// hidden answer hidden; the other counts unchanged.
		a := w.assemble("clean", w.admin, req)
		require.Equal(t, p.Rendered, a.Rendered, role)
		require.Equal(t, budgetOf(p.Packet), budgetOf(a.Packet), role)
		arecs := w.check(a)
		ares := w.whyAll(a, arecs, keys, hiddenFor(role))
		require.Equal(t, len(keys)-visible, ares.reasons["hidden"], role)
		require.Equal(t, res.reasons["budget_cutoff"], ares.reasons["budget_cutoff"], role)
		pex := p.Excluded()
		for r, n := range a.Excluded() {
			if r != "hidden" {
				require.Equal(t, pex[r], n, "%s: excluded[%s]", role, r)
			}
		}
	}
}
