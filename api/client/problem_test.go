package client_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api/client"
)

// TestProblemTemporary: a problem is worth retrying when the server was
// busy or unavailable, or still runs the first request of an
// Idempotency-Key (409 with Retry-After), and not for any other conflict.
func TestProblemTemporary(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1", "key")
	require.NoError(t, err)
	answer := func(status int, retryAfter, code string) *client.Problem {
		h := http.Header{"Content-Type": {"application/problem+json"}}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		res := &http.Response{StatusCode: status, Header: h,
			Body: io.NopCloser(strings.NewReader(`{"status":` + strconv.Itoa(status) + `,"code":"` + code + `","detail":"d"}`))}
		var p *client.Problem
		require.ErrorAs(t, c.ReadAnswer(res, nil, nil), &p)
		return p
	}
	for _, tc := range []struct {
		status     int
		retryAfter string
		code       string
		temporary  bool
	}{
		{409, "1", "conflict", true},
		{409, "", "invalid_transition", false},
		{409, "", "conflict", false},
		{429, "2", "rate_limited", true},
		{503, "1", "unavailable", true},
		{422, "", "validation_failed", false},
		{404, "", "not_found", false},
	} {
		p := answer(tc.status, tc.retryAfter, tc.code)
		require.Equal(t, tc.temporary, p.Temporary(), "%d %s Retry-After %q", tc.status, tc.code, tc.retryAfter)
		require.Equal(t, tc.code, p.Code)
	}
}
