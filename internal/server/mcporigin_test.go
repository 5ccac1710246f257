package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/mcp"
	"github.com/contextd/contextd/internal/server"
)

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestMCPOriginCheckedFirst: /mcp refuses a foreign Origin with 403
// origin_not_allowed before authentication (a valid key, a wrong one or
// none get the same answer) and serves an allowed one or none; the REST
// API's routes are not the MCP endpoint's and are left alone.
func TestMCPOriginCheckedFirst(t *testing.T) {
	t.Parallel()
	allowed, err := mcp.ParseOrigins([]string{"https://app.example.com"})
	require.NoError(t, err)
	e := setupWith(t, server.Config{MCPAllowedOrigins: allowed})
	accept := "application/json, text/event-stream"
	for _, key := range []string{e.admin, "ctxd_wrong", ""} {
		r := e.do("POST", "/mcp", key, mcpInitialize, "Origin", "http://evil.example", "Accept", accept)
		require.Equal(t, 403, r.status, r.text)
		require.Equal(t, "origin_not_allowed", r.json["code"])
		require.Contains(t, r.json["detail"], "http://evil.example")
	}
	for _, origin := range []string{"https://app.example.com", ""} {
		var hdr []string
		if origin != "" {
			hdr = []string{"Origin", origin}
		}
		r := e.do("POST", "/mcp", e.admin, mcpInitialize, append(hdr, "Accept", accept)...)
		require.Equal(t, 200, r.status, r.text)
	}
	r := e.do("GET", "/v1/projects", e.admin, nil, "Origin", "http://evil.example")
	require.Equal(t, 200, r.status, r.text)
}
