package item

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// TestPromoterRoles: the roles that may promote a proposal are those whose
// grant covers its authority, that may edit the project (_shared: admins
// of every project or of _shared) and see the item and the proposal.
func TestPromoterRoles(t *testing.T) {
	t.Parallel()
	grants := []store.PromoterGrant{
		{Role: "lead", Permission: "edit", MaxAuthority: "instruction"},
		{Role: "intern", Permission: "edit", MaxAuthority: "evidence"},
		{Role: "ops", Permission: "admin", MaxAuthority: "policy"},
		{Role: "scoped-admin", Permission: "admin", MaxAuthority: "policy"},
		{Role: "root", Permission: "admin", MaxAuthority: "policy", SharedScope: true},
		{Role: "lead", Permission: "edit", MaxAuthority: ""}, // before grants existed: edit's default, instruction
	}
	f := ctxtype.Fields{Authority: "instruction", Roles: ctxtype.Roles{HiddenFrom: []string{"ops", "lead"}}}
	require.Equal(t, []string{"ops", "root", "scoped-admin"}, promoterRoles(grants, "acme", f, nil), "admins see every item")
	f.Roles = ctxtype.Roles{}
	cur := &ctxtype.Roles{VisibleTo: []string{"intern"}}
	require.Equal(t, []string{"ops", "root", "scoped-admin"}, promoterRoles(grants, "acme", f, cur), "the item's roles too")
	require.Equal(t, []string{"root"}, promoterRoles(grants, auth.SharedProject, f, nil), "_shared")
	f.Authority = "policy"
	require.Equal(t, []string{"ops", "root", "scoped-admin"}, promoterRoles(grants, "acme", f, nil))
	require.Equal(t, []string{}, promoterRoles(nil, "acme", f, nil))
}

// TestProposalFieldsHashAsWritten: a proposal's fields read back from the
// database (jsonb: its own key order) hash as the write that made them, so
// the version a promotion makes compares equal with the same write sent
// directly.
func TestProposalFieldsHashAsWritten(t *testing.T) {
	t.Parallel()
	var errs validation.List
	in := Input{Key: "k", Content: "x", Metadata: json.RawMessage(`{"zeta":1,"a":{"bb":2,"c":1.50},"long_key_first":"<&>"}`)}
	f := in.normalize("", &errs)
	require.NoError(t, errs.Err())
	f.Authority = "evidence"
	want, err := prepare("k", f)
	require.NoError(t, err)
	// As jsonb prints an object: shorter keys first.
	stored := f
	stored.Metadata = json.RawMessage(`{"a": {"c": 1.50, "bb": 2}, "zeta": 1, "long_key_first": "\u003c\u0026\u003e"}`)
	raw, err := json.Marshal(stored)
	require.NoError(t, err)
	var back ctxtype.Fields
	require.NoError(t, json.Unmarshal(raw, &back))
	got, err := prepare("k", proposalFields(back))
	require.NoError(t, err)
	require.Equal(t, want.fieldsHash, got.fieldsHash)
}

// TestDecidableBy: the explorer's offer follows the service's rules.
func TestDecidableBy(t *testing.T) {
	t.Parallel()
	p := Proposal{Proposal: store.Proposal{Project: "acme", CreatedBy: "agt_a", CreatedByName: "feed", Fields: ctxtype.Fields{Authority: "instruction"}}}
	for name, tc := range map[string]struct {
		agent           auth.Agent
		promote, reject bool
	}{
		"author":        {auth.Agent{ID: "agt_a", Name: "feed", Permission: auth.Admin, Projects: []string{"*"}}, false, true},
		"author's name": {auth.Agent{ID: "agt_b", Name: "feed", Permission: auth.Admin, Projects: []string{"*"}}, false, true},
		"editor":        {auth.Agent{ID: "agt_c", Name: "lead", Permission: auth.Edit, Projects: []string{"acme"}}, true, true},
		"low grant":     {auth.Agent{ID: "agt_d", Name: "intern", Permission: auth.Edit, MaxAuthority: "evidence", Projects: []string{"acme"}}, false, false},
		"read-only":     {auth.Agent{ID: "agt_e", Name: "reader", Permission: auth.ReadOnly, Projects: []string{"acme"}}, false, false},
	} {
		promote, reject := p.DecidableBy(&tc.agent)
		require.Equal(t, [2]bool{tc.promote, tc.reject}, [2]bool{promote, reject}, name)
	}
	p.Decision = &store.ProposalDecision{Decision: ProposalRejected}
	promote, reject := p.DecidableBy(&auth.Agent{ID: "agt_c", Permission: auth.Admin, Projects: []string{"*"}})
	require.False(t, promote || reject, "decided")
}
