package mcp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/mcp"
)

// rawMessage sends one raw body to /mcp as an MCP client would, and returns the
// status, the Content-Type and the body.
func (w *world) rawMessage(body string) (int, string, []byte) {
	w.t.Helper()
	req, err := http.NewRequest("POST", w.url+"/mcp", strings.NewReader(body))
	require.NoError(w.t, err)
	req.Header.Set("Authorization", "Bearer "+w.admin)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), raw
}

// TestProtocolErrorsAreJSONRPC: a message the endpoint cannot take is
// answered as JSON-RPC, not text: 400 application/json with the error
// object, -32700 for a body that is not JSON, -32600 for a message that
// is not JSON-RPC 2.0 (or lacks what its method needs), -32601 for a
// method the server does not serve, with the message's id when it has one.
// A good message is still served.
func TestProtocolErrorsAreJSONRPC(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, tc := range []struct {
		name, body string
		code       int
		id         any
		message    string
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":1,`, mcp.CodeParseError, nil, "Parse error"},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"tools/dance","params":{}}`, mcp.CodeMethodNotFound, 7.0, "tools/dance"},
		{"unknown method, string id", `{"jsonrpc":"2.0","id":"a-1","method":"nope"}`, mcp.CodeMethodNotFound, "a-1", "nope"},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/dance"}`, mcp.CodeMethodNotFound, nil, "notifications/dance"},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"tools/list"}`, mcp.CodeInvalidRequest, 3.0, `"2.0"`},
		{"no version", `{"id":4,"method":"tools/list"}`, mcp.CodeInvalidRequest, 4.0, `"2.0"`},
		{"call without params", `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`, mcp.CodeInvalidRequest, 5.0, "params"},
		{"not an object", `42`, mcp.CodeInvalidRequest, nil, "Invalid Request"},
	} {
		status, ctype, raw := w.rawMessage(tc.body)
		require.Equal(t, 400, status, "%s: %s", tc.name, raw)
		require.Equal(t, "application/json", ctype, "%s: %s", tc.name, raw)
		var out struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(raw, &out), "%s: %s", tc.name, raw)
		require.Equal(t, "2.0", out.JSONRPC, tc.name)
		require.Equal(t, tc.code, out.Error.Code, "%s: %s", tc.name, raw)
		require.Contains(t, out.Error.Message, tc.message, tc.name)
		var id any
		require.NoError(t, json.Unmarshal(out.ID, &id), "%s: the id member is there: %s", tc.name, raw)
		require.Equal(t, tc.id, id, tc.name)
	}
	status, ctype, raw := w.rawMessage(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "application/json", ctype)
	require.Contains(t, string(raw), `"result"`)
}
