package server_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/testhttp"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testKeys is the servers' audit key in tests.
var testKeys = testhttp.Keys

// env is a server on a database of its own, with an admin key (a
// testhttp.Server), with the pool for the tests' read-only SQL. A test
// that starts a server of its own fills url (and what it needs) itself.
type env struct {
	t      *testing.T
	url    string
	pool   *pgxpool.Pool
	agents *auth.Service
	admin  string
	app    *app.App
}

func setup(t *testing.T) *env {
	return setupWith(t, server.Config{})
}

func setupWith(t *testing.T, cfg server.Config) *env {
	t.Helper()
	pool := pgtest.New(t)
	srv := testhttp.Start(t, store.New(pool, pgtest.AcquireTimeout), testhttp.Options{Config: cfg})
	return &env{t: t, url: srv.URL, pool: pool, agents: srv.App.Agents, admin: srv.Admin, app: srv.App}
}

// adoptChains seals the chains the test database's migrations wrote (the
// _shared project's), as `serve` does in the process that applies the
// migration that began sealing: the harness migrates without the key.
func adoptChains(t testing.TB, st *store.Store) {
	t.Helper()
	_, err := st.AdoptChains(context.Background(), testKeys.Seal)
	require.NoError(t, err)
}

// agent creates an agent and returns its key.
func (e *env) agent(role string, perm auth.Permission, projects ...string) string {
	e.t.Helper()
	_, key, err := e.agents.CreateLocal(context.Background(), auth.CreateParams{Name: role + "-agent", Role: role, Permission: perm, Projects: projects})
	require.NoError(e.t, err)
	return key
}

// project creates a project as admin.
func (e *env) project(name string) {
	e.t.Helper()
	r := e.do("PUT", "/v1/projects/"+name, e.admin, api.PutProjectJSONRequestBody{Description: ptr("test")})
	require.Equal(e.t, 201, r.status, r.text)
}

type resp struct {
	status int
	header http.Header
	text   string
	json   map[string]any
}

// do sends a request (testhttp.Server.Do); body may be nil, a string or
// []byte (sent as is), or a typed api body (sent as JSON).
func (e *env) do(method, path, key string, body any, headers ...string) resp {
	e.t.Helper()
	r := testhttp.NewClient(e.t, e.url).Do(method, path, key, body, headers...)
	return resp{status: r.Status, header: r.Header, text: r.Text, json: r.JSON}
}

func (r resp) num(field string) int { return testhttp.Response{JSON: r.json}.Num(field) }

func (r resp) list() []map[string]any { return testhttp.Response{JSON: r.json}.List() }

// pointers returns the JSON Pointers of a problem's field errors.
func (r resp) pointers() []string { return testhttp.Response{JSON: r.json}.Pointers() }

// batch writes items to a project in one batch request, as admin.
func (e *env) batch(project string, items []api.BatchItem) {
	e.t.Helper()
	r := e.do("POST", "/v1/projects/"+project+"/items", e.admin, api.BatchItemsJSONRequestBody{Items: items})
	require.Equal(e.t, 200, r.status, r.text)
}

// budgetOf is a packet answer's budget.
func budgetOf(r resp) map[string]any { return r.json["budget"].(map[string]any) }

// ptr is a pointer to v, for the optional members of the api types.
func ptr[T any](v T) *T { return &v }
