package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
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

// testKeys is the servers' audit key in tests (checkpoints are signed).
var testKeys, _ = evidence.ParseKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")

// env is a whole server (API and explorer) on a database of its own, with
// an admin key.
type env struct {
	t     *testing.T
	srv   *httptest.Server
	url   string
	app   *app.App
	st    *store.Store
	pool  *pgxpool.Pool
	admin string
}

func newEnv(t *testing.T) *env { return newEnvOn(t, pgtest.New(t), false) }

// newEnvOn is a server over pool, served over TLS when tls is set.
func newEnvOn(t *testing.T, pool *pgxpool.Pool, tls bool) *env {
	t.Helper()
	st := store.New(pool, pgtest.AcquireTimeout)
	a := app.New(st, app.WithKeys(testKeys))
	_, err := st.AdoptChains(context.Background(), testKeys.Seal) // as serve does when it migrates: the harness migrates without the key
	require.NoError(t, err)
	h := server.New(server.Config{App: a})
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv, url: srv.URL, app: a, st: st, pool: pool}
	_, key, err := a.Agents.Bootstrap(context.Background())
	require.NoError(t, err)
	if key == "" { // a second server over the same database
		_, key, err = a.Agents.CreateLocal(context.Background(), auth.CreateParams{Name: "admin2", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}})
		require.NoError(t, err)
	}
	e.admin = key
	return e
}

// agent makes an agent and returns its id and key.
func (e *env) agent(role string, perm auth.Permission, projects ...string) (id, key string) {
	e.t.Helper()
	a, key, err := e.app.Agents.CreateLocal(context.Background(), auth.CreateParams{Name: role + "-" + string(perm), Role: role, Permission: perm, Projects: projects})
	require.NoError(e.t, err)
	return a.ID, key
}

// api calls the REST API with a bearer key and decodes a JSON answer.
func (e *env) api(method, path, key string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(e.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

// must is api that requires the status.
func (e *env) must(status int, method, path, key string, body any) map[string]any {
	e.t.Helper()
	got, out := e.api(method, path, key, body)
	require.Equal(e.t, status, got, "%s %s: %v", method, path, out)
	return out
}

// world is the data the explorer tests look at.
type world struct {
	packet, task string
	// The keys of the agents: an admin, the planner the packet is for
	// (read-only), and an implementer the secret is hidden from.
	admin, planner, implementer string
	plannerID                   string
	implPacket                  string
}

// seed makes project acme with items (refunds in two versions, a secret
// hidden from implementers), a handoff reworked once, and packets.
func (e *env) seed() world {
	e.t.Helper()
	w := world{admin: e.admin, task: "T-1"}
	e.must(201, "PUT", "/v1/projects/acme", e.admin, map[string]any{"description": "the explorer's test project"})
	w.plannerID, w.planner = e.agent("planner", auth.ReadOnly, "acme")
	_, editor := e.agent("planner", auth.Edit, "acme")
	_, w.implementer = e.agent("implementer", auth.Edit, "acme")
	e.must(201, "PUT", "/v1/projects/acme/items/refunds", editor, map[string]any{"content": "Refunds take five days.\nAsk for the order number.", "title": "Refunds", "trigger": map[string]any{"always": true}})
	e.must(201, "PUT", "/v1/projects/acme/items/refunds", editor, map[string]any{"content": "Refunds take three days.\nAsk for the order number.", "title": "Refunds", "trigger": map[string]any{"always": true}})
	e.must(201, "PUT", "/v1/projects/acme/items/style", editor, map[string]any{"content": "Answer in plain English.", "kind": "instruction", "trigger": map[string]any{"always": true}})
	e.must(201, "PUT", "/v1/projects/acme/items/secret", e.admin, map[string]any{"content": "The launch is on Friday.", "title": "Launch date",
		"trigger": map[string]any{"always": true}, "roles": map[string]any{"hidden_from": []string{"implementer"}}})
	h1 := e.must(201, "POST", "/v1/projects/acme/handoffs", w.implementer, map[string]any{"task_id": w.task, "workflow_run_id": "run-1", "intent": "request_review",
		"target": map[string]any{"role": "planner", "permission": "read-only"}, "summary": "First patch", "base_commit": "abc123"})
	e.must(200, "POST", "/v1/projects/acme/handoffs/"+h1["id"].(string)+"/reject", editor, map[string]any{"reason": "needs tests"})
	e.must(201, "POST", "/v1/projects/acme/handoffs", w.implementer, map[string]any{"task_id": w.task, "workflow_run_id": "run-1", "intent": "request_review",
		"target": map[string]any{"role": "planner", "permission": "read-only"}, "summary": "Second patch, with tests", "base_commit": "abc123",
		"rework_of": h1["id"]})
	p := e.must(201, "POST", "/v1/projects/acme/packets", editor, map[string]any{"target_role": "planner", "query": "refunds", "task": map[string]any{"task_id": w.task}})
	w.packet = p["packet_id"].(string)
	ip := e.must(201, "POST", "/v1/projects/acme/packets", w.implementer, map[string]any{"target_role": "implementer", "query": "refunds"})
	w.implPacket = ip["packet_id"].(string)
	return w
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so a test sees them.
func (e *env) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	c := *e.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// page GETs a path and returns the status, the Location and the body.
func (e *env) page(c *http.Client, path string) (int, string, string) {
	e.t.Helper()
	res, err := c.Get(e.url + path)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(b)
}

// post sends a form.
func (e *env) post(c *http.Client, path string, form url.Values) (int, string, string) {
	e.t.Helper()
	res, err := c.Post(e.url+path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(b)
}

// csrfOf is the anti-forgery token of a page's first form.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	require.NotNil(t, m, "no csrf field in:\n%s", body)
	return m[1]
}

// signIn signs c in with key through the form, and returns the response
// of the form's POST.
func (e *env) signIn(c *http.Client, key string) *http.Response {
	e.t.Helper()
	status, _, body := e.page(c, "/ui/login")
	require.Equal(e.t, 200, status)
	form := url.Values{"key": {key}, "csrf": {csrfOf(e.t, body)}, "next": {"/ui"}}
	res, err := c.Post(e.url+"/ui/login", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	require.NoError(e.t, err)
	res.Body.Close()
	return res
}
