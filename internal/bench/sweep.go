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
	// CPU and FloorCPU are the CPU per packet of contextd's phases and of
	// the floor's (cpuMeter), when measured.
	CPU      *CPUPerOp `json:"cpu_ms_per_packet,omitempty"`
	FloorCPU *CPUPerOp `json:"floor_cpu_ms_per_packet,omitempty"`
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
	if cfg.Phases < 4 || cfg.Phases%4 != 0 {
		errs = append(errs, fmt.Errorf("with --sweep, --phases must be a multiple of 4 (each level runs half its phases going up the list, half coming back: A B, then A B), not %d", cfg.Phases))
	}
	return errors.Join(errs...)
}

// sweep runs the assembly workload at each level of cfg.Sweep, each for
// cfg.Duration in cfg.Phases alternating phases of contextd and the floor,
// on a corpus seeded (and settled) once. Each level runs half its phases
// going up the list and the other half coming back (1, 8, 64, 64, 8, 1):
// the machine and the database drift while a sweep runs (every packet is
// stored, so the tables grow), and in this order a drift that is steady
// over the sweep weighs the same on every level, where one pass in order
// handed all of it to the last levels.
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
	length := r.cfg.Duration / time.Duration(r.cfg.Phases)
	out := &SweepResult{Statistics: r.stats, Analyzed: r.stats == StatsAnalyzed, Phases: r.cfg.Phases, FloorConns: conns,
		PhaseS: round(length.Seconds(), 3)}
	levels := make([]*sweepLevel, len(r.cfg.Sweep))
	for i, n := range r.cfg.Sweep {
		levels[i] = &sweepLevel{n: n, rec: newRecorder(), walls: map[string]time.Duration{}}
	}
	half := r.cfg.Phases / 2
	for visit := range 2 * len(levels) {
		i := visit // up the list, then back
		if visit >= len(levels) {
			i = 2*len(levels) - 1 - visit
		}
		l := levels[i]
		plan := phasePlan{first: half * (visit / len(levels)), n: half, of: r.cfg.Phases, length: length, alternate: true}
		if err := r.visit(ctx, l, plan); err != nil {
			return nil, err
		}
	}
	for _, l := range levels {
		out.Rows = append(out.Rows, r.sweepRow(l))
	}
	return &Result{Sweep: out}, nil
}

// sweepLevel is what a level's visits gathered.
type sweepLevel struct {
	n      int
	rec    *recorder
	walls  map[string]time.Duration
	phases []Phase
	rss    float64 // the server's peak resident memory over the visits, MiB
}

// visit runs plan's phases of level l, recording into l.
func (r *runner) visit(ctx context.Context, l *sweepLevel, plan phasePlan) error {
	r.cfg.Concurrency, r.rec, r.label = l.n, l.rec, fmt.Sprintf("agents %d: ", l.n)
	peak := sampleRSS(r.cfg.RSS)
	phases, walls, _, err := r.phasesOf(ctx, plan, r.work)
	l.rss = max(l.rss, peak())
	l.phases = append(l.phases, phases...)
	for system, w := range walls {
		l.walls[system] += w
	}
	return err
}

// sweepRow is level l's row, over both of its visits.
func (r *runner) sweepRow(l *sweepLevel) SweepRow {
	for _, e := range l.rec.errors {
		r.logf("agents %d: error: %s", l.n, e)
	}
	cs, fs := l.rec.stats(OpAssemble, l.walls["contextd"]), l.rec.stats(OpFloor, l.walls[OpFloor])
	row := SweepRow{Concurrency: l.n, Ops: cs.Ops, OpsPerS: cs.OpsPerS, P50: cs.P50, P95: cs.P95, P99: cs.P99, Errors: cs.Errors,
		FloorOpsPerS: fs.OpsPerS, FloorP50: fs.P50, FloorP99: fs.P99, FloorErrors: fs.Errors, ServerRSSPeak: round(l.rss, 1),
		CPU: cpuPerOp(l.phases, "contextd"), FloorCPU: cpuPerOp(l.phases, OpFloor)}
	if cs.P50 > 0 {
		row.P99OverP50 = round(cs.P99/cs.P50, 2)
	}
	if fs.OpsPerS > 0 {
		row.Ratio = round(cs.OpsPerS/fs.OpsPerS, 3)
	}
	return row
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
	for _, r := range s.Rows {
		if r.CPU != nil || r.FloorCPU != nil {
			fmt.Fprintf(w, "cpu/packet  agents %d: contextd %s; floor %s\n", r.Concurrency, r.CPU, r.FloorCPU)
		}
	}
	fmt.Fprintf(w, "statistics  %s\n", statsText(s.Statistics))
	rss := "the server process's peak during the level (sampled every 100 ms)"
	if len(s.Rows) > 0 && s.Rows[0].ServerRSSPeak == 0 {
		rss = "not known for a server elsewhere (--url)"
	}
	fmt.Fprintf(w, "each level  %d phases of %.3gs, contextd and the floor in turn (the floor on %d connections at most), half going up the list of levels and half coming back\n", s.Phases, s.PhaseS, s.FloorConns)
	fmt.Fprintf(w, "RSS         %s\n", rss)
}
