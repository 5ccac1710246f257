package auth_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/testfactory"
)

// fixture is an agent service over a fresh database with an admin of
// every project.
func fixture(t *testing.T) (*store.Store, *auth.Service, *auth.Agent) {
	t.Helper()
	st := testfactory.Store(t)
	return st, auth.NewService(st), testfactory.Admin(t, st)
}

// An admin creates an agent: the key it gets once authenticates as that
// agent, the row names its creator, and the ceiling is the permission's
// default. Only admins create agents, and invalid parameters are refused
// field by field.
func TestCreateByAdmin(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()
	a, key, err := svc.Create(ctx, admin, auth.CreateParams{Name: "critic-1", Role: "critic", Permission: auth.Edit, Projects: []string{"acme"}})
	require.NoError(t, err)
	require.True(t, auth.WellFormed(key))
	require.Equal(t, auth.Instruction, a.MaxAuthority, "an edit agent's default ceiling")
	require.Nil(t, a.RevokedAt)

	got, err := svc.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, a.ID, got.ID)
	require.Equal(t, "critic", got.Role)
	require.Equal(t, auth.Edit, got.Permission)
	require.Equal(t, []string{"acme"}, got.Projects)
	row, err := st.AgentGet(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, admin.ID, row.CreatedBy)

	_, again, err := svc.Create(ctx, admin, auth.CreateParams{Name: "critic-2", Role: "critic", Permission: auth.Edit, Projects: []string{"acme"}})
	require.NoError(t, err)
	require.NotEqual(t, key, again, "every agent has a key of its own")

	_, _, err = svc.Create(ctx, a, auth.CreateParams{Name: "x", Role: "x", Permission: auth.ReadOnly, Projects: []string{"acme"}})
	require.ErrorIs(t, err, fault.ErrForbidden, "an editor creates no agents")
	_, _, err = svc.Create(ctx, nil, auth.CreateParams{Name: "x", Role: "x", Permission: auth.ReadOnly, Projects: []string{"acme"}})
	require.ErrorIs(t, err, fault.ErrForbidden)
	_, _, err = svc.Create(ctx, admin, auth.CreateParams{Name: " ", Role: "x", Permission: "owner", Projects: []string{"bad name"}})
	require.ErrorIs(t, err, fault.ErrInvalid)
	for _, part := range []string{"name is required", "permission must be", "/projects/0"} {
		require.ErrorContains(t, err, part)
	}
	_, _, err = svc.Create(ctx, admin, auth.CreateParams{Name: "x", Role: "x", Permission: auth.Edit})
	require.ErrorContains(t, err, "projects is required")
}

// An admin grants only what it holds: projects in its own scope (not
// "*", nor _shared unless it holds it), and authority up to its own
// ceiling, which also caps a new agent's default. A refused agent is not
// written.
func TestCreateIsCappedByTheCaller(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()
	scoped, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{By: admin, Permission: auth.Admin,
		Projects: []string{"acme", "beta"}, MaxAuthority: auth.Instruction})

	a, _, err := svc.Create(ctx, scoped, auth.CreateParams{Name: "ok", Role: "implementer", Permission: auth.Admin, Projects: []string{"beta"}})
	require.NoError(t, err, "within its scope")
	require.Equal(t, auth.Instruction, a.MaxAuthority, "an admin's default policy ceiling, capped at the caller's")

	for _, projects := range [][]string{{"acme", "gamma"}, {auth.AllProjects}, {ctxtype.SharedProject}} {
		_, _, err := svc.Create(ctx, scoped, auth.CreateParams{Name: "refused", Role: "implementer", Permission: auth.ReadOnly, Projects: projects})
		require.ErrorIs(t, err, fault.ErrForbidden, "%v is beyond acme and beta", projects)
	}
	_, _, err = svc.Create(ctx, scoped, auth.CreateParams{Name: "refused", Role: "implementer", Permission: auth.Edit,
		Projects: []string{"acme"}, MaxAuthority: auth.Policy})
	var grant *auth.GrantError
	require.ErrorAs(t, err, &grant)
	require.ErrorIs(t, err, fault.ErrForbidden)
	require.Equal(t, "/max_authority", grant.Fields[0].Pointer)

	all, _, err := svc.List(ctx, admin, "", 100)
	require.NoError(t, err)
	for _, ag := range all {
		require.NotEqual(t, "refused", ag.Name, "a refused agent is not written")
	}
	seen, _, err := svc.List(ctx, scoped, "", 100)
	require.NoError(t, err)
	for _, ag := range seen {
		require.True(t, scoped.Covers(ag.Projects), "an admin lists only agents within its scope, not %v", ag.Projects)
	}
	require.Len(t, all, 3)
	require.Len(t, seen, 2, "itself and the agent it made, not the admin of every project")
}

// A revoked key is refused at once by the process that revoked it,
// although it authenticated (and was kept) a moment before, and within a
// second by another process's cache; revoking twice is harmless. An
// admin revokes only agents within its scope.
func TestRevoke(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()
	a, key := testfactory.Agent(t, st, &testfactory.AgentOpts{By: admin, Projects: []string{"acme"}})
	other := auth.NewService(st) // another process
	_, err := svc.Authenticate(ctx, key)
	require.NoError(t, err)
	_, err = other.Authenticate(ctx, key)
	require.NoError(t, err)

	betaAdmin, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{By: admin, Permission: auth.Admin, Projects: []string{"beta"}})
	_, err = svc.Revoke(ctx, betaAdmin, a.ID)
	require.ErrorIs(t, err, fault.ErrForbidden, "acme's agent is outside beta's admin")
	_, err = svc.Revoke(ctx, a, a.ID)
	require.ErrorIs(t, err, fault.ErrForbidden, "only admins revoke")
	_, err = svc.Authenticate(ctx, key)
	require.NoError(t, err, "a refused revocation revokes nothing")

	revoked, err := svc.Revoke(ctx, admin, a.ID)
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	_, err = svc.Authenticate(ctx, key)
	require.ErrorIs(t, err, fault.ErrUnauthenticated)
	require.ErrorContains(t, err, "key revoked")
	_, err = svc.Current(ctx, a.ID)
	require.ErrorIs(t, err, fault.ErrUnauthenticated)
	require.Eventually(t, func() bool {
		_, err := other.Authenticate(ctx, key)
		return err != nil
	}, 3*time.Second, 50*time.Millisecond, "another process refuses the key within its cache's second")

	again, err := svc.Revoke(ctx, admin, a.ID)
	require.NoError(t, err, "revoking twice is harmless")
	require.NotNil(t, again.RevokedAt)
	_, err = svc.Revoke(ctx, admin, "agt_missing")
	require.ErrorIs(t, err, fault.ErrNotFound)
}

// Authenticate refuses a malformed key without a lookup, and a well-formed
// key no agent holds, both as unauthenticated.
func TestAuthenticateRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	_, svc, _ := fixture(t)
	ctx := t.Context()
	for _, key := range []string{"", "ctxd_short", auth.NewKey() + "x"} {
		_, err := svc.Authenticate(ctx, key)
		require.ErrorIs(t, err, fault.ErrUnauthenticated, "%q", key)
		require.ErrorContains(t, err, "not a contextd key")
	}
	_, err := svc.Authenticate(ctx, auth.NewKey())
	require.ErrorIs(t, err, fault.ErrUnauthenticated)
	require.ErrorContains(t, err, "unknown key")
}
