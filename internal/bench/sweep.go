package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxSweepConcurrency is the most agents one level of --sweep may run: each
// is an agent row, an HTTP connection and a goroutine of this process, and
// beyond a few hundred the load generator measures itself.
const MaxSweepConcurrency = 256

// sweepFloorConns caps the floor's pool in a sweep: beyond it the floor's
// clients queue for a connection, as contextd's requests queue for its
// pool, instead of opening as many backends as there are agents (which
// would only contend on the same cores, and take connections the
// database's max_connections has to share with everything else).
const sweepFloorConns = 16

// SweepRow is one level of a sweep: contextd's assembly at Concurrency
// agents beside the floor's in the same alternating phases, and the peak
// resident memory of the server's process during the level.
type SweepRow struct {
	Concurrency int     `json:"concurrency"`
	Ops         int     `json:"ops"`
	OpsPerS     float64 `json:"ops_per_s"`
	P50         float64 `json:"p50_ms"`
	P95         float64 `json:"p95_ms"`
	P99         float64 `json:"p99_ms"`
	// P99OverP50 is the tail's spread (the issue asks ≤ 4).
	P99OverP50    float64 `json:"p99_over_p50"`
	Errors        int     `json:"errors"`
	FloorOpsPerS  float64 `json:"floor_ops_per_s"`
	FloorP50      float64 `json:"floor_p50_ms"`
	FloorP99      float64 `json:"floor_p99_ms"`
	FloorErrors   int     `json:"floor_errors"`
	Ratio         float64 `json:"ratio"`
	ServerRSSPeak float64 `json:"server_rss_peak_mib"`
}

// SweepResult is --sweep's output: one row per level, in the order asked.
type SweepResult struct {
	Statistics string     `json:"statistics"`
	Analyzed   bool       `json:"analyzed"`
	PhaseS     float64    `json:"phase_s"` // length of each phase
	Phases     int        `json:"phases"`  // phases per level (A B A B ...)
	FloorConns int        `json:"floor_conns"`
	Rows       []SweepRow `json:"rows"`
}

// ParseSweep reads --sweep's list of concurrencies ("1,8,32,64").
func ParseSweep(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--sweep takes a comma-separated list of agent counts such as 1,8,32,64; %q is not a number", f)
		}
		out = append(out, n)
	}
	return out, validateSweep(out)
}

// validateSweep checks each level is 1..MaxSweepConcurrency, once.
func validateSweep(levels []int) error {
	var errs []error
	for i, n := range levels {
		if n < 1 || n > MaxSweepConcurrency {
			errs = append(errs, fmt.Errorf("--sweep levels must be 1 to %d agents, not %d", MaxSweepConcurrency, n))
		}
		if slices.Contains(levels[:i], n) {
			errs = append(errs, fmt.Errorf("--sweep lists %d twice", n))
		}
	}
	return errors.Join(errs...)
}

func (cfg *Config) validateSweep() error {
	errs := []error{validateSweep(cfg.Sweep)}
	if cfg.Only != "" && cfg.Only != OpAssemble {
		errs = append(errs, fmt.Errorf("--sweep runs assembly alone (--only assemble), not --only %s", cfg.Only))
	}
	if cfg.DatabaseURL == "" {
		errs = append(errs, errors.New("--sweep measures a floor at each level: give --database-url with --url"))
	}
	if cfg.Phases < 4 || cfg.Phases%2 != 0 {
		errs = append(errs, fmt.Errorf("--phases must be even and at least 4 (A B A B), not %d", cfg.Phases))
	}
	return errors.Join(errs...)
}

// sweep runs the assembly workload at each level of cfg.Sweep, each for
// cfg.Duration in cfg.Phases alternating phases of contextd and the floor,
// on a corpus seeded (and settled) once.
func (r *runner) sweep(ctx context.Context) (*Result, error) {
	r.cfg.Only, r.cfg.Floor = OpAssemble, true
	most := slices.Max(r.cfg.Sweep)
	conns := min(most, sweepFloorConns)
	f, err := openFloor(ctx, r.cfg.DatabaseURL, conns, r.cfg.Budget)
	if err != nil {
		return nil, err
	}
	defer f.close()
	r.floor = f
	if err := r.settle(ctx, f.pool); err != nil {
		return nil, err
	}
	r.cfg.Concurrency = most
	if err := r.createAgents(ctx); err != nil {
		return nil, err
	}
	out := &SweepResult{Statistics: r.stats, Analyzed: r.stats == StatsAnalyzed, Phases: r.cfg.Phases, FloorConns: conns,
		PhaseS: round((r.cfg.Duration / time.Duration(r.cfg.Phases)).Seconds(), 3)}
	for _, n := range r.cfg.Sweep {
		row, err := r.sweepLevel(ctx, n)
		if err != nil {
			return nil, err
		}
		out.Rows = append(out.Rows, row)
	}
	return &Result{Sweep: out}, nil
}

// sweepLevel runs one level with a fresh recorder and returns its row.
func (r *runner) sweepLevel(ctx context.Context, n int) (SweepRow, error) {
	r.cfg.Concurrency, r.rec, r.label = n, newRecorder(), fmt.Sprintf("agents %d: ", n)
	peak := sampleRSS(r.cfg.RSS)
	_, walls, _, err := r.phased(ctx, r.cfg.Phases, true, r.work)
	rss := peak()
	if err != nil {
		return SweepRow{}, err
	}
	for _, e := range r.rec.errors {
		r.logf("agents %d: error: %s", n, e)
	}
	cs, fs := r.rec.stats(OpAssemble, walls["contextd"]), r.rec.stats(OpFloor, walls[OpFloor])
	row := SweepRow{Concurrency: n, Ops: cs.Ops, OpsPerS: cs.OpsPerS, P50: cs.P50, P95: cs.P95, P99: cs.P99, Errors: cs.Errors,
		FloorOpsPerS: fs.OpsPerS, FloorP50: fs.P50, FloorP99: fs.P99, FloorErrors: fs.Errors, ServerRSSPeak: round(rss, 1)}
	if cs.P50 > 0 {
		row.P99OverP50 = round(cs.P99/cs.P50, 2)
	}
	if fs.OpsPerS > 0 {
		row.Ratio = round(cs.OpsPerS/fs.OpsPerS, 3)
	}
	return row, nil
}

// sampleRSS reads rss every 100 ms until the returned function is called,
// which returns the largest reading (0 when rss is nil: the server's
// process is not known). Sampling works for any process rss reads; for
// this one, VmHWM would need a reset between levels (clear_refs), which a
// container may not allow.
func sampleRSS(rss func() float64) (peak func() float64) {
	if rss == nil {
		return func() float64 { return 0 }
	}
	var (
		mu   sync.Mutex
		most = rss()
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	read := func() {
		v := rss()
		mu.Lock()
		most = max(most, v)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() float64 {
		close(done)
		wg.Wait()
		read()
		return most
	}
}

// writeTable prints one row per level, then how the levels were run.
func (s *SweepResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "%6s %8s %9s %9s %9s %9s %7s %7s %11s %7s %9s\n",
		"agents", "ops", "ops/s", "p50 ms", "p95 ms", "p99 ms", "p99/p50", "errors", "floor ops/s", "ratio", "RSS MiB")
	for _, r := range s.Rows {
		fmt.Fprintf(w, "%6d %8d %9.1f %9.2f %9.2f %9.2f %7.2f %7d %11.1f %7.3f %9.1f\n",
			r.Concurrency, r.Ops, r.OpsPerS, r.P50, r.P95, r.P99, r.P99OverP50, r.Errors, r.FloorOpsPerS, r.Ratio, r.ServerRSSPeak)
	}
	fmt.Fprintf(w, "statistics  %s\n", statsText(s.Statistics))
	rss := "the server process's peak during the level (sampled every 100 ms)"
	if len(s.Rows) > 0 && s.Rows[0].ServerRSSPeak == 0 {
		rss = "not known for a server elsewhere (--url)"
	}
	fmt.Fprintf(w, "each level  %d phases of %.3gs, contextd and the floor in turn (the floor on %d connections at most)\n", s.Phases, s.PhaseS, s.FloorConns)
	fmt.Fprintf(w, "RSS         %s\n", rss)
}
