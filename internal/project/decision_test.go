package project_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/testfactory"
)

// A request is authorized once: Authorize (and AuthorizeIn) trust what
// AuthorizeRequest decided for the same agent value and project when it
// covers the permission asked, and decide anew otherwise. The trust is
// seen through a second service on another database, where the project
// does not exist: only a decision carried by the context lets it pass.
func TestARequestIsAuthorizedOnce(t *testing.T) {
	t.Parallel()
	st, svc, _ := fixture(t)
	testfactory.Project(t, st, &testfactory.ProjectOpts{Name: "acme"})
	reader, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.ReadOnly, Projects: []string{"acme"}})

	ctx, err := svc.AuthorizeRequest(t.Context(), reader, "acme", auth.ReadOnly)
	require.NoError(t, err)
	elsewhere := testfactory.Store(t) // no project acme
	other := project.NewService(elsewhere)
	require.ErrorIs(t, other.Authorize(t.Context(), reader, "acme", auth.ReadOnly), fault.ErrNotFound, "decided without the request's decision")
	require.NoError(t, other.Authorize(ctx, reader, "acme", auth.ReadOnly), "the request's decision is trusted")
	require.NoError(t, other.AuthorizeIn(ctx, elsewhere.DB, reader, "acme", auth.ReadOnly), "inside a transaction too")

	require.ErrorIs(t, other.Authorize(ctx, reader, "acme", auth.Edit), fault.ErrNotFound, "more than was decided is decided anew")
	require.ErrorIs(t, svc.Authorize(ctx, reader, "acme", auth.Edit), fault.ErrForbidden)
	require.ErrorIs(t, other.Authorize(ctx, reader, "beta", auth.ReadOnly), fault.ErrNotFound, "another project is decided anew")
	copied := *reader
	require.ErrorIs(t, other.Authorize(ctx, &copied, "acme", auth.ReadOnly), fault.ErrNotFound, "another agent value is decided anew")
	require.ErrorIs(t, other.Authorize(ctx, reader, "acme", auth.Permission("root")), fault.ErrNotFound, "an unknown permission is never covered")

	_, err = svc.AuthorizeRequest(t.Context(), reader, "acme", auth.Edit)
	require.ErrorIs(t, err, fault.ErrForbidden, "a refused request carries no decision")
}
