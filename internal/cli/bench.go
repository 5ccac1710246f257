package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/bench"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/pgcluster"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// benchLong is bench's help: what each mode loads and what its floor is.
const benchLong = `bench seeds a corpus through the API (bench-0..N-1 and _shared; --reuse skips
it when the same corpus is complete already), creates the agents it needs,
and runs --concurrency agents for --duration: ~70% packet assembly, 15% item
writes, 10% why and injections, 5% handoff create and accept (--only
assemble: assembly alone). It prints ops/s, p50, p95, p99 and errors per
operation (--json: one object).

Against a running server (--url) bench changes nothing that is not its
own: it writes only in projects it made (named bench-..., described
"contextd bench ...", restored if --clean archived them; a project of such
a name that it did not make stops it), its agents are named
bench-<run>-..., and it writes no _shared items, which the packets of every
project read (its corpus is then the bench projects' alone; --dedicated
says the server and its database are the bench's, and writes them too).
The end of a run says what it made. --clean (with --url and --key) removes
what bench runs made: it archives the bench projects (DELETE: their history
stays, POST .../restore brings one back), revokes the bench agents and
deletes the bench items of _shared that are still as a bench wrote them.

  contextd bench --url http://127.0.0.1:8080 --key "$CONTEXTD_KEY" --duration 10s
  contextd bench --url http://127.0.0.1:8080 --key "$CONTEXTD_KEY" --clean

Without --url it starts contextd in this process on a free loopback port, on
the embedded PostgreSQL cluster in --data-dir (or on --database-url); the
load generator then shares the process and its CPUs with the server, and
server_rss_mib is this process's RSS (server and load generator together;
PostgreSQL's own processes are not counted). With --url (repeatable:
requests round-robin) and --key (an admin key) it loads running servers;
server_rss_mib is then 0, since their processes are not known here.

--floor alternates, in --phases of equal length (A B A B ...), contextd (A)
and a minimal pgx program (B) that does only what an ideal assembly cannot
avoid on the same corpus and database, at the same concurrency. ratio is
contextd's assembly ops/s in its phases over the floor's in its phases; with
the mixed workload contextd's agents also spend ~30% of their time on the
other operations, so use --only assemble for a like-for-like ratio. With
--url, --floor needs --database-url.

The cpu/call lines (JSON: cpu_ms_per_op; a sweep's cpu/packet lines and
cpu_ms_per_packet) price each system's phases in CPU: this process's
(contextd's server and the load generator, or the floor's program and the
load generator) and the PostgreSQL cluster's, summed from /proc over its
processes when --database-url names a cluster on this machine that bench
may see. On a machine whose cores a run saturates, the ratio is the floor's
CPU per call over contextd's, and these lines say whose CPU it is.

With --database-url (or without --url), bench runs VACUUM (ANALYZE) on the
database after seeding, so the figures are those after an operator's
VACUUM ANALYZE. --no-analyze leaves the database as seeding left it, for
contextd and the floor alike: what a user sees in the first minute after an
import into a new database (autovacuum not yet run, or off). The output's
statistics line (JSON: analyzed, statistics) says which it was: analyzed,
none, present (statistics from before this run: not a new database) or
unknown (no database).

--sweep 1,8,32,64 runs the assembly workload (--only assemble) at each of
these concurrencies (at most 256 agents), each level for --duration in
--phases alternating phases of contextd and the floor (a multiple of 4: half
of them going up the list of levels, half coming back, 1 8 64 64 8 1, so
that the machine's and the growing tables' drift weighs the same on every
level), on one corpus, and prints one row per level: ops/s, p50, p95,
p99, p99/p50, errors, the floor's ops/s, the ratio, and the in-process
server's peak RSS during the level (sampled every 100 ms). The floor's pool holds at most 16 connections; more
of its clients queue, as contextd's requests queue for its pool. --json
prints one object with a rows array.

Four more modes measure one operation each beside a floor taken in the same
run on the same database (always, --floor or not; with --url they need
--database-url):

  --only ingest      rounds (for --duration, at least 3) of one batch of
                     --ingest-items items of --ingest-size bytes into a fresh
                     project; after each, the floor reads back every row the
                     batch wrote (tables and non-generated columns from the
                     catalog) and COPYs them under another project in one
                     transaction. Median versions/s of each, and the ratio.
  --only put         --concurrency clients PUT items of --ingest-size bytes
                     under distinct keys; the floor INSERTs one row at a time
                     into a table LIKE item_versions INCLUDING ALL (dropped at
                     the end); with --put-floor write, one transaction per PUT
                     copies all of an item's rows (version, item row, relevance
                     rows) into copies of their tables. ops/s, p50/p99, in
                     alternating --phases.
  --only get         GET of items of the seeded corpus by key; the floor is
                     LangGraph PostgresStore's get on a store table of as many
                     rows (dropped at the end).
  --only injections  the first page of an item's injections, for an item used
                     by every packet and for items used a few times, over
                     --records records seeded with SQL into a new project
                     (--reuse reuses a complete one); the floor runs the same
                     query on pgx. p50/p99 of each.

--only outcomes has no floor (the issue's targets are latencies) and needs
no --database-url (with one, the corpus is analysed as for get): on the
seeded corpus every agent assembles its share of --outcome-packets packets
and records an outcome on every other one (success, failure, partial in
turn, most with a 2 KB answer quoting the packet's rendered text), then
the agents alternate for --duration between outcome_write (an outcome with
a 2 KB answer on a packet without one before the load) and suspects (GET
.../suspects of a failed packet). ops/s, p50/p95/p99 of each.`

func newBench() *cobra.Command {
	var (
		cfg        = bench.Defaults()
		urls       []string
		dataDir    string
		cpuprofile string
		sweep      string
		asJSON     bool
		dedicated  bool
		clean      bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Seed a corpus and load contextd with a mixed workload of agents (optionally against a pgx floor)",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			stderr := cmd.ErrOrStderr()
			cfg.Progress = progressWriter(stderr)
			if clean {
				return benchClean(ctx, cmd, urls, cfg.AdminKey, asJSON)
			}
			if err := benchSweep(cmd, sweep, &cfg); err != nil {
				return err
			}
			if err := benchShared(cmd, len(urls) > 0, dedicated, &cfg); err != nil {
				return err
			}
			if len(urls) == 0 {
				if cmd.Flags().Changed("key") {
					return errors.New("--key goes with --url; without --url bench starts its own server")
				}
				srv, err := startBenchServer(ctx, stderr, cfg.DatabaseURL, dataDir)
				if err != nil {
					return err
				}
				defer srv.stop()
				cfg.URLs, cfg.AdminKey, cfg.DatabaseURL = []string{srv.url}, srv.key, srv.dbURL
				cfg.RSS = bench.SelfRSSMiB
			} else {
				cfg.URLs = urls
				if cfg.AdminKey == "" {
					return errors.New("--url needs --key (an admin key; env CONTEXTD_KEY)")
				}
			}
			if cpuprofile != "" {
				f, err := os.Create(cpuprofile)
				if err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer f.Close()
				cfg.CPUProfile = f
			}
			res, err := bench.Run(ctx, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return res.WriteJSON(cmd.OutOrStdout())
			}
			res.WriteTable(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Projects, "projects", cfg.Projects, "bench projects (bench-0..N-1)")
	f.IntVar(&cfg.Items, "items", cfg.Items, "items per project")
	f.IntVar(&cfg.Shared, "shared", cfg.Shared, "items in _shared")
	f.Float64Var(&cfg.Always, "always", cfg.Always, "fraction of always-on items")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed of the corpus and the workload")
	f.BoolVar(&cfg.Reuse, "reuse", false, "reuse the corpus (--only injections: the records) seeded before with the same parameters, if complete")
	f.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "agents running at once")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the whole load (all phases)")
	f.StringVar(&cfg.Only, "only", "", "assemble: packet assembly alone; ingest, put, get or injections: that operation beside its floor; outcomes: the outcome write and suspects")
	f.IntVar(&cfg.IngestItems, "ingest-items", cfg.IngestItems, "--only ingest: items of each round's batch (at most 10,000)")
	f.IntVar(&cfg.IngestSize, "ingest-size", cfg.IngestSize, "--only ingest and put: content bytes of each item written")
	f.StringVar(&cfg.PutFloor, "put-floor", cfg.PutFloor, "--only put: the floor, insert (one INSERT of the version's row) or write (every row a PUT writes but the chain's, in one transaction)")
	f.Int64Var(&cfg.Records, "records", cfg.Records, "--only injections: records to seed into packet_records")
	f.IntVar(&cfg.OutcomePackets, "outcome-packets", cfg.OutcomePackets, "--only outcomes: packets to assemble before the load (at least 4 per agent), outcomes on half of them")
	f.BoolVar(&cfg.NoAnalyze, "no-analyze", false, "no VACUUM or ANALYZE after seeding: measure the first minute after an import (use a new database)")
	f.StringVar(&sweep, "sweep", "", "assembly alone at each of these concurrencies, e.g. 1,8,32,64 (each level for --duration, beside its floor)")
	f.BoolVar(&cfg.Floor, "floor", false, "alternate phases of contextd and of a minimal pgx floor; print the ratio")
	f.BoolVar(&cfg.RolePolicy, "role-policy", false, "set a role policy per bench role in each bench project (the packets' budget, every kind, a cap per section) and send requests without token_budget, so every packet is made under its role's policy")
	f.IntVar(&cfg.Phases, "phases", cfg.Phases, "with --floor: number of phases, even, at least 4 (each --duration/--phases)")
	f.StringArrayVar(&urls, "url", nil, "contextd URL to load (repeatable; requests round-robin); none: start one in this process")
	f.StringVar(&cfg.AdminKey, "key", os.Getenv("CONTEXTD_KEY"), "admin key of the --url servers (env CONTEXTD_KEY)")
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "with --url: their database, for --floor; without: the database of the in-process server instead of the embedded cluster")
	f.StringVar(&dataDir, "data-dir", ".contextd-bench", "data directory of the embedded cluster of the in-process server")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a pprof CPU profile of this process during the load to this file")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	f.BoolVar(&dedicated, "dedicated", false, "with --url: the servers and their database are the bench's alone; write the _shared layer (--shared) too")
	f.BoolVar(&clean, "clean", false, "with --url and --key: archive the bench projects, revoke the bench agents and delete the bench items of _shared, then stop")
	return cmd
}

// benchShared settles who may write _shared: a bench of its own server
// (without --url, or --dedicated) writes --shared items there; against a
// server of others it writes none, since every project's packets read
// them, and says so.
func benchShared(cmd *cobra.Command, remote, dedicated bool, cfg *bench.Config) error {
	switch {
	case !remote && dedicated:
		return errors.New("--dedicated goes with --url; without --url the bench's server is its own anyway")
	case !remote || dedicated:
		cfg.Dedicated = true
	case cmd.Flags().Changed("shared") && cfg.Shared > 0:
		return fmt.Errorf("--shared %d with --url would write items into _shared, which the packets of every project on that server read; "+
			"add --dedicated if the server and its database are the bench's alone", cfg.Shared)
	default:
		cfg.Shared = 0
		fmt.Fprintln(cmd.ErrOrStderr(), "bench: --url: no _shared items (the packets of every project read them); the corpus is the bench projects' alone (--dedicated: a server of the bench's own)")
	}
	return nil
}

// benchClean is bench --clean: what bench runs made on the --url server,
// removed through its API.
func benchClean(ctx context.Context, cmd *cobra.Command, urls []string, key string, asJSON bool) error {
	if len(urls) == 0 || key == "" {
		return errors.New("--clean needs --url and --key (an admin key; env CONTEXTD_KEY): it removes what bench runs made on a running server")
	}
	res, err := bench.Clean(ctx, urls, key, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(out)
		return enc.Encode(res)
	}
	for _, l := range []struct {
		what  string
		names []string
	}{{"archived projects", res.Projects}, {"revoked agents", res.Agents}, {"deleted _shared items", res.SharedItems},
		{"kept _shared items (changed since a bench wrote them)", res.Kept}} {
		fmt.Fprintf(out, "%s: %d\n", l.what, len(l.names))
		for _, n := range l.names {
			fmt.Fprintf(out, "  %s\n", n)
		}
	}
	return nil
}

// benchSweep parses --sweep into cfg, before any server starts: a bad
// list is the user's to fix, not a reason to seed a corpus.
func benchSweep(cmd *cobra.Command, sweep string, cfg *bench.Config) error {
	if !cmd.Flags().Changed("sweep") {
		return nil
	}
	if cmd.Flags().Changed("concurrency") {
		return errors.New("--sweep sets the concurrency of each level: drop --concurrency")
	}
	levels, err := bench.ParseSweep(sweep)
	if err != nil {
		return err
	}
	cfg.Sweep = levels
	return nil
}

// benchServer is contextd running in this process for the bench.
type benchServer struct {
	url, key, dbURL string
	stop            func()
}

// startBenchServer starts contextd as `serve` would (migrations, the first
// admin on an empty database) on a free loopback port, on dbURL or else the
// embedded cluster in dataDir, and returns an admin key for the bench.
func startBenchServer(ctx context.Context, stderr io.Writer, dbURL, dataDir string) (*benchServer, error) {
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) (*benchServer, error) { cleanup(); return nil, err }
	var cluster *pgcluster.Cluster
	if dbURL == "" {
		unlock, err := lockDataDir(dataDir)
		if err != nil {
			return nil, err
		}
		cleanups = append(cleanups, unlock)
		db := dbFlags{dataDir: dataDir}
		if dbURL, cluster, err = db.open(ctx, stderr); err != nil {
			return fail(err)
		}
		cleanups = append(cleanups, func() {
			if err := cluster.Stop(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(stderr, "contextd: stop embedded PostgreSQL: %v\n", err)
			}
		})
	}
	if err := store.MigrateUp(ctx, dbURL); err != nil {
		return fail(err)
	}
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, st.Close)
	// A key of its own, as serve's embedded default always has one: every
	// write seals its entries, and the figures count that.
	keys, err := benchKeys()
	if err != nil {
		return fail(err)
	}
	a := app.New(st, app.WithKeys(keys))
	watch, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	go a.Agents.Watch(watch) // as serve runs it
	cleanups = append(cleanups, stopWatch)
	key, err := benchAdminKey(ctx, stderr, a, cluster)
	if err != nil {
		return fail(err)
	}
	stopping := make(chan struct{})
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e := server.New(server.Config{App: a, Logger: log, BodyLimit: app.DefaultBodyLimit, Stopping: stopping})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}
	// serve's defaults; no rate limit, which would only measure itself.
	hc := app.Config{ReadHeaderTimeout: app.DefaultReadHeaderTimeout, ReadTimeout: app.DefaultReadTimeout,
		WriteTimeout: app.DefaultWriteTimeout, IdleTimeout: app.DefaultIdleTimeout}
	srv := hc.HTTPServer(e)
	srv.RegisterOnShutdown(func() { close(stopping) })
	go func() { _ = srv.Serve(ln) }()
	cleanups = append(cleanups, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	fmt.Fprintf(stderr, "contextd: bench server listening on http://%s\n", ln.Addr())
	return &benchServer{url: "http://" + ln.Addr().String(), key: key, dbURL: dbURL, stop: cleanup}, nil
}

// benchKeys is a fresh audit key for the bench's own server.
func benchKeys() (*evidence.Keys, error) {
	seed := make([]byte, 32)
	if _, err := rand.Read(seed); err != nil {
		return nil, err
	}
	return evidence.ParseKey(base64.StdEncoding.EncodeToString(seed))
}

// benchAdminKey makes the first admin on an empty database, as serve does
// (its key also in the embedded cluster's admin.key), and returns its key;
// on a database that has an admin already it creates an admin for the
// bench, since keys are shown only once.
func benchAdminKey(ctx context.Context, stderr io.Writer, a *app.App, cluster *pgcluster.Cluster) (string, error) {
	agent, key, err := a.Agents.Bootstrap(ctx)
	if err != nil {
		return "", err
	}
	if key != "" {
		fmt.Fprintf(stderr, "contextd: created the first admin agent %s\n", agent.ID)
		if cluster != nil {
			path := filepath.Join(cluster.DataDir(), "admin.key")
			if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
				return "", fmt.Errorf("write admin key: %w", err)
			}
			fmt.Fprintf(stderr, "contextd: its key is in %s (mode 0600)\n", path)
		}
		return key, nil
	}
	_, key, err = a.Agents.CreateLocal(ctx, auth.CreateParams{Name: "bench-admin", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}})
	return key, err
}

// progressWriter is w for the progress bar and lines: as is on a terminal,
// where a carriage return redraws the line; elsewhere (a file, a pipe)
// each carriage return becomes a line break, so a log holds one update a
// line instead of one line of them all.
func progressWriter(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return w
		}
	}
	return lineBreaks{w}
}

type lineBreaks struct{ w io.Writer }

func (l lineBreaks) Write(p []byte) (int, error) {
	if _, err := l.w.Write(bytes.ReplaceAll(p, []byte("\r"), []byte("\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}
