package ui_test

import (
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

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/testhttp"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a whole server (API and explorer) on a database of its own, with
// an admin key: a testhttp.Server, with its store and pool.
type env struct {
	t     *testing.T
	srv   *httptest.Server
	http  *testhttp.Server
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
	s := testhttp.Start(t, store.New(pool, pgtest.AcquireTimeout), testhttp.Options{TLS: tls})
	return &env{t: t, srv: s.TS, http: s, url: s.URL, app: s.App, st: s.Store, pool: pool, admin: s.Admin}
}

// agent makes an agent and returns its id and key.
func (e *env) agent(role string, perm auth.Permission, projects ...string) (id, key string) {
	e.t.Helper()
	a, key := e.http.Agent(role+"-"+string(perm), role, perm, projects...)
	return a.ID, key
}

// must calls the REST API with a bearer key and a typed body (nil for
// none), requires the status and decodes the JSON answer.
func (e *env) must(status int, method, path, key string, body any) map[string]any {
	e.t.Helper()
	return e.http.Must(status, method, path, key, body)
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
	e.must(201, "PUT", "/v1/projects/acme", e.admin, api.PutProjectJSONRequestBody{Description: ptr("the explorer's test project")})
	w.plannerID, w.planner = e.agent("planner", auth.ReadOnly, "acme")
	_, editor := e.agent("planner", auth.Edit, "acme")
	_, w.implementer = e.agent("implementer", auth.Edit, "acme")
	always := &api.Trigger{Always: ptr(true)}
	e.must(201, "PUT", "/v1/projects/acme/items/refunds", editor, api.PutItemJSONRequestBody{Content: "Refunds take five days.\nAsk for the order number.", Title: ptr("Refunds"), Trigger: always})
	e.must(201, "PUT", "/v1/projects/acme/items/refunds", editor, api.PutItemJSONRequestBody{Content: "Refunds take three days.\nAsk for the order number.", Title: ptr("Refunds"), Trigger: always})
	e.must(201, "PUT", "/v1/projects/acme/items/style", editor, api.PutItemJSONRequestBody{Content: "Answer in plain English.", Kind: ptr("instruction"), Trigger: always})
	e.must(201, "PUT", "/v1/projects/acme/items/secret", e.admin, api.PutItemJSONRequestBody{Content: "The launch is on Friday.", Title: ptr("Launch date"),
		Trigger: always, Roles: &api.Roles{HiddenFrom: &[]string{"implementer"}}})
	review := func(summary string, reworkOf *string) api.HandoffCreate {
		return api.HandoffCreate{TaskId: w.task, WorkflowRunId: ptr("run-1"), Intent: "request_review",
			Target: api.HandoffTarget{Role: ptr("planner"), Permission: ptr("read-only")}, Summary: ptr(summary), BaseCommit: ptr("abc123"), ReworkOf: reworkOf}
	}
	h1 := e.must(201, "POST", "/v1/projects/acme/handoffs", w.implementer, review("First patch", nil))
	e.must(200, "POST", "/v1/projects/acme/handoffs/"+h1["id"].(string)+"/reject", editor, api.RejectHandoffJSONRequestBody{Reason: ptr("needs tests")})
	e.must(201, "POST", "/v1/projects/acme/handoffs", w.implementer, review("Second patch, with tests", ptr(h1["id"].(string))))
	p := e.must(201, "POST", "/v1/projects/acme/packets", editor, api.AssemblePacketJSONRequestBody{TargetRole: "planner", Query: ptr("refunds"), Task: &taskRef{TaskId: ptr(w.task)}})
	w.packet = p["packet_id"].(string)
	ip := e.must(201, "POST", "/v1/projects/acme/packets", w.implementer, api.AssemblePacketJSONRequestBody{TargetRole: "implementer", Query: ptr("refunds")})
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

// ptr is a pointer to v, for the optional members of the api types.
func ptr[T any](v T) *T { return &v }

// taskRef is a packet request's task (an anonymous struct in api).
type taskRef = struct {
	AllowedOutcomes   *[]string `json:"allowed_outcomes,omitempty"`
	Objective         *string   `json:"objective,omitempty"`
	PermissionCeiling *string   `json:"permission_ceiling,omitempty"`
	StepAttempt       *int      `json:"step_attempt,omitempty"`
	StepId            *string   `json:"step_id,omitempty"`
	TaskId            *string   `json:"task_id,omitempty"`
}
