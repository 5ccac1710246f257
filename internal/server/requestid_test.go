package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClientRequestIDIsBounded: a client's own X-Request-Id is kept when
// it is a short token, and replaced by the server's when it is too long or
// holds other characters (it is echoed in headers, answers and logs).
func TestClientRequestIDIsBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.do("GET", "/v1/projects/nope/items/x", e.admin, nil, "X-Request-Id", "client-rid.1")
	require.Equal(t, "client-rid.1", r.header.Get("X-Request-Id"))
	require.Equal(t, "client-rid.1", r.json["request_id"])
	for _, bad := range []string{strings.Repeat("a", 5000), `a"b<c>`} {
		r = e.do("GET", "/v1/projects/nope/items/x", e.admin, nil, "X-Request-Id", bad)
		got := r.header.Get("X-Request-Id")
		require.NotEqual(t, bad, got)
		require.NotEmpty(t, got)
		require.LessOrEqual(t, len(got), 128)
		require.Equal(t, got, r.json["request_id"])
	}
}
