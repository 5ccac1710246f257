package testhttp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/testhttp"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestServerAnswersTypedRequestsAndProblems: a started server takes a
// typed body from its admin, answers a typed result, and a refused
// request decodes as a problem with its field errors; a second server on
// the same database gets an admin of its own.
func TestServerAnswersTypedRequestsAndProblems(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := testhttp.Start(t, store.New(pool, pgtest.AcquireTimeout), testhttp.Options{})
	require.NotEmpty(t, s.Admin)
	desc := "a project"
	r := s.Do("PUT", "/v1/projects/acme", s.Admin, api.PutProjectJSONRequestBody{Description: &desc})
	require.Equal(t, 201, r.Status, r.Text)
	require.Equal(t, "a project", testhttp.Decode[api.Project](t, r).Description)

	_, reader := s.Agent("reader", "support", auth.ReadOnly, "acme")
	r = s.Do("PUT", "/v1/projects/acme/items/k", reader, api.PutItemJSONRequestBody{Content: "x"})
	require.Equal(t, 403, r.Status, r.Text)
	require.Equal(t, "forbidden", r.Problem(t).Code)

	r = s.Do("GET", "/v1/projects/acme/items?limit=0", s.Admin, nil)
	require.Equal(t, 422, r.Status, r.Text)
	p := r.Problem(t)
	require.Equal(t, "validation_failed", p.Code)
	require.Equal(t, []string{"limit"}, r.Pointers())
	require.Len(t, p.Errors, 1)

	other := testhttp.Start(t, store.New(pool, pgtest.AcquireTimeout), testhttp.Options{TLS: true})
	require.NotEmpty(t, other.Admin)
	require.NotEqual(t, s.Admin, other.Admin)
	other.Must(200, "GET", "/v1/projects/acme/items", other.Admin, nil)
}
