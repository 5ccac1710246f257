package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a server on a database of its own, with an admin key.
// testKeys is the servers' audit key in tests.
var testKeys, _ = evidence.ParseKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")

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
	a := app.New(store.New(pool, pgtest.AcquireTimeout), app.WithKeys(testKeys))
	adoptChains(t, a.Store)
	cfg.App = a
	ts := httptest.NewServer(server.New(cfg))
	t.Cleanup(ts.Close)
	agents := a.Agents
	_, key, err := agents.Bootstrap(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, key)
	return &env{t: t, url: ts.URL, pool: pool, agents: agents, admin: key, app: a}
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
	r := e.do("PUT", "/v1/projects/"+name, e.admin, map[string]any{"description": "test"})
	require.Equal(e.t, 201, r.status, r.text)
}

type resp struct {
	status int
	header http.Header
	text   string
	json   map[string]any
}

// do sends a request; body may be nil, a string (sent as is) or anything JSON.
func (e *env) do(method, path, key string, body any, headers ...string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		require.NoError(e.t, err)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	require.NoError(e.t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	out := resp{status: res.StatusCode, header: res.Header, text: string(raw)}
	if len(raw) > 0 && raw[0] == '{' {
		require.NoError(e.t, json.Unmarshal(raw, &out.json), string(raw))
	}
	if res.StatusCode >= 400 {
		require.Equal(e.t, "application/problem+json", res.Header.Get("Content-Type"), string(raw))
		require.NotEmpty(e.t, out.json["code"], string(raw))
	}
	return out
}

func (r resp) num(field string) int {
	f, _ := r.json[field].(float64)
	return int(f)
}

func (r resp) list() []map[string]any {
	data, _ := r.json["data"].([]any)
	out := make([]map[string]any, len(data))
	for i, d := range data {
		out[i] = d.(map[string]any)
	}
	return out
}

// pointers returns the JSON Pointers of a problem's field errors.
func (r resp) pointers() []string {
	errs, _ := r.json["errors"].([]any)
	var out []string
	for _, e := range errs {
		m := e.(map[string]any)
		p, _ := m["pointer"].(string)
		if p == "" {
			p, _ = m["parameter"].(string)
		}
		out = append(out, p)
	}
	return out
}
