package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"
)

// Operation names, as the table and the JSON name them.
const (
	OpAssemble   = "assemble"
	OpFloor      = "floor"
	OpPutItem    = "put_item"
	OpWhy        = "why"
	OpInjections = "injections"
	OpHandoff    = "handoff"
)

// opOrder is the order of the table's rows.
var opOrder = []string{OpAssemble, OpFloor, OpPutItem, OpWhy, OpInjections, OpHandoff}

// series is the latencies of one operation's successful calls and the
// count of its failed ones.
type series struct {
	took   []time.Duration
	errors int
}

// recorder collects every call's outcome, shared by the workers.
type recorder struct {
	mu     sync.Mutex
	ops    map[string]*series
	errors []string // the first few error messages, for stderr
}

func newRecorder() *recorder { return &recorder{ops: map[string]*series{}} }

func (r *recorder) add(op string, took time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.ops[op]
	if s == nil {
		s = &series{}
		r.ops[op] = s
	}
	if err != nil {
		s.errors++
		if len(r.errors) < 10 {
			r.errors = append(r.errors, op+": "+err.Error())
		}
		return
	}
	s.took = append(s.took, took)
}

// counts is the number of calls (successful, failed) of each operation so far.
func (r *recorder) counts() map[string][2]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][2]int, len(r.ops))
	for op, s := range r.ops {
		out[op] = [2]int{len(s.took), s.errors}
	}
	return out
}

// OpStats is one operation's figures; the same members for every operation.
type OpStats struct {
	Ops     int     `json:"ops"`
	OpsPerS float64 `json:"ops_per_s"`
	P50     float64 `json:"p50_ms"`
	P95     float64 `json:"p95_ms"`
	P99     float64 `json:"p99_ms"`
	Errors  int     `json:"errors"`
}

// AssembleStats is contextd's assembly: OpStats, the mean number of records
// per stored packet and the mean size of the answer's body.
type AssembleStats struct {
	OpStats
	RecordsPerPacket float64 `json:"records_per_packet"`
	AnswerBytes      float64 `json:"answer_bytes"`
}

// Phase is one phase of the run: which system it loaded, when (seconds
// from the start of the load) and how many operations it completed.
type Phase struct {
	System string  `json:"system"` // contextd or floor
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	Ops    int     `json:"ops"`
	Errors int     `json:"errors"`
	// CPUProcessMS and CPUPostgresMS are the CPU this process and the
	// PostgreSQL cluster used during the phase (cpuMeter); absent when
	// not measured.
	CPUProcessMS  *float64 `json:"cpu_process_ms,omitempty"`
	CPUPostgresMS *float64 `json:"cpu_postgres_ms,omitempty"`
}

// Result is what a run measured. Floor and Ratio are null without --floor.
// Ratio is contextd's assembly ops/s over the floor's.
type Result struct {
	Assemble     AssembleStats `json:"assemble"`
	Floor        *OpStats      `json:"floor"`
	Ratio        *float64      `json:"ratio"`
	PutItem      OpStats       `json:"put_item"`
	Why          OpStats       `json:"why"`
	Injections   OpStats       `json:"injections"`
	Handoff      OpStats       `json:"handoff"`
	ServerRSSMiB float64       `json:"server_rss_mib"`
	Phases       []Phase       `json:"phases"`
	// CPU is each system's CPU per call of its phases ("contextd",
	// "floor"), when measured.
	CPU map[string]*CPUPerOp `json:"cpu_ms_per_op,omitempty"`
	// Analyzed says whether bench ran VACUUM (ANALYZE) after seeding, and
	// Statistics what the planner knew of the corpus when the load began
	// (StatsAnalyzed, StatsNone, StatsPresent or StatsUnknown).
	Analyzed   bool   `json:"analyzed"`
	Statistics string `json:"statistics"`
	// Mode is the result of a single-operation mode (--only ingest, put,
	// get, injections, outcomes); when set, it is the whole output.
	Mode *ModeResult `json:"-"`
	// Sweep is the result of --sweep; when set, it is the whole output.
	Sweep *SweepResult `json:"-"`
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// quantile is the q-quantile (nearest rank) of sorted durations, in ms.
func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return round(float64(sorted[i].Microseconds())/1000, 2)
}

// stats summarises op over wall, the time of the phases it ran in.
func (r *recorder) stats(op string, wall time.Duration) OpStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.ops[op]
	if s == nil {
		return OpStats{}
	}
	took := slices.Clone(s.took)
	slices.Sort(took)
	out := OpStats{Ops: len(took), Errors: s.errors,
		P50: quantile(took, 0.50), P95: quantile(took, 0.95), P99: quantile(took, 0.99)}
	if wall > 0 {
		out.OpsPerS = round(float64(len(took))/wall.Seconds(), 2)
	}
	return out
}

func (res *Result) byOp() map[string]*OpStats {
	return map[string]*OpStats{
		OpAssemble: &res.Assemble.OpStats, OpFloor: res.Floor, OpPutItem: &res.PutItem,
		OpWhy: &res.Why, OpInjections: &res.Injections, OpHandoff: &res.Handoff,
	}
}

// WriteJSON prints the result as one JSON object.
func (res *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	switch {
	case res.Mode != nil:
		return enc.Encode(res.Mode)
	case res.Sweep != nil:
		return enc.Encode(res.Sweep)
	}
	return enc.Encode(res)
}

// WriteTable prints one row per operation, then the ratio and the
// assembly's packet figures.
func (res *Result) WriteTable(w io.Writer) {
	switch {
	case res.Mode != nil:
		res.Mode.writeTable(w)
		return
	case res.Sweep != nil:
		res.Sweep.writeTable(w)
		return
	}
	fmt.Fprintf(w, "%-11s %8s %9s %9s %9s %9s %7s\n", "operation", "ops", "ops/s", "p50 ms", "p95 ms", "p99 ms", "errors")
	ops := res.byOp()
	for _, name := range opOrder {
		s := ops[name]
		if s == nil {
			continue
		}
		fmt.Fprintf(w, "%-11s %8d %9.1f %9.2f %9.2f %9.2f %7d\n", name, s.Ops, s.OpsPerS, s.P50, s.P95, s.P99, s.Errors)
	}
	if res.Ratio != nil {
		fmt.Fprintf(w, "ratio       %.3f  (contextd's assembly ops/s in its phases / the floor's in its phases)\n", *res.Ratio)
	}
	for _, system := range []string{"contextd", OpFloor} {
		if c := res.CPU[system]; c != nil {
			fmt.Fprintf(w, "cpu/call    %-8s %s\n", system, c)
		}
	}
	fmt.Fprintf(w, "packets     %.1f records each, answers of %.0f bytes\n", res.Assemble.RecordsPerPacket, res.Assemble.AnswerBytes)
	fmt.Fprintf(w, "statistics  %s\n", statsText(res.Statistics))
	if res.ServerRSSMiB > 0 {
		fmt.Fprintf(w, "server RSS  %.1f MiB\n", res.ServerRSSMiB)
	}
	for i, p := range res.Phases {
		fmt.Fprintf(w, "phase %d     %-8s %6.1fs .. %6.1fs  %d ops, %d errors\n", i+1, p.System, p.StartS, p.EndS, p.Ops, p.Errors)
	}
}
