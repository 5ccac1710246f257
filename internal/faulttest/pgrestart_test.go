package faulttest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/pgcluster"
)

// Bounds of the outage test. answerBound is how long any request may take
// to be answered while PostgreSQL is down or in crash recovery (the pool's
// acquire timeout is 1s, /readyz's ping 2s); recoveryBound how long after
// PostgreSQL accepts connections again /readyz may still say 503.
const (
	answerBound   = 3 * time.Second
	recoveryBound = 10 * time.Second
	outage        = 4 * time.Second
)

// TestPostgresRestart stops PostgreSQL (immediate mode) under load and
// starts it again on the same port (see the package documentation).
func TestPostgresRestart(t *testing.T) {
	ctx := t.Context()
	began := time.Now()
	pg := startPrivateCluster(t)
	dbURL := pg.cl.URL(pgcluster.DefaultDatabase)
	p := startProc(t, dbURL)
	obs := &observer{}
	c := newClient(p.url, p.key, 20*time.Second, obs)
	const project = "outage"
	if a, err := c.do(ctx, http.MethodPut, "/v1/projects/"+project, map[string]any{"description": "outage"}); err != nil || !a.ok() {
		t.Fatalf("create project: %v %s", err, a)
	}
	led := newLedger()
	l := &loader{c: c, project: project, led: led, seq: new(atomic.Int64), pause: 250 * time.Millisecond}
	loadCtx, stopLoad := context.WithCancel(ctx)
	wait := l.run(loadCtx)
	probes := make(chan struct{})
	go func() {
		defer close(probes)
		for loadCtx.Err() == nil {
			_, _ = c.do(loadCtx, http.MethodGet, "/readyz", nil)
			time.Sleep(100 * time.Millisecond)
		}
	}()

	time.Sleep(1500 * time.Millisecond)
	var ph phases
	ph.stopping = time.Now()
	pg.stopImmediate(t)
	ph.down = time.Now()
	time.Sleep(outage)
	ph.starting = time.Now()
	pg.start(t)
	ph.up = time.Now()
	ph.ready = waitReady(t, c, ph.up.Add(recoveryBound+20*time.Second))
	time.Sleep(time.Second) // requests under way at the recovery end
	awaitWrites(t, led, 30, 30*time.Second)
	stopLoad()
	wait()
	<-probes

	stats := analyzeOutage(t, obs.outcomes(), ph)
	f := &findings{}
	checking := time.Now()
	entries := verifyCycle(ctx, t, l, dbURL, f)
	t.Logf("postgres restart: retries and checks took %v", time.Since(checking).Round(time.Millisecond))
	if !f.empty() {
		reportFindings(t, 1, f, p.stderr)
	}
	checkLogs(t, []*tail{p.stderr})
	t.Logf("postgres restart: stop -m immediate took %v, outage %v, start (crash recovery) %v; /readyz 200 %v after PostgreSQL was back",
		ph.down.Sub(ph.stopping).Round(time.Millisecond), ph.starting.Sub(ph.down).Round(time.Millisecond),
		ph.up.Sub(ph.starting).Round(time.Millisecond), ph.ready.Sub(ph.up).Round(time.Millisecond))
	t.Logf("postgres restart: during the outage %d requests, all 503 unavailable (%d of them /readyz), slowest %v, median %v; "+
		"slowest started before PostgreSQL was back %v (bound %v); %d requests after recovery, all 2xx",
		stats.during, stats.readyz, stats.slowest.Round(time.Millisecond), stats.median.Round(time.Millisecond),
		stats.slowestOut.Round(time.Millisecond), answerBound, stats.after)
	led.mu.Lock()
	defer led.mu.Unlock()
	t.Logf("postgres restart: %d requests, %d acknowledged, %d answered 503; %d acknowledged writes; %d unanswered idempotent writes retried (%d replayed, %d run again); lost=0; audit chain %d entries, ok; %v in all",
		led.requests, led.acked, led.unavailable, len(led.items)+len(led.packets)+len(led.handoffs)+led.settled,
		led.replayed+led.redone, led.replayed, led.redone, entries, time.Since(began).Round(time.Millisecond))
}

// phases are the moments of the outage: the stop was asked for, PostgreSQL
// was gone, the start was asked for, PostgreSQL accepted connections, and
// /readyz first answered 200 again.
type phases struct {
	stopping, down, starting, up, ready time.Time
}

type outageStats struct {
	during, readyz, after int
	slowest, median       time.Duration // of the requests answered while PostgreSQL was down
	slowestOut            time.Duration // of those started before it accepted connections again
}

// analyzeOutage holds every request to the promises: never 500 nor any
// answer but 2xx or 503 unavailable, never unanswered; while PostgreSQL is
// down, every request and /readyz answers 503 within answerBound; once
// /readyz is 200 again (plus a second for requests already under way),
// every request succeeds.
func analyzeOutage(t *testing.T, all []outcome, ph phases) outageStats {
	t.Helper()
	var (
		st    outageStats
		times []time.Duration
		bad   []string
	)
	for _, o := range all {
		end := o.start.Add(o.took)
		desc := fmt.Sprintf("%s %s at %+v after the stop, took %v", o.method, o.path, o.start.Sub(ph.stopping).Round(time.Millisecond), o.took.Round(time.Millisecond))
		switch {
		case o.err != nil && errors.Is(o.err, context.Canceled) && o.took < answerBound:
			continue // the load ended
		case o.err != nil:
			bad = append(bad, desc+": no answer: "+o.err.Error())
			continue
		case !o.a.ok() && (o.a.status != 503 || o.a.code() != "unavailable"):
			bad = append(bad, desc+": "+o.a.String())
			continue
		}
		if !o.start.Before(ph.down) && end.Before(ph.starting) {
			st.during++
			times = append(times, o.took)
			if o.path == "/readyz" {
				st.readyz++
			}
			if o.a.ok() {
				bad = append(bad, desc+": answered "+o.a.String()+" while PostgreSQL was down")
			}
			if o.path != "/readyz" && o.a.header.Get("Retry-After") == "" {
				bad = append(bad, desc+": 503 without Retry-After")
			}
		}
		if !o.start.Before(ph.down) && o.start.Before(ph.up) {
			st.slowestOut = max(st.slowestOut, o.took)
			if o.took > answerBound {
				bad = append(bad, desc+fmt.Sprintf(": slower than %v while PostgreSQL was down or recovering", answerBound))
			}
		}
		if o.start.After(ph.ready.Add(time.Second)) && o.path != "/readyz" {
			if !o.a.ok() {
				bad = append(bad, desc+": failed after recovery: "+o.a.String())
			}
			st.after++
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	if len(times) > 0 {
		st.slowest, st.median = times[len(times)-1], times[len(times)/2]
	}
	for i, b := range bad {
		if i == 30 {
			t.Errorf("... and %d more", len(bad)-30)
			break
		}
		t.Errorf("%s", b)
	}
	if st.readyz == 0 || st.during == st.readyz || st.after == 0 {
		t.Errorf("the load did not cover the outage: %d requests during it (%d /readyz), %d writes after recovery", st.during, st.readyz, st.after)
	}
	return st
}

// awaitWrites keeps the load on until n more writes are acknowledged: the
// recovered service must do work, however slow a shared machine is.
func awaitWrites(t *testing.T, led *ledger, n int, within time.Duration) {
	t.Helper()
	led.mu.Lock()
	from := led.acked
	led.mu.Unlock()
	deadline := time.Now().Add(within)
	for {
		led.mu.Lock()
		done := led.acked - from
		led.mu.Unlock()
		if done >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("only %d writes acknowledged in the %v after recovery", done, within)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitReady polls /readyz until it answers 200 and returns when it did.
func waitReady(t *testing.T, c *client, deadline time.Time) time.Time {
	t.Helper()
	for {
		a, err := c.do(t.Context(), http.MethodGet, "/readyz", nil)
		if err == nil && a.status == 200 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 by the deadline: %v %s", err, a)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// privatePG is a cluster of pgcluster's that the test stops and starts
// with pg_ctl itself: pgcluster.Start would pick a new port, and the
// server under test must find PostgreSQL where it was.
type privatePG struct {
	cl     *pgcluster.Cluster
	binDir string
	pgdata string
	sock   string
}

func startPrivateCluster(t *testing.T) *privatePG {
	t.Helper()
	binDir, err := pgcluster.FindBinaries("")
	if err != nil {
		t.Fatalf("this test needs PostgreSQL server binaries: %v", err)
	}
	// t.TempDir makes 0700 directories, which the postgres user (the
	// server runs as postgres when the tests run as root) cannot enter.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cl, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(dir, "data"), Logf: t.Logf})
	if err != nil {
		t.Fatalf("start private cluster: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cl.Stop(ctx); err != nil {
			t.Errorf("stop private cluster: %v", err)
		}
	})
	pg := &privatePG{cl: cl, binDir: binDir, pgdata: filepath.Join(cl.DataDir(), "pgdata")}
	conn, err := pgx.Connect(ctx, cl.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, "SHOW unix_socket_directories").Scan(&pg.sock); err != nil {
		t.Fatal(err)
	}
	return pg
}

// pgctl runs pg_ctl, as the postgres user when the test runs as root.
func (pg *privatePG) pgctl(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	argv := append([]string{filepath.Join(pg.binDir, "pg_ctl")}, args...)
	if os.Geteuid() == 0 {
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Fatalf("running as root, and no runuser to run pg_ctl as postgres: %v", err)
		}
		argv = append([]string{runuser, "-u", "postgres", "--"}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = pg.cl.DataDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (pg *privatePG) stopImmediate(t *testing.T) {
	t.Helper()
	pg.pgctl(t, "stop", "-D", pg.pgdata, "-m", "immediate", "-w", "-t", "60")
}

// start starts the cluster again on its port; it runs crash recovery.
func (pg *privatePG) start(t *testing.T) {
	t.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='%s'", pg.cl.Port(), pg.sock)
	pg.pgctl(t, "start", "-D", pg.pgdata, "-l", filepath.Join(pg.cl.DataDir(), "postgres.log"), "-w", "-t", "60", "-o", opts)
}
