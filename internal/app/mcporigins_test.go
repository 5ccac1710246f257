package app_test

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
)

// allows reports whether c lets a request with this Origin reach /mcp.
func allows(c *app.Config, origin string) bool {
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.Header.Set("Origin", origin)
	return c.MCPAllowedOrigins.Allows(r)
}

// No origin is allowed unless configured; a configured one is, from the
// flag, the environment or the file alike, and is listed by config check.
func TestMCPAllowedOrigins(t *testing.T) {
	c, err := parse(t)
	require.NoError(t, err)
	require.False(t, allows(c, "http://localhost:3000"), "none by default")

	c, err = parse(t, "--mcp-allowed-origins", "https://app.example.com,http://localhost:3000")
	require.NoError(t, err)
	require.True(t, allows(c, "https://app.example.com"))
	require.True(t, allows(c, "http://localhost:3000"))
	require.False(t, allows(c, "http://evil.example"))
	require.False(t, allows(c, "https://app.example.com:8443"), "exact: another port is another origin")
	var out bytes.Buffer
	require.NoError(t, c.WriteEffective(&out))
	require.Contains(t, out.String(), `mcp-allowed-origins: "[https://app.example.com,http://localhost:3000]" # flag`)

	t.Setenv("CONTEXTD_MCP_ALLOWED_ORIGINS", "https://env.example")
	c, err = parse(t)
	require.NoError(t, err)
	require.True(t, allows(c, "https://env.example"))

	file := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("mcp-allowed-origins: \"https://a.example, https://b.example\"\n"), 0o600))
	t.Setenv("CONTEXTD_MCP_ALLOWED_ORIGINS", "")
	c, err = parse(t, "--config", file)
	require.NoError(t, err)
	require.True(t, allows(c, "https://b.example"), "space after a comma is ignored")
}

// A value that is not scheme://host[:port] is refused at start, naming the
// setting, rather than matching no browser's Origin.
func TestMCPAllowedOriginsMalformed(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"https://app.example.com/", "https://app.example.com/mcp", "app.example.com", "*", "https://*.example.com",
		"https://user@app.example.com", "https://app.example.com?x=1", "https://app.example.com#top", "null",
		"https://app.example.com:port", "https://app.example.com:",
	} {
		_, err := parse(t, "--mcp-allowed-origins", bad)
		require.ErrorContains(t, err, "--mcp-allowed-origins:", bad)
	}
}
