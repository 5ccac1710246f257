package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// serveWith serves h as `contextd serve` does: an http.Server built by
// app.Config.HTTPServer with hc's timeouts.
func serveWith(t *testing.T, h http.Handler, hc app.Config) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config = hc.HTTPServer(h)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

// envOn is an env whose server runs on st, with cfg and the timeouts of hc.
func envOn(t *testing.T, st *store.Store, pool *pgxpool.Pool, cfg server.Config, hc app.Config) *env {
	t.Helper()
	a := app.New(st, app.WithKeys(testKeys))
	adoptChains(t, st)
	cfg.App = a
	url := serveWith(t, server.New(cfg), hc)
	_, key, err := a.Agents.Bootstrap(context.Background())
	require.NoError(t, err)
	return &env{t: t, url: url, pool: pool, agents: a.Agents, admin: key, app: a}
}

// A body trickled in a byte at a time is cut off by the read timeout: the
// connection does not stay open for as long as the client cares to
// trickle (here it would take 30 s).
func TestTrickledBodyIsCutOffByReadTimeout(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	e := envOn(t, store.New(pool, 0), pool, server.Config{}, app.Config{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: 10 * time.Second})
	addr := strings.TrimPrefix(e.url, "http://")
	const clients = 20
	start := time.Now()
	var wg sync.WaitGroup
	ended := make([]time.Duration, clients)
	for i := range clients {
		wg.Go(func() {
			ended[i] = trickle(t, addr, e.admin, start)
		})
	}
	wg.Wait()
	for i, d := range ended {
		require.Less(t, d, 10*time.Second, "connection %d stayed open while its body trickled in", i)
	}
}

// trickle sends a PUT whose 300-byte body comes a byte every 100 ms, and
// returns how long after start the server ended the connection (30 s
// and more if it waited for the whole body).
func trickle(t *testing.T, addr, key string, start time.Time) time.Duration {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return time.Hour
	}
	defer conn.Close()
	// Without a read timeout the trickle completes after 30 s and the
	// server closes (Connection: close); the deadline ends the test anyway.
	_ = conn.SetDeadline(time.Now().Add(45 * time.Second))
	body := `{"description":"` + strings.Repeat("x", 300-18) + `"}`
	fmt.Fprintf(conn, "PUT /v1/projects/trickle HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n", key, len(body))
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, conn) // until the server closes
	}()
	for i := range len(body) {
		select {
		case <-closed:
			return time.Since(start)
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{body[i]}); err != nil {
			<-closed
			return time.Since(start)
		}
	}
	<-closed
	return time.Since(start)
}

// An exhausted pool answers 503 unavailable, saying so, within the 1 s
// acquire timeout instead of queueing; /readyz says 503 too, and 200 again
// once connections are free.
func TestExhaustedPoolIsUnavailableFast(t *testing.T) {
	t.Parallel()
	pc, err := pgxpool.ParseConfig(pgtest.NewURL(t))
	require.NoError(t, err)
	pc.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(t.Context(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := envOn(t, store.New(pool, 0), pool, server.Config{}, app.Config{})
	e.project("acme")
	require.Equal(t, 200, e.do("GET", "/readyz", "", nil).status)

	var held []*pgxpool.Conn
	release := func() {
		for _, c := range held {
			c.Release()
		}
		held = nil
	}
	t.Cleanup(release)
	for range 2 {
		c, err := pool.Acquire(t.Context())
		require.NoError(t, err)
		held = append(held, c)
	}
	start := time.Now()
	r := e.do("GET", "/v1/projects/acme/items", e.admin, nil)
	took := time.Since(start)
	require.Equal(t, 503, r.status, r.text)
	require.Equal(t, "unavailable", r.json["code"])
	require.Contains(t, r.json["detail"], "pool exhausted")
	require.NotEmpty(t, r.header.Get("Retry-After"))
	require.Less(t, took, 2*time.Second)

	start = time.Now()
	r = e.do("GET", "/readyz", "", nil)
	took = time.Since(start)
	require.Equal(t, 503, r.status, r.text)
	require.Equal(t, "unavailable", r.json["code"])
	require.Contains(t, r.json["detail"], "pool exhausted")
	require.Less(t, took, 2*time.Second)

	release()
	require.Equal(t, 200, e.do("GET", "/readyz", "", nil).status)
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items", e.admin, nil).status)
}

// A statement ended by the statement timeout, and a lock not granted
// within the lock timeout, are 503 unavailable whose detail says which.
func TestDatabaseTimeoutsAreUnavailable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		cfg        store.Config
		wantDetail string
	}{
		{"statement timeout", store.Config{StatementTimeout: 300 * time.Millisecond, LockTimeout: -1}, "statement timeout"},
		{"lock timeout", store.Config{StatementTimeout: 20 * time.Second, LockTimeout: 300 * time.Millisecond}, "lock timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.cfg.URL = pgtest.NewURL(t)
			st, err := store.Open(t.Context(), c.cfg)
			require.NoError(t, err)
			t.Cleanup(st.Close)
			locker, err := pgxpool.New(t.Context(), c.cfg.URL)
			require.NoError(t, err)
			t.Cleanup(locker.Close)
			e := envOn(t, st, locker, server.Config{}, app.Config{})
			e.project("acme")
			require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/k", e.admin, api.PutItemJSONRequestBody{Content: "v1"}).status)

			// Another session holds the item tables: every read of them waits.
			tx, err := locker.Begin(t.Context())
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			_, err = tx.Exec(t.Context(), "LOCK TABLE items, item_versions IN ACCESS EXCLUSIVE MODE")
			require.NoError(t, err)

			r := e.do("GET", "/v1/projects/acme/items/k", e.admin, nil)
			require.Equal(t, 503, r.status, r.text)
			require.Equal(t, "unavailable", r.json["code"])
			require.Contains(t, r.json["detail"], c.wantDetail)
			require.NotEmpty(t, r.header.Get("Retry-After"))

			require.NoError(t, tx.Rollback(t.Context()))
			require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items/k", e.admin, nil).status)
		})
	}
}

// An agent over its rate gets 429 rate_limited with a Retry-After of
// whole seconds; another agent is not slowed by it.
func TestRateLimitPerAgent(t *testing.T) {
	t.Parallel()
	e := setupWith(t, server.Config{RateLimit: 0.5, RateBurst: 3})
	e.project("acme")
	busy := e.agent("planner", auth.Edit, "acme")
	calm := e.agent("critic", auth.ReadOnly, "acme")
	for i := range 3 {
		require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items", busy, nil).status, "request %d is within the burst", i)
	}
	r := e.do("GET", "/v1/projects/acme/items", busy, nil)
	require.Equal(t, 429, r.status, r.text)
	require.Equal(t, "rate_limited", r.json["code"])
	retry, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After is whole seconds: %q", r.header.Get("Retry-After"))
	require.GreaterOrEqual(t, retry, 1)
	require.LessOrEqual(t, retry, 2, "one token comes back in 2 s at 0.5/s")

	for i := range 3 {
		require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items", calm, nil).status, "another agent's request %d", i)
	}
	require.Equal(t, 429, e.do("GET", "/v1/projects/acme/items", busy, nil).status, "still over")
	require.Equal(t, 200, e.do("GET", "/healthz", "", nil).status, "unauthenticated routes have no agent to limit")
}

// streamLines opens the event stream of project acme and sends its every
// line; the channel is closed when the server ends the stream.
func streamLines(t *testing.T, base, key string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/projects/acme/handoffs/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, res.StatusCode)
	ch := make(chan string, 1000)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// waitLine waits up to d for a line with prefix, failing if the stream
// ends first.
func waitLine(t *testing.T, ch <-chan string, prefix string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-ch:
			require.True(t, ok, "the stream ended before a line %q", prefix)
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line %q within %s", prefix, d)
		}
	}
}

// An idle stream gets keep-alive comments, and outlives the server's write
// timeout (and its read timeout) by far: the stream lifts them for itself.
func TestStreamKeepAliveOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	e := envOn(t, store.New(pool, 0), pool, server.Config{KeepAlive: 100 * time.Millisecond},
		app.Config{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	e.project("acme")
	critic := e.agent("critic", auth.ReadOnly, "acme")
	implementer := e.agent("implementer", auth.Edit, "acme")
	ch := streamLines(t, e.url, critic)
	waitLine(t, ch, ": keep-alive", 2*time.Second)
	time.Sleep(1500 * time.Millisecond) // five write timeouts
	waitLine(t, ch, ": keep-alive", 2*time.Second)
	id := e.handoff(implementer, manifest("T-1", "critic"))
	data := waitLine(t, ch, "data: ", 5*time.Second)
	require.Contains(t, data, id)
}

// A stream ends within about a second of its key's revocation, made
// through another server on the same database: with that server's
// revocation heard (Watch running, as serve runs it) and without (the
// stream's server then looks the agent up every 500 ms).
func TestStreamEndsOnRevocationInAnotherServer(t *testing.T) {
	t.Parallel()
	for _, watching := range []bool{true, false} {
		t.Run(fmt.Sprintf("watching=%v", watching), func(t *testing.T) {
			t.Parallel()
			url := pgtest.NewURL(t)
			pools := [2]*pgxpool.Pool{}
			for i := range pools {
				p, err := pgxpool.New(t.Context(), url)
				require.NoError(t, err)
				t.Cleanup(p.Close)
				pools[i] = p
			}
			admin := envOn(t, store.New(pools[0], 0), pools[0], server.Config{}, app.Config{})
			streamer := envOn(t, store.New(pools[1], 0), pools[1], server.Config{KeepAlive: time.Hour}, app.Config{})
			if watching {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); streamer.agents.Watch(ctx) }()
				t.Cleanup(func() { cancel(); <-done })
			}
			admin.project("acme")
			critic, key, err := admin.agents.CreateLocal(context.Background(), auth.CreateParams{Name: "critic", Role: "critic", Permission: auth.ReadOnly, Projects: []string{"acme"}})
			require.NoError(t, err)
			ch := streamLines(t, streamer.url, key)
			waitLine(t, ch, ": contextd handoff events", 5*time.Second)
			time.Sleep(700 * time.Millisecond) // past the first check: the stream is established

			require.Equal(t, 200, admin.do("DELETE", "/v1/agents/"+critic.ID, admin.admin, nil).status)
			revoked := time.Now()
			took := waitEnd(t, ch, 10*time.Second, revoked)
			t.Logf("stream ended %s after the revocation", took)
			require.Less(t, took, 1500*time.Millisecond)
		})
	}
}

// waitEnd waits up to d for the server to end the stream, and returns how
// long after since it did.
func waitEnd(t *testing.T, ch <-chan string, d time.Duration, since time.Time) time.Duration {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return time.Since(since)
			}
		case <-deadline:
			t.Fatalf("the stream is still open %s later", d)
		}
	}
}
