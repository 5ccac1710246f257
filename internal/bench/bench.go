// Package bench is `contextd bench`: it seeds a realistic corpus through the
// HTTP API, runs a mixed workload of agents against one or more contextd
// processes, and, with a floor, runs in alternating phases a minimal pgx
// program that does only what an ideal assembly cannot avoid on the same
// corpus and database, so contextd's assembly throughput can be read as a
// ratio of that lower bound. Its single-operation modes (--only ingest,
// put, get, injections; modes.go) each measure one operation beside a floor
// of its own taken in the same run; --only outcomes measures the outcome
// write and the suspects read (outcomes.go).
//
// The package talks to contextd only through the contract
// (api/openapi.yaml); the floors, and the seeding of --only injections'
// records (far too many for the API), talk to PostgreSQL with SQL of their
// own, written for them, and never through internal/store.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one run's parameters. Start from Defaults: Run takes every
// value as given (0 shared items means none, 0 always means no always-on
// items), and only fills Progress.
type Config struct {
	// URLs are the contextd processes to load (requests round-robin) and
	// AdminKey an admin agent's key on them.
	URLs     []string
	AdminKey string
	// DatabaseURL is the database behind URLs: required for the floor; when
	// set, the database is also vacuumed and analysed after seeding (unless
	// NoAnalyze).
	DatabaseURL string
	// NoAnalyze leaves the database as seeding left it, without VACUUM or
	// ANALYZE, for contextd and the floor alike: what a user sees in the
	// first minute after an import (autovacuum not yet run, or off).
	NoAnalyze bool
	// Dedicated says the servers and their database are the bench's
	// alone (it started them, or its user says so). Only then does it
	// write _shared, whose items every project's packets read: on a
	// server of others, its corpus lives in its own projects alone.
	Dedicated bool

	Projects int     // bench projects bench-0..N-1
	Items    int     // items per project
	Shared   int     // items in _shared; more than 0 only when Dedicated
	Always   float64 // fraction of always-on items
	Seed     uint64  // the corpus's and the workload's random seed
	Reuse    bool    // skip seeding when the same corpus is complete already

	Concurrency int           // agents running at once
	Duration    time.Duration // the whole load, every phase
	Only        string        // "" or "mixed": the mixed workload; "assemble": assembly alone; or a mode (ingest, put, get, injections, outcomes)
	Floor       bool          // alternate contextd and the floor in phases (the modes always do)
	Sweep       []int         // assembly alone at each of these concurrencies, each beside its floor for Duration (sweep.go)
	Phases      int           // with Floor: the number of phases, even, at least 4
	Budget      int           // packets' token budget
	// RolePolicy sets a policy per role in each bench project (policy.go)
	// and leaves token_budget out of the requests: every packet takes its
	// role's policy.
	RolePolicy bool

	IngestItems int    // --only ingest: items per batch (one round); at most MaxBatch
	IngestSize  int    // --only ingest and put: content bytes of each item written
	PutFloor    string // --only put: the floor, PutFloorInsert (default) or PutFloorWrite
	Records     int64  // --only injections: records in packet_records to seed
	// OutcomePackets is --only outcomes' packets to assemble before the
	// load (at least 4 per agent), outcomes on half of them.
	OutcomePackets int

	// Progress receives the progress bar and lines (stderr; nil: none).
	Progress io.Writer
	// RSS returns the server's resident set in MiB at the end of the load;
	// nil when the server's process is not known (server_rss_mib is 0).
	RSS func() float64
	// CPUProfile, when set, receives a pprof CPU profile of this process
	// taken during the load.
	CPUProfile io.Writer
}

// Defaults is the command line's configuration: 2 projects of 10,000
// items, 1,000 in _shared, 20% always-on, seed 1, 8 agents for 30 s, 4
// phases with a floor, a 16,000-token budget; for the modes, batches of
// 10,000 items of 500 bytes, 1,000,000 packet records and 320 packets for
// outcomes.
func Defaults() Config {
	return Config{Projects: 2, Items: 10000, Shared: 1000, Always: 0.2, Seed: 1,
		Concurrency: 8, Duration: 30 * time.Second, Phases: 4, Budget: 16000,
		IngestItems: MaxBatch, IngestSize: 500, PutFloor: PutFloorInsert, Records: 1000000, OutcomePackets: 320}
}

func (cfg *Config) validate() error {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	var errs []error
	if len(cfg.URLs) == 0 || cfg.AdminKey == "" {
		errs = append(errs, errors.New("a contextd URL and an admin key are required"))
	}
	if cfg.Projects < 1 || cfg.Items < 1 || cfg.Concurrency < 1 || cfg.Budget < 1 || cfg.Duration <= 0 {
		errs = append(errs, errors.New("--projects, --items, --concurrency, --duration and the budget must be positive"))
	}
	if cfg.Shared < 0 {
		errs = append(errs, fmt.Errorf("--shared must not be negative, not %d", cfg.Shared))
	}
	if seeds := !isMode(cfg.Only) || cfg.Only == ModeGet || cfg.Only == ModeOutcomes; seeds && cfg.Shared > 0 && !cfg.Dedicated {
		errs = append(errs, fmt.Errorf("--shared %d would write items into _shared, which the packets of every project on the server read: "+
			"bench writes _shared only on a server of its own (without --url, or with --dedicated)", cfg.Shared))
	}
	if cfg.Always < 0 || cfg.Always > 1 {
		errs = append(errs, fmt.Errorf("--always must be a fraction between 0 and 1, not %g", cfg.Always))
	}
	switch {
	case cfg.Only == "", cfg.Only == "mixed", cfg.Only == OpAssemble:
	case isMode(cfg.Only):
		errs = append(errs, cfg.validateMode())
	default:
		errs = append(errs, fmt.Errorf("--only must be assemble, ingest, put, get, injections or outcomes (or mixed, the default), not %q", cfg.Only))
	}
	if len(cfg.Sweep) > 0 {
		errs = append(errs, cfg.validateSweep())
	} else if cfg.Floor && !isMode(cfg.Only) {
		if cfg.DatabaseURL == "" {
			errs = append(errs, errors.New("--floor needs the database: give --database-url with --url"))
		}
		if cfg.Phases < 4 || cfg.Phases%2 != 0 {
			errs = append(errs, fmt.Errorf("--phases must be even and at least 4 (A B A B), not %d", cfg.Phases))
		}
	}
	return errors.Join(errs...)
}

// agent is an agent the workload created, with its key.
type agent struct{ id, key, role string }

// runner is one run's state.
type runner struct {
	cfg      *Config
	c        *client
	corpus   *Corpus
	layers   []layer // the bench projects, then _shared
	projects []string
	runID    string
	rec      *recorder
	workers  []*worker
	accept   map[string]agent // an agent of each role, to accept handoffs
	floor    *floor
	cpu      *cpuMeter // nil: no phase is priced in CPU
	// stats is what the planner knew when the load began (settle.go).
	stats string
	// label is put before the progress line's phase (a sweep's level).
	label string
	// progressOps are the operations the progress line shows, with their
	// rates; nil: the mixed workload's.
	progressOps []string
	// claimed are the projects the run may write in (claim), and
	// agentsMade the agents it made: what it reports at its end.
	claimed    []string
	agentsMade int

	answers, answerBytes, renderedBytes atomic.Int64
	samples                             reservoir
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, "bench: "+format+"\n", args...)
}

// Run seeds (or reuses) the corpus, runs the load and returns what it
// measured.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if isMode(cfg.Only) {
		return runMode(ctx, cfg)
	}
	r := newRunner(&cfg)
	defer r.reportMade()
	r.setLayers()
	if err := r.seed(ctx); err != nil {
		return nil, err
	}
	r.cpu = openCPUMeter(ctx, cfg.DatabaseURL, cfg.RSS != nil)
	defer r.cpu.close()
	if len(cfg.Sweep) > 0 {
		return r.sweep(ctx)
	}
	if cfg.DatabaseURL != "" {
		conns := 1
		if cfg.Floor {
			conns = cfg.Concurrency
		}
		f, err := openFloor(ctx, cfg.DatabaseURL, conns, cfg.Budget)
		if err != nil {
			return nil, err
		}
		defer f.close()
		if err := r.settle(ctx, f.pool); err != nil {
			return nil, err
		}
		if cfg.Floor {
			r.floor = f
		}
	}
	if err := r.createAgents(ctx); err != nil {
		return nil, err
	}
	phases, walls, rss, err := r.load(ctx)
	if err != nil {
		return nil, err
	}
	res := r.result(ctx, phases, walls, rss)
	res.Analyzed, res.Statistics = r.stats == StatsAnalyzed, r.stats
	return res, nil
}

// newRunner is a run's state before seeding: its client (with idle
// connections for the most agents it will run), corpus and recorder.
func newRunner(cfg *Config) *runner {
	conns := cfg.Concurrency
	for _, n := range cfg.Sweep {
		conns = max(conns, n)
	}
	r := &runner{cfg: cfg, c: newClient(cfg.URLs, conns), corpus: NewCorpus(cfg.Seed), rec: newRecorder(),
		runID: strconv.FormatInt(time.Now().UnixNano()%1e9, 36), accept: map[string]agent{}, stats: StatsUnknown}
	r.samples.rng = rand.New(rand.NewPCG(cfg.Seed, 0x73616d706c65))
	return r
}

// setLayers generates the corpus's layers: the bench projects, then
// _shared.
func (r *runner) setLayers() {
	for i := range r.cfg.Projects {
		p := ProjectName(i)
		r.projects = append(r.projects, p)
		r.layers = append(r.layers, layer{p, r.corpus.Layer(p, r.cfg.Items, r.cfg.Always)})
	}
	r.layers = append(r.layers, layer{SharedProject, r.corpus.Layer(SharedProject, r.cfg.Shared, r.cfg.Always)})
}

// createAgents makes one agent per worker (roles in turn, edit on the bench
// projects, granted policy) and one read-only agent per role that accepts
// handoffs; with --role-policy, it sets the roles' policies too.
func (r *runner) createAgents(ctx context.Context) error {
	mk := func(name, role, perm string) (agent, error) {
		var out struct {
			ID  string `json:"id"`
			Key string `json:"key"`
		}
		// Writers stand for a host application, which the corpus has write
		// policy on behalf of people: they are granted it.
		body := map[string]any{"name": name, "role": role, "permission": perm, "projects": r.projects, "max_authority": "policy"}
		if err := r.c.call(ctx, http.MethodPost, "/v1/agents", r.cfg.AdminKey, body, &out); err != nil {
			return agent{}, fmt.Errorf("create agent %s: %w", name, err)
		}
		r.agentsMade++
		return agent{id: out.ID, key: out.Key, role: role}, nil
	}
	for w := range r.cfg.Concurrency {
		role := Roles[w%len(Roles)]
		a, err := mk(fmt.Sprintf("bench-%s-%s-%d", r.runID, role, w), role, "edit")
		if err != nil {
			return err
		}
		r.workers = append(r.workers, &worker{agent: a, rng: rand.New(rand.NewPCG(r.cfg.Seed, uint64(1000+w)))})
	}
	for _, role := range Roles {
		a, err := mk(fmt.Sprintf("bench-%s-%s-inbox", r.runID, role), role, "read-only")
		if err != nil {
			return err
		}
		r.accept[role] = a
	}
	return r.setPolicies(ctx) // with --role-policy, the roles' policies
}

// load runs the phases: one of the whole duration without a floor;
// otherwise cfg.Phases of equal length, contextd (A) and the floor (B) in
// turn. It returns the phases, each system's total wall time, and the
// server's RSS at the end.
func (r *runner) load(ctx context.Context) ([]Phase, map[string]time.Duration, float64, error) {
	n := 1
	if r.cfg.Floor {
		n = r.cfg.Phases
	}
	return r.phased(ctx, n, r.cfg.Floor, r.work)
}

// stepFunc runs worker w's calls against system ("contextd" or the floor)
// until deadline, recording each in the runner's recorder.
type stepFunc func(ctx context.Context, system string, w int, deadline time.Time)

// phased runs n phases of equal length, with alternate contextd (A) and
// the floor (B) in turn, else contextd alone; in each, --concurrency
// goroutines run step until the phase's deadline. It returns the phases,
// each system's total wall time, and the server's RSS at the end.
func (r *runner) phased(ctx context.Context, n int, alternate bool, step stepFunc) ([]Phase, map[string]time.Duration, float64, error) {
	return r.phasesOf(ctx, phasePlan{first: 0, n: n, of: n, length: r.cfg.Duration / time.Duration(n), alternate: alternate}, step)
}

// A phasePlan is a run of n phases of one length, numbered first+1 to
// first+n of of (a sweep's level runs its phases in two visits); with
// alternate, the even-numbered phases from 0 are contextd's, the odd the
// floor's.
type phasePlan struct {
	first, n, of int
	length       time.Duration
	alternate    bool
}

// phasesOf runs plan's phases (phased).
func (r *runner) phasesOf(ctx context.Context, plan phasePlan, step stepFunc) ([]Phase, map[string]time.Duration, float64, error) {
	if r.cfg.CPUProfile != nil {
		if err := pprof.StartCPUProfile(r.cfg.CPUProfile); err != nil {
			return nil, nil, 0, fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	n := plan.n
	walls := map[string]time.Duration{}
	var phases []Phase
	loadStart := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		system := "contextd"
		if plan.alternate && (plan.first+i)%2 == 1 {
			system = OpFloor
		}
		before := r.rec.counts()
		cpuBefore := r.cpu.sample(ctx)
		start := time.Now()
		deadline := start.Add(plan.length)
		stop := r.progress(fmt.Sprintf("%sphase %d/%d %-8s", r.label, plan.first+i+1, plan.of, system), before, start, deadline)
		var wg sync.WaitGroup
		for w := range r.cfg.Concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				step(ctx, system, w, deadline)
			}()
		}
		wg.Wait()
		end := time.Now()
		stop()
		walls[system] += end.Sub(start)
		ph := r.phaseOf(system, before, start.Sub(loadStart), end.Sub(loadStart))
		phaseCPU(&ph, cpuBefore, r.cpu.sample(ctx))
		phases = append(phases, ph)
	}
	rss := 0.0
	if r.cfg.RSS != nil {
		rss = r.cfg.RSS()
	}
	if len(phases) < n {
		return nil, nil, 0, fmt.Errorf("load interrupted: %w", ctx.Err())
	}
	return phases, walls, rss, nil
}

// phaseOf is the Phase of system from start to end (from the start of the
// load): the calls recorded since before.
func (r *runner) phaseOf(system string, before map[string][2]int, start, end time.Duration) Phase {
	ph := Phase{System: system, StartS: round(start.Seconds(), 3), EndS: round(end.Seconds(), 3)}
	for op, c := range r.rec.counts() {
		ph.Ops += c[0] - before[op][0]
		ph.Errors += c[1] - before[op][1]
	}
	return ph
}

// progress prints a line on the progress writer every second until stop:
// the phase's calls so far, and its rate of assemblies.
func (r *runner) progress(label string, before map[string][2]int, start, deadline time.Time) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	line := func() {
		counts := r.rec.counts()
		el := time.Since(start)
		var b strings.Builder
		fmt.Fprintf(&b, "\r%s %5.1f/%.1fs", label, el.Seconds(), deadline.Sub(start).Seconds())
		errs := 0
		ops := opOrder
		if r.progressOps != nil {
			ops = r.progressOps
		}
		for _, op := range ops {
			c, ok := counts[op]
			if n := c[0] - before[op][0]; ok && (n > 0 || c[1] > before[op][1]) {
				fmt.Fprintf(&b, "  %s %d", op, n)
				if op == OpAssemble || op == OpFloor || r.progressOps != nil {
					fmt.Fprintf(&b, " (%.1f/s)", float64(n)/el.Seconds())
				}
			}
			errs += c[1] - before[op][1]
		}
		fmt.Fprintf(&b, "  errors %d ", errs)
		fmt.Fprint(r.cfg.Progress, b.String())
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				line()
				fmt.Fprintln(r.cfg.Progress)
				return
			case <-t.C:
				line()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// result turns the recorded calls into the figures; contextd's operations
// over the wall time of its phases, the floor's over that of its phases.
func (r *runner) result(ctx context.Context, phases []Phase, walls map[string]time.Duration, rss float64) *Result {
	cw := walls["contextd"]
	res := &Result{
		Assemble: AssembleStats{OpStats: r.rec.stats(OpAssemble, cw)},
		PutItem:  r.rec.stats(OpPutItem, cw), Why: r.rec.stats(OpWhy, cw),
		Injections: r.rec.stats(OpInjections, cw), Handoff: r.rec.stats(OpHandoff, cw),
		ServerRSSMiB: round(rss, 1), Phases: phases,
	}
	res.CPU = cpuOf(phases)
	if n := r.answers.Load(); n > 0 {
		res.Assemble.AnswerBytes = round(float64(r.answerBytes.Load())/float64(n), 0)
	}
	res.Assemble.RecordsPerPacket = r.recordsPerPacket(ctx)
	if r.cfg.Floor {
		fs := r.rec.stats(OpFloor, walls[OpFloor])
		res.Floor = &fs
		if fs.Ops > 0 && cw > 0 {
			ratio := (float64(res.Assemble.Ops) / cw.Seconds()) / (float64(fs.Ops) / walls[OpFloor].Seconds())
			ratio = round(ratio, 3)
			res.Ratio = &ratio
		}
	}
	for _, e := range r.rec.errors {
		r.logf("error: %s", e)
	}
	return res
}

// recordsPerPacket reads the records of the sampled packets (as admin, so
// hidden items' records count too) and returns their mean number.
func (r *runner) recordsPerPacket(ctx context.Context) float64 {
	total, n := 0, 0
	for _, s := range r.samples.items {
		var out struct {
			Data []struct{} `json:"data"`
		}
		path := "/v1/projects/" + s.project + "/packets/" + s.id + "/records"
		if err := r.c.call(ctx, http.MethodGet, path, r.cfg.AdminKey, nil, &out); err != nil {
			r.logf("records of %s: %v", s.id, err)
			continue
		}
		total += len(out.Data)
		n++
	}
	if n == 0 {
		return 0
	}
	return round(float64(total)/float64(n), 1)
}

// reservoir keeps a uniform sample of up to 32 of the assembled packets.
type reservoir struct {
	mu    sync.Mutex
	rng   *rand.Rand
	seen  int
	items []packetRef
}

type packetRef struct{ project, id string }

func (s *reservoir) add(p packetRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen++
	if len(s.items) < 32 {
		s.items = append(s.items, p)
	} else if i := s.rng.IntN(s.seen); i < len(s.items) {
		s.items[i] = p
	}
}

// SelfRSSMiB is this process's resident set (VmRSS of /proc/self/status)
// in MiB, 0 where there is no /proc.
func SelfRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}
