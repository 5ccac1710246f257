package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/mcp"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// world is a running server on a database of its own, with an admin key.
type world struct {
	t     *testing.T
	url   string
	app   *app.App
	admin string
}

func setup(t *testing.T) *world {
	t.Helper()
	a := app.New(store.New(pgtest.New(t), pgtest.AcquireTimeout))
	ts := httptest.NewServer(server.New(server.Config{App: a}))
	t.Cleanup(ts.Close)
	_, key, err := a.Agents.Bootstrap(context.Background())
	require.NoError(t, err)
	return &world{t: t, url: ts.URL, app: a, admin: key}
}

func (w *world) agent(role string, perm auth.Permission, projects ...string) string {
	w.t.Helper()
	_, key, err := w.app.Agents.CreateLocal(context.Background(), auth.CreateParams{Name: role + "-agent", Role: role, Permission: perm, Projects: projects})
	require.NoError(w.t, err)
	return key
}

// rest calls the REST API, for setting up and checking.
func (w *world) rest(method, path, key string, body any) (int, map[string]any) {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(w.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, w.url+path, rd)
	require.NoError(w.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

// bearer adds an agent key to every request, as an MCP host configured
// with an Authorization header does.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connect is an MCP session of the SDK's own client, over streamable HTTP.
func (w *world) connect(key string) *sdk.ClientSession {
	w.t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "contextd-test", Version: "1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}}, MaxRetries: -1}
	cs, err := client.Connect(context.Background(), tr, nil)
	require.NoError(w.t, err)
	w.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool and returns its structured content and whether it is
// a tool error; the text content is the same JSON.
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	out, ok := res.StructuredContent.(map[string]any)
	require.True(t, ok, "structured content of %s: %#v", name, res.StructuredContent)
	require.Len(t, res.Content, 1)
	var text map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &text))
	require.Equal(t, out, text)
	return out, res.IsError
}

// okCall is call for a call that must succeed.
func okCall(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	out, isErr := call(t, cs, name, args)
	require.False(t, isErr, "%s: %v", name, out)
	return out
}

// errCall is call for a call that must fail with code.
func errCall(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, status int, code string) map[string]any {
	t.Helper()
	out, isErr := call(t, cs, name, args)
	require.True(t, isErr, "%s: %v", name, out)
	require.Equal(t, code, out["code"], "%s: %v", name, out)
	require.EqualValues(t, status, out["status"], "%s: %v", name, out)
	require.NotEmpty(t, out["detail"])
	return out
}

// acme is a project with an item for everyone, one hidden from the
// implementer and one only the critic sees.
func acme(t *testing.T) *world {
	w := setup(t)
	status, body := w.rest("PUT", "/v1/projects/acme", w.admin, map[string]any{"description": "test"})
	require.Equal(t, 201, status, body)
	status, body = w.rest("POST", "/v1/projects/acme/items", w.admin, map[string]any{"items": []any{
		map[string]any{"key": "always.rule", "content": "Always cite the ticket."},
		map[string]any{"key": "refund.rules", "content": "Refunds over 500 EUR need a manager.", "trigger": map[string]any{"keywords": []string{"refund"}}},
		map[string]any{"key": "secret.notes", "content": "Rubric notes nobody implementing may read.", "roles": map[string]any{"hidden_from": []string{"implementer"}}},
		map[string]any{"key": "critic.rubric", "content": "Reject patches without tests.", "roles": map[string]any{"visible_to": []string{"critic"}}},
	}})
	require.Equal(t, 200, status, body)
	return w
}

func TestInitializeAndListTools(t *testing.T) {
	t.Parallel()
	w := acme(t)
	cs := w.connect(w.agent("implementer", auth.Edit, "acme"))
	init := cs.InitializeResult()
	require.Equal(t, "contextd", init.ServerInfo.Name)
	require.NotNil(t, init.Capabilities.Tools)
	require.NotNil(t, init.Capabilities.Resources)

	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	byName := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	for _, name := range []string{"assemble_packet", "why", "attribute", "put_item", "get_item", "search_items", "list_handoffs", "create_handoff", "accept_handoff", "reject_handoff", "task_history"} {
		require.Contains(t, byName, name)
	}
	require.Len(t, byName, len(mcp.Tools))
	// A tool inherits its operation's permission.
	perm := func(name string) any { return byName[name].Meta[mcp.MetaPermission] }
	require.Equal(t, "edit", perm("put_item"))
	require.Equal(t, "edit", perm("create_handoff"))
	require.Equal(t, "read", perm("assemble_packet"))
	require.Equal(t, "assemblePacket", byName["assemble_packet"].Meta[mcp.MetaOperation])
	require.True(t, byName["get_item"].Annotations.ReadOnlyHint)
	require.False(t, byName["put_item"].Annotations.ReadOnlyHint)

	tmpl, err := cs.ListResourceTemplates(context.Background(), nil)
	require.NoError(t, err)
	var uris []string
	for _, rt := range tmpl.ResourceTemplates {
		uris = append(uris, rt.URITemplate)
	}
	require.ElementsMatch(t, []string{mcp.PacketTemplate, mcp.ItemTemplate}, uris)
}

// TestAssembleAndAskWhy: an MCP client assembles a packet, asks why, finds
// where a sentence came from and reads the packet as a resource; the
// hidden item stays hidden on every path.
func TestAssembleAndAskWhy(t *testing.T) {
	t.Parallel()
	w := acme(t)
	cs := w.connect(w.agent("implementer", auth.Edit, "acme"))

	p := okCall(t, cs, "assemble_packet", map[string]any{
		"project": "acme", "target_role": "implementer",
		"task":    map[string]any{"task_id": "T-1", "step_id": "implement", "objective": "Fix the refund bug."},
		"history": []any{map[string]any{"role": "user", "author": "person", "content": "The refund for order 7 failed."}},
	})
	id, _ := p["packet_id"].(string)
	require.NotEmpty(t, id)
	rendered := p["rendered"].(string)
	require.Contains(t, rendered, "Always cite the ticket.")
	require.Contains(t, rendered, "Refunds over 500 EUR need a manager.")
	require.NotContains(t, rendered, "Rubric notes")
	require.NotContains(t, rendered, "Reject patches")

	why := okCall(t, cs, "why", map[string]any{"project": "acme", "id": id, "item": "refund.rules"})
	require.Equal(t, "included", why["decision"], why)
	require.NotEmpty(t, why["rule"])

	// The hidden item does not exist for the implementer: not in why, not
	// by key, not in a search, not as a resource.
	for _, key := range []string{"secret.notes", "critic.rubric"} {
		out := okCall(t, cs, "why", map[string]any{"project": "acme", "id": id, "item": key})
		require.Equal(t, "not_candidate", out["decision"], out)
		require.Equal(t, "did_not_exist", out["reason"], out)
		require.NotContains(t, mustJSON(t, out), "Rubric notes")
		errCall(t, cs, "get_item", map[string]any{"project": "acme", "key": key}, 404, "not_found")
		_, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "contextd://projects/acme/items/" + key})
		var werr *jsonrpc.Error
		require.ErrorAs(t, err, &werr)
		require.EqualValues(t, jsonrpc.CodeInvalidParams, werr.Code)
		require.Contains(t, string(werr.Data), `"not_found"`)
	}
	found := okCall(t, cs, "search_items", map[string]any{"project": "acme", "q": "rubric notes"})
	require.Empty(t, found["data"], found)
	found = okCall(t, cs, "search_items", map[string]any{"project": "acme", "q": "refund", "limit": 5})
	require.Len(t, found["data"], 1)

	at := okCall(t, cs, "attribute", map[string]any{"project": "acme", "id": id, "text": "Refunds over 500 EUR need a manager."})
	require.NotEmpty(t, at["matches"], at)

	// The packet's rendered text as a resource, and an item.
	rr, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "contextd://projects/acme/packets/" + id})
	require.NoError(t, err)
	require.Len(t, rr.Contents, 1)
	require.Equal(t, rendered, rr.Contents[0].Text)
	require.Equal(t, "text/markdown", rr.Contents[0].MIMEType)
	rr, err = cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "contextd://projects/acme/items/always.rule"})
	require.NoError(t, err)
	require.Contains(t, rr.Contents[0].Text, "Always cite the ticket.")

	// The same packet through REST: one implementation.
	status, rest := w.rest("GET", "/v1/projects/acme/packets/"+id, w.admin, nil)
	require.Equal(t, 200, status)
	require.Equal(t, rendered, rest["rendered"])
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestHandoffsAndWrites: writes and transitions over MCP are the REST
// operations': a read-only key cannot write, a handoff goes to its role.
func TestHandoffsAndWrites(t *testing.T) {
	t.Parallel()
	w := acme(t)
	impl := w.connect(w.agent("implementer", auth.Edit, "acme"))
	critic := w.connect(w.agent("critic", auth.ReadOnly, "acme"))

	item := okCall(t, impl, "put_item", map[string]any{"project": "acme", "key": "deploy.notes", "content": "Deploys freeze on Fridays.", "priority": 2})
	require.EqualValues(t, 1, item["version"])
	got := okCall(t, impl, "get_item", map[string]any{"project": "acme", "key": "deploy.notes"})
	require.Equal(t, "Deploys freeze on Fridays.", got["content"])

	// A read-only key cannot write, and nothing was written.
	errCall(t, critic, "put_item", map[string]any{"project": "acme", "key": "deploy.notes", "content": "No freeze."}, 403, "forbidden")
	errCall(t, critic, "create_handoff", map[string]any{"project": "acme", "task_id": "T-1", "target": map[string]any{"role": "implementer"}, "intent": "dispatch_fix"}, 403, "forbidden")
	status, body := w.rest("GET", "/v1/projects/acme/items/deploy.notes", w.admin, nil)
	require.Equal(t, 200, status)
	require.Equal(t, "Deploys freeze on Fridays.", body["content"])
	require.EqualValues(t, 1, body["version"])

	h := okCall(t, impl, "create_handoff", map[string]any{"project": "acme", "task_id": "T-1", "target": map[string]any{"role": "critic"}, "intent": "request_review", "summary": "Please review."})
	hid := h["id"].(string)
	require.Equal(t, "pending", h["status"])
	list := okCall(t, critic, "list_handoffs", map[string]any{"project": "acme", "task_id": "T-1"})
	require.Len(t, list["data"], 1)
	// Only the target role may answer it; reading is enough to.
	errCall(t, impl, "accept_handoff", map[string]any{"project": "acme", "id": hid}, 403, "forbidden")
	rej := okCall(t, critic, "reject_handoff", map[string]any{"project": "acme", "id": hid, "reason": "No tests."})
	require.Equal(t, "rejected", rej["status"])
	again := errCall(t, critic, "accept_handoff", map[string]any{"project": "acme", "id": hid}, 409, "invalid_transition")
	require.Equal(t, "rejected", again["current_status"])
	hist := okCall(t, impl, "task_history", map[string]any{"project": "acme", "task_id": "T-1"})
	require.NotEmpty(t, hist["entries"])
}

// TestToolErrors: a refused call is a tool error whose structured content
// carries the API's problem members.
func TestToolErrors(t *testing.T) {
	t.Parallel()
	w := acme(t)
	cs := w.connect(w.agent("implementer", auth.Edit, "acme"))

	out := errCall(t, cs, "assemble_packet", map[string]any{"project": "acme", "token_budget": -5}, 422, "validation_failed")
	require.Contains(t, pointers(out), "/target_role")
	out = errCall(t, cs, "put_item", map[string]any{"project": "acme", "key": "x", "content": "c", "priority": "high"}, 400, "malformed")
	require.Contains(t, pointers(out), "/priority")
	out = errCall(t, cs, "put_item", map[string]any{"project": "acme", "key": "x", "content": "c", "colour": "red"}, 400, "malformed")
	require.Contains(t, pointers(out), "/colour")
	// A required path parameter left out, an argument nothing takes.
	out = errCall(t, cs, "get_item", map[string]any{"project": "acme"}, 422, "validation_failed")
	require.Contains(t, pointers(out), "key")
	out = errCall(t, cs, "get_item", map[string]any{"project": "acme", "key": "always.rule", "colour": "red"}, 400, "malformed")
	require.Contains(t, pointers(out), "/colour")
	// Outside the agent's scope a project does not exist.
	errCall(t, cs, "search_items", map[string]any{"project": "globex"}, 404, "not_found")
	errCall(t, cs, "why", map[string]any{"project": "acme", "id": "pkt_nothing", "item": "x"}, 404, "not_found")
	errCall(t, cs, "search_items", map[string]any{"project": "acme", "limit": 0}, 422, "validation_failed")
}

// pointers are a problem's field errors, by pointer or parameter.
func pointers(p map[string]any) []string {
	var out []string
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		m, _ := e.(map[string]any)
		ptr, _ := m["pointer"].(string)
		if ptr == "" {
			ptr, _ = m["parameter"].(string)
		}
		require.NotEmpty(nil, m["code"])
		out = append(out, ptr)
	}
	return out
}

// TestKeyRequired: the MCP endpoint takes the API's keys and refuses
// without one, as problem+json.
func TestKeyRequired(t *testing.T) {
	t.Parallel()
	w := setup(t)
	initReq := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, key := range []string{"", "not-a-key", auth.NewKey()} {
		req, err := http.NewRequest("POST", w.url+"/mcp", strings.NewReader(initReq))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var p map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&p))
		res.Body.Close()
		require.Equal(t, 401, res.StatusCode)
		require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
		require.Equal(t, "unauthenticated", p["code"])
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "x", Version: "1"}, nil)
	_, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", MaxRetries: -1}, nil)
	require.Error(t, err)

	// A revoked key is refused at once, mid-session too.
	key := w.agent("implementer", auth.Edit, "*")
	cs := w.connect(key)
	_, err = cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	ag, err := w.app.Agents.Authenticate(context.Background(), key)
	require.NoError(t, err)
	status, _ := w.rest("DELETE", "/v1/agents/"+ag.ID, w.admin, nil)
	require.Equal(t, 200, status)
	_, err = cs.ListTools(context.Background(), nil)
	require.Error(t, err)
}
