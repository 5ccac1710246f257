package project_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/testfactory"
	"github.com/contextd/contextd/internal/validation"
)

// fixture is a project service over a fresh database with an admin of
// every project.
func fixture(t *testing.T) (*store.Store, *project.Service, *auth.Agent) {
	t.Helper()
	st := testfactory.Store(t)
	return st, project.NewService(st), testfactory.Admin(t, st)
}

// invalidCode is the code of a validation error's one field.
func invalidCode(t *testing.T, err error) string {
	t.Helper()
	var v *validation.Error
	require.ErrorAs(t, err, &v)
	require.Len(t, v.Fields, 1, "%v", err)
	return v.Fields[0].Code
}

// Put creates a project, then updates its description; the stored row is
// what Put returned. Putting the same description again changes nothing,
// not even the update time.
func TestPutCreatesThenUpdates(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()

	p, created, err := svc.Put(ctx, admin, "acme", "first")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "first", p.Description)

	q, created, err := svc.Put(ctx, admin, "acme", "second")
	require.NoError(t, err)
	require.False(t, created, "an existing project is updated")
	require.Equal(t, "second", q.Description)
	require.True(t, q.CreatedAt.Equal(p.CreatedAt), "creation time kept")
	require.True(t, q.UpdatedAt.After(p.UpdatedAt), "update time moved")

	r, created, err := svc.Put(ctx, admin, "acme", "second")
	require.NoError(t, err)
	require.False(t, created)
	require.True(t, r.UpdatedAt.Equal(q.UpdatedAt), "an unchanged description is no update")

	got, err := st.ProjectGet(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, "second", got.Description)
	_, err = st.ProjectGet(ctx, "nope")
	require.ErrorIs(t, err, fault.ErrNotFound)
}

// Put refuses what only an admin of the project may do, names no project
// may have, and an over-long description; the refused projects are not
// written.
func TestPutRefuses(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()
	testfactory.Project(t, st, &testfactory.ProjectOpts{Name: "acme", By: admin})
	editor, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Projects: []string{"acme", "future"}})
	scopedAdmin, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.Admin, Projects: []string{"acme"}})

	_, _, err := svc.Put(ctx, editor, "acme", "mine now")
	require.ErrorIs(t, err, fault.ErrForbidden, "an editor may not change a project")
	_, _, err = svc.Put(ctx, editor, "future", "")
	require.ErrorIs(t, err, project.ErrNotFound, "nor learn that a project is missing from a refusal")
	_, _, err = svc.Put(ctx, scopedAdmin, "other", "")
	require.ErrorIs(t, err, project.ErrNotFound, "an admin of acme creates nothing outside it")
	_, created, err := svc.Put(ctx, scopedAdmin, "acme", "changed by its admin")
	require.NoError(t, err)
	require.False(t, created)

	_, _, err = svc.Put(ctx, admin, ctxtype.SharedProject, "mine")
	require.Equal(t, "reserved", invalidCode(t, err))
	_, _, err = svc.Put(ctx, admin, "-leading-dash", "")
	require.Equal(t, "format", invalidCode(t, err))
	_, _, err = svc.Put(ctx, admin, "long", strings.Repeat("x", 1<<20))
	require.ErrorIs(t, err, fault.ErrInvalid)

	for _, name := range []string{"future", "other", "-leading-dash", "long"} {
		_, err := st.ProjectGet(ctx, name)
		require.ErrorIs(t, err, fault.ErrNotFound, name)
	}
	shared, err := st.ProjectGet(ctx, ctxtype.SharedProject)
	require.NoError(t, err)
	require.NotEqual(t, "mine", shared.Description)
}

// List shows every project to an agent of every project, and to an agent
// of some projects those and `_shared`; pages follow one another without
// gap or repeat.
func TestList(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()
	for _, name := range []string{"acme", "beta", "gamma"} {
		testfactory.Project(t, st, &testfactory.ProjectOpts{Name: name, By: admin})
	}
	names := func(ps []store.Project) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.Name
		}
		return out
	}

	all, err := svc.List(ctx, admin, "", 100)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{ctxtype.SharedProject, "acme", "beta", "gamma"}, names(all))

	scoped, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.ReadOnly, Projects: []string{"beta", "missing"}})
	some, err := svc.List(ctx, scoped, "", 100)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{ctxtype.SharedProject, "beta"}, names(some), "a scoped agent sees its projects and _shared, and no missing one")

	var paged []string
	for after := ""; ; {
		page, err := svc.List(ctx, admin, after, 1)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		require.Len(t, page, 1)
		paged = append(paged, page[0].Name)
		after = page[0].Name
	}
	require.Equal(t, names(all), paged)
}

// _shared is in every agent's scope: anyone reads it, and only an admin
// whose scope is every project, or names _shared, may write it.
func TestSharedRules(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()
	reader, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.ReadOnly, Projects: []string{"acme"}})
	editor, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Projects: []string{auth.AllProjects}})
	acmeAdmin, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.Admin, Projects: []string{"acme"}})
	sharedAdmin, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.Admin, Projects: []string{ctxtype.SharedProject}})

	for _, a := range []*auth.Agent{reader, editor, acmeAdmin, sharedAdmin, admin} {
		require.NoError(t, svc.Authorize(ctx, a, ctxtype.SharedProject, auth.ReadOnly), "%s reads _shared", a.Projects)
	}
	for _, a := range []*auth.Agent{reader, editor, acmeAdmin} {
		require.ErrorIs(t, svc.Authorize(ctx, a, ctxtype.SharedProject, auth.Edit), fault.ErrForbidden, "%s %s may not write _shared", a.Permission, a.Projects)
	}
	for _, a := range []*auth.Agent{sharedAdmin, admin} {
		require.NoError(t, svc.Authorize(ctx, a, ctxtype.SharedProject, auth.Admin), "%s writes _shared", a.Projects)
	}
}

// AuthorizeIn checks scope before existence and existence before
// permission: a project out of scope is refused exactly as a missing one,
// and a read-only agent is refused an edit of its own project.
func TestAuthorizeIn(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()
	for _, name := range []string{"acme", "beta"} {
		testfactory.Project(t, st, &testfactory.ProjectOpts{Name: name, By: admin})
	}
	reader, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.ReadOnly, Projects: []string{"acme", "gone"}})

	outOfScope := svc.AuthorizeIn(ctx, st.DB, reader, "beta", auth.ReadOnly)
	require.ErrorIs(t, outOfScope, project.ErrNotFound)
	missing := svc.AuthorizeIn(ctx, st.DB, reader, "gone", auth.ReadOnly)
	require.ErrorIs(t, missing, project.ErrNotFound)
	require.Equal(t, strings.ReplaceAll(missing.Error(), "gone", "beta"), outOfScope.Error(), "out of scope reads as missing")
	require.ErrorIs(t, svc.AuthorizeIn(ctx, st.DB, reader, "beta", auth.Admin), project.ErrNotFound,
		"out of scope is not found whatever the permission asked")

	require.NoError(t, svc.AuthorizeIn(ctx, st.DB, reader, "acme", auth.ReadOnly))
	err := svc.AuthorizeIn(ctx, st.DB, reader, "acme", auth.Edit)
	require.ErrorIs(t, err, fault.ErrForbidden)
	require.False(t, errors.Is(err, fault.ErrNotFound))
	require.ErrorContains(t, err, "edit permission needed on project acme")
}

// AuthorizeIn reads through the transaction it is given: a project made
// in it is found there before commit, while Authorize, reading committed
// rows, finds it only after (a miss is not remembered).
func TestAuthorizeInSeesItsTransaction(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()
	err := st.InTx(ctx, func(tx *store.Tx) error {
		_, created, err := svc.PutTx(ctx, tx, admin, "fresh", "")
		require.NoError(t, err)
		require.True(t, created)
		require.NoError(t, svc.AuthorizeIn(ctx, tx.DB, admin, "fresh", auth.Edit), "the transaction's own project")
		require.ErrorIs(t, svc.Authorize(ctx, admin, "fresh", auth.Edit), project.ErrNotFound, "uncommitted elsewhere")
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, svc.Authorize(ctx, admin, "fresh", auth.Edit), "found once committed")
}

// CheckName accepts the names of the documented rule and nothing else.
func TestCheckName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "acme", "A.b_c-9", strings.Repeat("x", 100)} {
		require.NoError(t, project.CheckName("project", ok), ok)
	}
	for _, bad := range []string{"", "_shared", ".hidden", "-x", "a b", "é", strings.Repeat("x", 101)} {
		require.Equal(t, "format", invalidCode(t, project.CheckName("project", bad)), bad)
	}
}
