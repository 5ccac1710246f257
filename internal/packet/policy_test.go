package packet_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
)

// putPolicy sets role's policy in proj, as admin.
func (w *world) putPolicy(proj, role string, p ctxtype.RolePolicy) {
	w.t.Helper()
	err := w.st.InTx(w.t.Context(), func(tx *store.Tx) error {
		_, err := w.svc.RolePolicies.PutTx(w.t.Context(), tx, w.admin, proj, role, p)
		return err
	})
	require.NoError(w.t, err)
}

// TestRolePolicyAddsNoRoundTrip: a role's policy is read with the
// snapshot's read point, in its round trip, so a packet whose budget,
// kinds and caps come from a policy costs the round trips of the same
// packet asked for in full; its records say what the policy left out,
// past the cutoff it is counted like any untried candidate, and it
// replays byte for byte.
func TestRolePolicyAddsNoRoundTrip(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("trips")
	kinds := []string{"knowledge", "episode", "skill", "state"}
	for _, layer := range []string{"trips", ctxtype.SharedProject} {
		var items []spec
		for i := range 120 {
			it := spec{Key: fmt.Sprintf("%s.%03d", layer, i), Content: fmt.Sprintf("refund ledger fact %d of %s", i, layer),
				Priority: int32(i % 7), Kind: kinds[i%len(kinds)]}
			if i%3 == 1 {
				it.Trigger = keywords("refund")
			}
			items = append(items, it)
		}
		w.batch(layer, items)
	}
	req := ctxtype.Request{TargetRole: "support", Query: "refund ledger",
		History: []ctxtype.Message{{Role: "user", Author: "person", Content: "my refund is late"}}}
	trips := func(r ctxtype.Request) (int64, assembled) {
		w.assemble("trips", w.admin, r) // the process's text cache holds what it read
		before := w.st.RoundTrips()
		p := w.assemble("trips", w.admin, r)
		return w.st.RoundTrips() - before, p
	}
	asked := req
	asked.SetTokenBudget(1500)
	without, plain := trips(asked)
	require.Nil(t, plain.Request.RolePolicy, "a role without a policy")

	// The same packet, its budget from the policy: the same trips.
	budget := 1500
	w.putPolicy(ctxtype.SharedProject, "support", ctxtype.RolePolicy{TokenBudget: &budget, Format: ctxtype.Markdown})
	with, same := trips(req)
	t.Logf("round trips: %d without a policy, %d with the same budget from one", without, with)
	require.Equal(t, without, with, "the policy is read in the read point's trip")
	require.Equal(t, plain.Rendered, same.Rendered)
	require.Equal(t, "_shared", same.Request.RolePolicy.Layers["token_budget"])

	// Kinds and a cap leave candidates out, so the budget reads further
	// (as hidden items make it): a page more, never a trip per candidate.
	small := 400
	w.putPolicy(ctxtype.SharedProject, "support", ctxtype.RolePolicy{TokenBudget: &small, Kinds: []string{"knowledge", "skill", "state"}})
	w.putPolicy("trips", "support", ctxtype.RolePolicy{MaxPerSection: map[string]int{"Project Knowledge": 3}})
	with, p := trips(req)
	t.Logf("round trips: %d with kinds and a cap", with)
	require.LessOrEqual(t, with, int64(9))

	require.Equal(t, 400, p.Allocated, "the budget is _shared's")
	pol := p.Request.RolePolicy
	require.NotNil(t, pol)
	require.Equal(t, map[string]string{"token_budget": "_shared", "kinds": "_shared", "max_per_section": "trips"}, pol.Layers)
	n := 0
	for _, r := range p.Records {
		switch {
		case r.Decision == ctxtype.Included && r.Section == "Project Knowledge":
			n++
		case r.Decision == ctxtype.Included:
			require.NotEqual(t, "episode", r.Kind, "%s is of a kind the policy leaves out", r.SubjectKey)
		}
	}
	require.LessOrEqual(t, n, 3, "Project Knowledge holds at most the policy's cap")
	require.Positive(t, p.Excluded()[ctxtype.ReasonRolePolicy], "what the policy left out is recorded")
	require.NotNil(t, p.Cutoff, "the budget cuts")

	rep := w.replay("trips", w.admin, p.ID)
	require.True(t, rep.Identical, "%+v", rep.Differences)
}
