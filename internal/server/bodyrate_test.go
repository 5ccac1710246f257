package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// rateEnv is a server whose bodies must keep to rate bytes per second
// after grace (0: no minimum), with a read timeout of readTimeout: as
// serve runs it, over a TCP listener, through app.Config.HTTPServer.
func rateEnv(t *testing.T, rate int64, grace, readTimeout time.Duration) *env {
	t.Helper()
	pool := pgtest.New(t)
	return envOn(t, store.New(pool, 0), pool, server.Config{}, app.Config{ReadHeaderTimeout: time.Second, ReadTimeout: readTimeout,
		WriteTimeout: time.Minute, MinBodyRate: rate, MinBodyRateGrace: grace})
}

// paced is what the server answered a body sent chunk bytes at a time,
// one chunk every interval, and when: answered, when its answer came;
// closed, when the server closed the connection (0: it kept it open);
// close, whether the answer said Connection: close.
type paced struct {
	status           int
	header           http.Header
	problem          map[string]any
	close            bool
	answered, closed time.Duration
}

// sendPaced sends method path with body (and headers, name and value
// pairs) over a connection of its own, the first chunk at once and each
// next one interval later, until the body is sent or the server has
// answered.
func sendPaced(t *testing.T, e *env, method, path, key string, body []byte, chunk int, interval time.Duration, headers ...string) paced {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	auth := ""
	if key != "" {
		auth = "Authorization: Bearer " + key + "\r\n"
	}
	for i := 0; i+1 < len(headers); i += 2 {
		auth += headers[i] + ": " + headers[i+1] + "\r\n"
	}
	start := time.Now()
	_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", method, path, auth, len(body))
	require.NoError(t, err)
	done := make(chan paced, 1)
	go func() { done <- readPaced(conn, start) }()
	for sent := 0; sent < len(body); sent += chunk {
		if sent > 0 {
			select {
			case p := <-done:
				return p
			case <-time.After(interval):
			}
		}
		if _, err := conn.Write(body[sent:min(sent+chunk, len(body))]); err != nil {
			break // the server closed the connection
		}
	}
	return <-done
}

// readPaced reads the answer, and when it says Connection: close, waits
// for the server to close.
func readPaced(conn net.Conn, start time.Time) paced {
	var p paced
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	p.answered = time.Since(start)
	if err != nil {
		p.closed = p.answered
		return p
	}
	p.status, p.header, p.close = res.StatusCode, res.Header, res.Close
	_ = json.NewDecoder(res.Body).Decode(&p.problem)
	_, _ = io.Copy(io.Discard, res.Body)
	if res.Close {
		_, _ = io.Copy(io.Discard, br) // until the server closes (EOF or reset)
		p.closed = time.Since(start)
	}
	return p
}

// projectBody is a 300-byte body of PUT /v1/projects/{p}.
func projectBody() []byte {
	return []byte(`{"description":"` + strings.Repeat("x", 300-18) + `"}`)
}

// TestSlowBodyIsCutOff: a body trickled in well under --min-body-rate is
// answered 408 request_timeout (problem+json, Connection: close) soon after
// the grace period, and the connection is closed, long before the 30 s read
// timeout. Without a valid key the answer is 401, which needs no body, and
// the server stops waiting for the rest after the grace period too.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	e := rateEnv(t, 10<<10, 200*time.Millisecond, 30*time.Second)
	p := sendPaced(t, e, "PUT", "/v1/projects/trickle", e.admin, projectBody(), 5, 100*time.Millisecond)
	require.Equal(t, 408, p.status, "%v", p.problem)
	require.Equal(t, "application/problem+json", p.header.Get("Content-Type"))
	require.Equal(t, "request_timeout", p.problem["code"])
	require.Contains(t, p.problem["detail"], "slower than the minimum of 10240 bytes/s")
	require.True(t, p.close, "Connection: close")
	require.Less(t, p.answered, 3*time.Second)
	require.NotZero(t, p.closed, "the connection is closed")
	require.Less(t, p.closed, 5*time.Second)
	// An Idempotency-Key's body is read before the handler's: the same.
	p = sendPaced(t, e, "PUT", "/v1/projects/trickle", e.admin, projectBody(), 5, 100*time.Millisecond, "Idempotency-Key", "k-1")
	require.Equal(t, 408, p.status, "%v", p.problem)
	require.Equal(t, "request_timeout", p.problem["code"])
	require.True(t, p.close, "Connection: close")
	require.NotZero(t, p.closed, "the connection is closed")
	require.NotContains(t, e.do("GET", "/v1/projects", e.admin, nil).text, "trickle", "nothing was written")

	for _, key := range []string{"", "ctxd_not_a_key"} {
		p := sendPaced(t, e, "PUT", "/v1/projects/trickle", key, projectBody(), 5, 100*time.Millisecond)
		require.Equal(t, 401, p.status, "key %q: %v", key, p.problem)
		require.Equal(t, "unauthenticated", p.problem["code"])
		require.True(t, p.close, "key %q: Connection: close", key)
		require.NotZero(t, p.closed, "key %q: the connection is closed", key)
		require.Less(t, p.closed, 5*time.Second, "key %q", key)
	}
}

// TestBodyAtTheMinimumRatePasses: the rate is averaged, so a body sent in
// bursts at three times the minimum, for longer than the grace period,
// goes through; so does a 30 MiB batch from a fast client, read whole and
// judged (its kind is invalid, so nothing is tokenized or written: 422,
// not 408).
func TestBodyAtTheMinimumRatePasses(t *testing.T) {
	t.Parallel()
	e := rateEnv(t, 10<<10, 200*time.Millisecond, 30*time.Second)
	e.project("acme")
	body := []byte(`{"content":"` + strings.Repeat("paced words ", 2<<10) + `"}`) // 24 KiB
	p := sendPaced(t, e, "PUT", "/v1/projects/acme/items/paced", e.admin, body, 3<<10, 100*time.Millisecond)
	require.Equal(t, 201, p.status, "%v", p.problem)

	var items []map[string]any
	for i := range 30 {
		items = append(items, map[string]any{"key": fmt.Sprintf("big.%d", i), "kind": "nonsense", "content": strings.Repeat("word ", 1<<20/5)}) // 1 MiB
	}
	r := e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": items})
	require.Equal(t, 422, r.status, "%.300s", r.text)
	require.Equal(t, "validation_failed", r.json["code"])
}

// TestBodyRateKeepsTheReadTimeout: the earlier of both rules cuts a body.
// Without a minimum rate (0) a trickle is cut by --read-timeout alone, as
// before; with one whose grace outlasts the read timeout, the read
// timeout still cuts it. Either is 408, saying it was the read timeout.
func TestBodyRateKeepsTheReadTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		rate  int64
		grace time.Duration
	}{{"no minimum", 0, 0}, {"grace past the read timeout", 10 << 10, 10 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := rateEnv(t, c.rate, c.grace, 1500*time.Millisecond)
			p := sendPaced(t, e, "PUT", "/v1/projects/trickle", e.admin, projectBody(), 5, 100*time.Millisecond)
			require.Equal(t, 408, p.status, "%v", p.problem)
			require.Equal(t, "request_timeout", p.problem["code"])
			require.Contains(t, p.problem["detail"], "read timeout")
			require.GreaterOrEqual(t, p.answered, time.Second, "not cut before the read timeout")
			require.NotZero(t, p.closed, "the connection is closed")
			require.Less(t, p.closed, 8*time.Second)
		})
	}
}
