package mcp_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// rpc posts one JSON-RPC message to /mcp with a key and headers, and
// returns the answer's request id header and body.
func (w *world) rpc(key string, msg map[string]any, headers ...string) (string, map[string]any) {
	w.t.Helper()
	b, err := json.Marshal(msg)
	require.NoError(w.t, err)
	req, err := http.NewRequest("POST", w.url+"/mcp", bytes.NewReader(b))
	require.NoError(w.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	require.NoError(w.t, json.Unmarshal(raw, &out), string(raw))
	return res.Header.Get("X-Request-Id"), out
}

// TestToolErrorCarriesTheRequestID: a tool call's problem names the /mcp
// request's own id, so a caller can find its log lines; resources are
// the caller's alone to cache.
func TestToolErrorCarriesTheRequestID(t *testing.T) {
	t.Parallel()
	w := setup(t)
	code, _ := w.rest("PUT", "/v1/projects/acme", w.admin, map[string]any{})
	require.Equal(t, 201, code)
	reader := w.agent("reader", auth.ReadOnly, "acme")
	w.rpc(reader, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	rid, out := w.rpc(reader, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{
		"name": "put_item", "arguments": map[string]any{"project": "acme", "key": "k", "content": "x"}}}, "X-Request-Id", "outer-rid-1")
	require.Equal(t, "outer-rid-1", rid)
	result := out["result"].(map[string]any)
	require.Equal(t, true, result["isError"])
	sc := result["structuredContent"].(map[string]any)
	require.Equal(t, "forbidden", sc["code"])
	require.Equal(t, "outer-rid-1", sc["request_id"], "the problem names the /mcp request")

	_, read := w.rpc(w.admin, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "resources/templates/list", "params": map[string]any{}})
	raw, _ := json.Marshal(read)
	require.False(t, strings.Contains(string(raw), `"cacheScope":"public"`), "%s", raw)
	require.Contains(t, string(raw), `"cacheScope":"private"`)
}
