package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/mcp"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

func origins(t *testing.T, list ...string) mcp.Origins {
	t.Helper()
	o, err := mcp.ParseOrigins(list)
	require.NoError(t, err)
	return o
}

func withOrigin(values ...string) *http.Request {
	r := httptest.NewRequest("POST", "/mcp", nil)
	for _, v := range values {
		r.Header.Add("Origin", v)
	}
	return r
}

// Allows: no Origin passes; an Origin passes only when listed, exactly
// (scheme and host in any case, a default port as browsers leave it out).
func TestOriginsAllows(t *testing.T) {
	t.Parallel()
	o := origins(t, "https://App.Example.com:443", "http://localhost:3000", " vscode-webview://abc ")
	require.True(t, o.Allows(withOrigin()), "not a browser")
	for _, ok := range []string{"https://app.example.com", "HTTPS://APP.EXAMPLE.COM", "http://localhost:3000", "vscode-webview://abc"} {
		require.True(t, o.Allows(withOrigin(ok)), ok)
	}
	for _, no := range []string{"http://evil.example", "http://app.example.com", "https://app.example.com:8443", "http://localhost",
		"http://localhost:3001", "null", "", "https://app.example.com/"} {
		require.False(t, o.Allows(withOrigin(no)), no)
	}
	require.False(t, o.Allows(withOrigin("https://app.example.com", "http://evil.example")), "a repeated Origin")
	require.False(t, mcp.Origins{}.Allows(withOrigin("http://localhost:3000")), "none by default")
}

// ParseOrigins refuses what is not scheme://host[:port].
func TestParseOriginsRefusesNonOrigins(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"https://app.example.com/", "app.example.com", "*", "https://*.example.com", "null",
		"https://u:p@app.example.com", "https://app.example.com?x", "https://app.example.com#x", "https://app.example.com:x"} {
		_, err := mcp.ParseOrigins([]string{"https://fine.example", bad})
		require.ErrorContains(t, err, "is not an origin", bad)
	}
	o, err := mcp.ParseOrigins([]string{"", " "})
	require.NoError(t, err, "empty entries are ignored")
	require.False(t, o.Allows(withOrigin("")))
}

// originWorld is a server whose /mcp allows one origin.
func originWorld(t *testing.T) *world {
	t.Helper()
	a := app.New(store.New(pgtest.New(t), pgtest.AcquireTimeout))
	ts := httptest.NewServer(server.New(server.Config{App: a, MCPAllowedOrigins: origins(t, "https://app.example.com")}))
	t.Cleanup(ts.Close)
	_, key, err := a.Agents.Bootstrap(context.Background())
	require.NoError(t, err)
	return &world{t: t, url: ts.URL, app: a, admin: key}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// post sends a JSON-RPC message to /mcp as a browser would, with origin
// ("" for none) and key ("" for none).
func (w *world) post(method, origin, key string) (*http.Response, map[string]any) {
	w.t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(initialize)
	}
	req, err := http.NewRequest(method, w.url+"/mcp", body)
	require.NoError(w.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(w.t, err)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res, out
}

// A foreign Origin is refused before the key is looked at, on every
// method: 403 problem+json origin_not_allowed, with a valid key, an
// invalid one or none, so a foreign page learns nothing.
func TestMCPRefusesForeignOrigin(t *testing.T) {
	t.Parallel()
	w := originWorld(t)
	for _, method := range []string{"POST", "GET", "DELETE", "OPTIONS"} {
		for _, key := range []string{w.admin, "ctxd_not_a_key", ""} {
			res, p := w.post(method, "http://evil.example", key)
			require.Equal(t, 403, res.StatusCode, "%s key=%q: %v", method, key, p)
			require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
			require.Equal(t, "origin_not_allowed", p["code"])
			require.Equal(t, float64(403), p["status"])
			require.NotEmpty(t, p["request_id"])
			require.Empty(t, res.Header.Get("WWW-Authenticate"), "nothing about the key")
		}
	}
}

// Without Origin (an MCP host, not a browser) and with an allowed one,
// /mcp answers as before; the key is still required.
func TestMCPAllowsNoOriginAndAllowedOrigin(t *testing.T) {
	t.Parallel()
	w := originWorld(t)
	for _, origin := range []string{"", "https://app.example.com"} {
		res, out := w.post("POST", origin, w.admin)
		require.Equal(t, 200, res.StatusCode, "origin %q: %v", origin, out)
		require.NotNil(t, out["result"], "an initialize answer: %v", out)
		res, p := w.post("POST", origin, "")
		require.Equal(t, 401, res.StatusCode)
		require.Equal(t, "unauthenticated", p["code"])
	}
}

// The default server allows no origin at all, and no Origin as before.
func TestMCPDefaultAllowsNoOrigin(t *testing.T) {
	t.Parallel()
	w := setup(t)
	res, p := w.post("POST", "http://localhost:3000", w.admin)
	require.Equal(t, 403, res.StatusCode)
	require.Equal(t, "origin_not_allowed", p["code"])
	res, _ = w.post("POST", "", w.admin)
	require.Equal(t, 200, res.StatusCode)
}

// create_handoff supersedes by the same right as the REST API: another
// source's pending handoff is a tool error with the 409 conflict naming it.
func TestMCPCreateHandoffSupersedesOnlyByRight(t *testing.T) {
	t.Parallel()
	w := setup(t)
	code, _ := w.rest("PUT", "/v1/projects/acme", w.admin, map[string]any{"description": "t"})
	require.Equal(t, 201, code)
	impl := w.agent("implementer", auth.Edit, "acme")
	planner := w.agent("planner", auth.Edit, "acme")
	args := map[string]any{"project": "acme", "task_id": "T-1", "intent": "request_review", "target": map[string]any{"role": "critic"}, "summary": "s"}
	first := okCall(t, w.connect(impl), "create_handoff", args)
	out, isErr := call(t, w.connect(planner), "create_handoff", args)
	require.True(t, isErr)
	require.Equal(t, float64(409), out["status"])
	require.Equal(t, "conflict", out["code"])
	require.Contains(t, out["detail"], first["id"])
	code, h := w.rest("GET", "/v1/projects/acme/handoffs/"+first["id"].(string), impl, nil)
	require.Equal(t, 200, code)
	require.Equal(t, "pending", h["status"])
	second := okCall(t, w.connect(impl), "create_handoff", args)
	_, h = w.rest("GET", "/v1/projects/acme/handoffs/"+first["id"].(string), impl, nil)
	require.Equal(t, "superseded", h["status"])
	require.Equal(t, second["id"], h["superseded_by"])
}
