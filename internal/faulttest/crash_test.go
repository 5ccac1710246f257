package faulttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
)

// TestCrashSafety kills the server with SIGKILL at random moments under
// concurrent writes and checks, after every restart, that every
// acknowledged write is there and intact (see the package documentation).
func TestCrashSafety(t *testing.T) {
	cycles := 20
	if testing.Short() {
		cycles = 3
	}
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("seed %d", seed)
	ctx := t.Context()
	began := time.Now()
	dbURL := pgtest.NewURL(t)
	const project = "crash"
	led := newLedger()
	seq := new(atomic.Int64)

	p := startProc(t, dbURL)
	key := p.key
	if key == "" {
		t.Fatal("the first start on an empty database printed no admin key")
	}
	c := newClient(p.url, key, 10*time.Second, nil)
	if a, err := c.do(ctx, http.MethodPut, "/v1/projects/"+project, map[string]any{"description": "crash safety"}); err != nil || !a.ok() {
		t.Fatalf("create project: %v %s", err, a)
	}
	var (
		logs    []*tail
		entries int64
		killed  []time.Duration
	)
	for cycle := 1; cycle <= cycles; cycle++ {
		delay := time.Duration(100+rnd.IntN(301)) * time.Millisecond
		l := &loader{c: c, project: project, led: led, seq: seq}
		loadCtx, stop := context.WithCancel(ctx)
		wait := l.run(loadCtx)
		time.Sleep(delay)
		p.kill()
		stop()
		wait()
		c.close()
		logs = append(logs, p.stderr)
		killed = append(killed, delay)

		p = startProc(t, dbURL)
		c = newClient(p.url, key, 10*time.Second, nil)
		l.c = c
		f := &findings{}
		entries = verifyCycle(ctx, t, l, dbURL, f)
		if !f.empty() {
			reportFindings(t, cycle, f, p.stderr)
		}
		t.Logf("cycle %d: SIGKILL %v after the load started; %d writes acknowledged so far, lost 0, audit ok (%d entries)",
			cycle, delay, led.writes(), entries)
	}
	logs = append(logs, p.stderr)
	stopGracefully(t, p)
	c.close()
	checkLogs(t, logs)
	led.mu.Lock()
	defer led.mu.Unlock()
	t.Logf("crash safety: %d cycles, %d SIGKILLs (after %v), %v in all", cycles, len(killed), killed, time.Since(began).Round(time.Millisecond))
	t.Logf("crash safety: %d requests, %d acknowledged, %d cut off by a kill, %d answered 503; "+
		"%d acknowledged writes (%d item versions, %d packets, %d handoffs, %d accepts/rejects); "+
		"%d unanswered idempotent writes retried after the restart (%d replayed, %d run again); lost=0; audit chain %d entries, ok",
		led.requests, led.acked, led.unanswered, led.unavailable,
		len(led.items)+len(led.packets)+len(led.handoffs)+led.settled, len(led.items), len(led.packets), len(led.handoffs), led.settled,
		led.replayed+led.redone, led.replayed, led.redone, entries)
}

// verifyCycle retries the unanswered idempotent writes, then runs every
// check, and returns the project chain's length.
func verifyCycle(ctx context.Context, t *testing.T, l *loader, dbURL string, f *findings) int64 {
	t.Helper()
	mark := time.Now()
	var took []string
	lap := func(what string) {
		took = append(took, fmt.Sprintf("%s %v", what, time.Since(mark).Round(time.Millisecond)))
		mark = time.Now()
	}
	defer func() { t.Logf("verify: %s", strings.Join(took, ", ")) }()
	for _, p := range l.retryAll(ctx, 15*time.Second) {
		f.bad("%s", p)
	}
	lap("retries")
	for _, u := range l.led.unexpectedAnswers() {
		f.bad("unexpected answer: %s", u)
	}
	checkAPI(ctx, l.c, l.led, l.project, f)
	lap("api")
	if err := checkSQL(ctx, dbURL, l.project, l.led, f); err != nil {
		t.Fatalf("SQL checks: %v", err)
	}
	lap("sql")
	n := checkAudit(ctx, l.c, l.project, f)
	lap("audit")
	return n
}

// reportFindings fails the test with what was found, the server's log
// last.
func reportFindings(t *testing.T, cycle int, f *findings, log *tail) {
	t.Helper()
	show := func(kind string, list []string) {
		for i, s := range list {
			if i == 20 {
				t.Errorf("cycle %d: ... and %d more %s", cycle, len(list)-20, kind)
				break
			}
			t.Errorf("cycle %d: %s: %s", cycle, kind, s)
		}
	}
	show("lost", f.lost)
	show("broken", f.other)
	t.Fatalf("cycle %d: lost=%d, other problems %d; server log:\n%s", cycle, len(f.lost), len(f.other), log)
}

// stopGracefully sends SIGTERM and expects a clean exit.
func stopGracefully(t *testing.T, p *proc) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("contextd exited with %v after SIGTERM\n%s", p.err, p.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("contextd still runs 20s after SIGTERM")
		p.kill()
	}
}

// checkLogs fails on a panic in any server's log and shows its ERROR lines.
func checkLogs(t *testing.T, logs []*tail) {
	t.Helper()
	var errs []string
	for _, l := range logs {
		errs = append(errs, l.errorLines()...)
	}
	for i, line := range errs {
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
			t.Errorf("server crashed by itself: %s", line)
		}
		if i < 10 {
			t.Logf("server log: %s", line)
		}
	}
	t.Logf("server logs: %d ERROR lines", len(errs))
}
