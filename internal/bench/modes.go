package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The single-operation modes of --only. Each measures one contextd
// operation and, in the same run and on the same database, a floor: what a
// minimal pgx program needs for the same work, so contextd's figure can be
// read against a lower bound instead of in the abstract. ModeOutcomes is
// the exception: it measures the operations of outcomes (outcomes.go)
// against the latency targets, without a floor.
const (
	ModeIngest     = "ingest"
	ModePut        = "put"
	ModeGet        = "get"
	ModeInjections = "injections"
	ModeOutcomes   = "outcomes"
)

// The operations the modes record (a floor's is the operation's name with
// "_floor" appended).
const (
	OpIngest         = "ingest"
	OpPut            = "put"
	OpGet            = "get"
	OpInjectionsHot  = "injections_hot"
	OpInjectionsCold = "injections_cold"
)

func floorOp(op string) string { return op + "_floor" }

// isMode reports whether only names one of the single-operation modes.
func isMode(only string) bool {
	return slices.Contains([]string{ModeIngest, ModePut, ModeGet, ModeInjections, ModeOutcomes}, only)
}

// ModeResult is what a single-operation mode measured: contextd's figure
// beside the floor's, both taken in this run. For put and get, Contextd and
// Floor are the operation's stats and Ratio contextd's ops/s over the
// floor's; for ingest, Ingest holds versions/s and Ratio is contextd's
// median versions/s over the floor's; for injections, Injections holds the
// latencies of hot and cold items (Ratio is null: it compares latencies);
// for outcomes, Outcomes holds each operation's figures (no floor).
type ModeResult struct {
	Mode         string            `json:"mode"`
	Concurrency  int               `json:"concurrency"`
	Contextd     *OpStats          `json:"contextd,omitempty"`
	Floor        *OpStats          `json:"floor,omitempty"`
	Ratio        *float64          `json:"ratio"`
	Ingest       *IngestReport     `json:"ingest,omitempty"`
	Injections   *InjectionsReport `json:"injections,omitempty"`
	Outcomes     *OutcomesReport   `json:"outcomes,omitempty"`
	ServerRSSMiB float64           `json:"server_rss_mib"`
	Phases       []Phase           `json:"phases"`
	// CPU is as in Result: each system's CPU per call of its phases.
	CPU map[string]*CPUPerOp `json:"cpu_ms_per_op,omitempty"`
	// Analyzed and Statistics are as in Result: whether bench analysed
	// the database, and what the planner knew when the load began.
	Analyzed   bool   `json:"analyzed"`
	Statistics string `json:"statistics"`
	// Note says how the floor was taken where the reader must know it
	// (what it left in the database, what it dropped).
	Note string `json:"note,omitempty"`
}

// runMode runs one of the single-operation modes. Every mode's floor needs
// the database, which validate has checked (outcomes, without a floor,
// uses it only to analyse the corpus).
func runMode(ctx context.Context, cfg Config) (*Result, error) {
	r := newRunner(&cfg)
	defer r.reportMade()
	r.cpu = openCPUMeter(ctx, cfg.DatabaseURL, cfg.RSS != nil)
	defer r.cpu.close()
	var (
		m   *ModeResult
		err error
	)
	switch cfg.Only {
	case ModeIngest:
		m, err = r.runIngest(ctx)
	case ModePut:
		m, err = r.runPut(ctx)
	case ModeGet:
		m, err = r.runGet(ctx)
	case ModeOutcomes:
		m, err = r.runOutcomes(ctx)
	default:
		m, err = r.runInjections(ctx)
	}
	if err != nil {
		return nil, err
	}
	m.Mode, m.Concurrency = cfg.Only, cfg.Concurrency
	m.Analyzed, m.Statistics = r.stats == StatsAnalyzed, r.stats
	if cfg.RSS != nil {
		m.ServerRSSMiB = round(cfg.RSS(), 1)
	}
	for _, e := range r.rec.errors {
		r.logf("error: %s", e)
	}
	return &Result{Mode: m}, nil
}

// openPool opens a pool of conns connections with the given run-time
// parameters, every connection at once, so that the first phase does not
// pay for connecting.
func openPool(ctx context.Context, dbURL string, conns int, params map[string]string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("floor: database url: %w", err)
	}
	pc.MaxConns = int32(max(conns, 1))
	for k, v := range params {
		pc.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("floor: connect: %w", err)
	}
	held := make([]*pgxpool.Conn, 0, pc.MaxConns)
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range pc.MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("floor: connect: %w", err)
		}
		held = append(held, c)
	}
	return pool, nil
}

// phasedMode runs a mode's alternating phases (contextd, floor, ...) with
// one goroutine per --concurrency, each calling step until the phase's
// deadline, and summarises op and its floor.
func (r *runner) phasedMode(ctx context.Context, op string, step stepFunc) (*ModeResult, error) {
	r.progressOps = []string{op, floorOp(op)}
	phases, walls, _, err := r.phased(ctx, r.cfg.Phases, true, step)
	if err != nil {
		return nil, err
	}
	return r.compare(op, phases, walls), nil
}

// compare is the ModeResult of op against its floor: each over the wall
// time of its own phases.
func (r *runner) compare(op string, phases []Phase, walls map[string]time.Duration) *ModeResult {
	cs := r.rec.stats(op, walls["contextd"])
	fs := r.rec.stats(floorOp(op), walls[OpFloor])
	m := &ModeResult{Contextd: &cs, Floor: &fs, Phases: phases, CPU: cpuOf(phases)}
	if cs.OpsPerS > 0 && fs.OpsPerS > 0 {
		ratio := round(cs.OpsPerS/fs.OpsPerS, 3)
		m.Ratio = &ratio
	}
	return m
}

// createProject creates (or describes) a project through the API, as any
// client would.
func (r *runner) createProject(ctx context.Context, project, description string) error {
	if err := r.claim(ctx, project); err != nil {
		return err
	}
	body := map[string]string{"description": description}
	if err := r.c.call(ctx, "PUT", "/v1/projects/"+project, r.cfg.AdminKey, body, nil); err != nil {
		return fmt.Errorf("create project %s: %w", project, err)
	}
	return nil
}

// sized returns it with content of exactly size bytes of corpus text (a
// template keeps its placeholder prefix when it fits).
func (c *Corpus) sized(it Item, size int, rng *rand.Rand) Item {
	if it.Template {
		const prefix = "In {{project}}: "
		if size > len(prefix)+8 {
			it.Content = prefix + c.Text(rng, size-len(prefix))
			return it
		}
		it.Template = false
	}
	it.Content = c.Text(rng, size)
	return it
}

func (cfg *Config) validateMode() error {
	var errs []error
	if cfg.DatabaseURL == "" && cfg.Only != ModeOutcomes {
		errs = append(errs, fmt.Errorf("--only %s measures a floor on the database: give --database-url with --url", cfg.Only))
	}
	if cfg.Phases < 4 || cfg.Phases%2 != 0 {
		errs = append(errs, fmt.Errorf("--phases must be even and at least 4 (A B A B), not %d", cfg.Phases))
	}
	if cfg.IngestItems < 1 || cfg.IngestItems > MaxBatch {
		errs = append(errs, fmt.Errorf("--ingest-items must be 1 to %d (one batch), not %d", MaxBatch, cfg.IngestItems))
	}
	if cfg.IngestSize < 16 {
		errs = append(errs, fmt.Errorf("--ingest-size must be at least 16 bytes, not %d", cfg.IngestSize))
	}
	if cfg.PutFloor != PutFloorInsert && cfg.PutFloor != PutFloorWrite {
		errs = append(errs, fmt.Errorf("--put-floor must be %s or %s, not %q", PutFloorInsert, PutFloorWrite, cfg.PutFloor))
	}
	if cfg.Records < 100 {
		errs = append(errs, fmt.Errorf("--records must be at least 100, not %d", cfg.Records))
	}
	if cfg.Only == ModeOutcomes && cfg.OutcomePackets < 1 {
		errs = append(errs, fmt.Errorf("--outcome-packets must be positive, not %d", cfg.OutcomePackets))
	}
	return errors.Join(errs...)
}

// writeModeTable prints a mode's result: the operation and its floor, the
// ratio, the mode's own figures, the server's RSS and the phases.
func (m *ModeResult) writeTable(w io.Writer) {
	switch {
	case m.Ingest != nil:
		m.Ingest.writeTable(w)
	case m.Injections != nil:
		m.Injections.writeTable(w)
	case m.Outcomes != nil:
		m.Outcomes.writeTable(w)
	default:
		fmt.Fprintf(w, "%-14s %8s %9s %9s %9s %9s %7s\n", "operation", "ops", "ops/s", "p50 ms", "p95 ms", "p99 ms", "errors")
		writeStatsRow(w, m.Mode, m.Contextd)
		writeStatsRow(w, m.Mode+" floor", m.Floor)
	}
	if m.Ratio != nil {
		what := fmt.Sprintf("ops/s / the floor's, %d clients", m.Concurrency)
		if m.Ingest != nil {
			what = "median versions/s / the floor's, one batch at a time"
		}
		fmt.Fprintf(w, "ratio          %.3f  (contextd's %s)\n", *m.Ratio, what)
	}
	for _, system := range []string{"contextd", OpFloor} {
		if c := m.CPU[system]; c != nil {
			fmt.Fprintf(w, "cpu/call       %-8s %s\n", system, c)
		}
	}
	if m.Note != "" {
		fmt.Fprintf(w, "note           %s\n", m.Note)
	}
	fmt.Fprintf(w, "statistics     %s\n", statsText(m.Statistics))
	if m.ServerRSSMiB > 0 {
		fmt.Fprintf(w, "server RSS     %.1f MiB\n", m.ServerRSSMiB)
	}
	for i, p := range m.Phases {
		fmt.Fprintf(w, "phase %-8d %-8s %6.1fs .. %6.1fs  %d ops, %d errors\n", i+1, p.System, p.StartS, p.EndS, p.Ops, p.Errors)
	}
}

func writeStatsRow(w io.Writer, name string, s *OpStats) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "%-14s %8d %9.1f %9.2f %9.2f %9.2f %7d\n", strings.ReplaceAll(name, "_", " "), s.Ops, s.OpsPerS, s.P50, s.P95, s.P99, s.Errors)
}
