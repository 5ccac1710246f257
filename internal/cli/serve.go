package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/obs"
	"github.com/contextd/contextd/internal/pgcluster"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

func newServe() *cobra.Command {
	var cfg app.Config
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API",
		Long: "Run the HTTP API. Settings come from flags, then the environment, then --config FILE " +
			"(YAML or TOML), then the defaults; `contextd config check` prints the effective ones.",
		Example: `  contextd serve                                    # the embedded PostgreSQL cluster in .contextd/
  DATABASE_URL=postgres://contextd@db/contextd contextd serve --listen :8080
  contextd serve --config contextd.toml`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			limits.Set(cfg.Limits) // once, before any request
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log, err := obs.NewLogger(cmd.ErrOrStderr(), cfg.LogFormat, cfg.LogLevel)
			if err != nil {
				return err
			}
			setMemoryLimit(log)
			db := dbFlags{url: cfg.DatabaseURL, dataDir: cfg.DataDir}
			if db.url == "" {
				unlock, err := lockDataDir(db.dataDir)
				if err != nil {
					return err
				}
				defer unlock()
			}
			url, cluster, err := db.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if cluster != nil {
				defer func() {
					if err := cluster.Stop(context.WithoutCancel(ctx)); err != nil {
						log.Error("stop embedded PostgreSQL", slog.Any("error", err))
					}
				}()
			}
			cfg.Store.URL = url
			return runServer(ctx, cmd, cfg, cluster, log)
		},
	}
	cfg.RegisterFlags(cmd.Flags())
	return cmd
}

// runServer migrates, opens the store, builds the services once (package app)
// and runs the HTTP transport over them until ctx ends.
func runServer(ctx context.Context, cmd *cobra.Command, cfg app.Config, cluster *pgcluster.Cluster, log *slog.Logger) error {
	fresh, err := store.FreshDatabase(ctx, cmp.Or(cfg.MigrateURL, cfg.Store.URL))
	if err != nil {
		return err
	}
	url, err := migrateAndLogin(ctx, cfg, cluster, log)
	if err != nil {
		return err
	}
	cfg.Store.URL = url
	tracing, err := obs.StartTracing(ctx, cfg.Traces, buildVersion())
	if err != nil {
		return err
	}
	defer func() {
		// What is still buffered goes out before the process ends.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(sctx); err != nil {
			log.Warn("flush traces", slog.Any("error", err))
		}
	}()
	cfg.Store.Tracer = tracing.TracerProvider()
	cfg.Store.Logger = log
	st, err := store.Open(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := auditKeys(cmd, cfg, cluster, log)
	if err != nil {
		return err
	}
	if err := adoptChains(ctx, st, keys, fresh && cfg.Migrate, log); err != nil {
		return err
	}
	replica, err := app.OpenReplica(ctx, cfg)
	if err != nil {
		return err
	}
	if replica != nil {
		defer replica.Close()
	}
	a := app.New(st, app.WithKeys(keys), app.WithObs(obs.New(st.Stats, tracing.TracerProvider())), app.WithReplica(replica))
	announce, err := bootstrap(ctx, a, cluster)
	if err != nil {
		return err
	}
	go sweepIdempotencyKeys(ctx, st, log)
	go a.Ledger.Run(ctx, time.Second, log)   // folds what packets and outcomes queue for the item ledger
	go a.Agents.Watch(ctx)                   // revocations in other processes reach this one's key cache
	go a.Evidence.ResumeRedactions(ctx, log) // what a stopped process left running
	stopping := make(chan struct{})
	e := server.New(server.Config{
		App: a, Logger: log, BodyLimit: cfg.BodyLimit, BatchBodyLimit: cfg.BatchBodyLimit, Stopping: stopping,
		RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst, MetricsElsewhere: cfg.MetricsListen != "",
		MCPAllowedOrigins: cfg.MCPAllowedOrigins,
		Ready: func(ctx context.Context) error {
			pending, err := store.MigrationsPending(ctx, url)
			if err == nil && pending {
				err = errors.New("schema is not current")
			}
			return err
		},
	})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	metrics, err := metricsListener(cfg, a)
	if err != nil {
		ln.Close()
		return err
	}
	srv := cfg.HTTPServer(e)
	srv.RegisterOnShutdown(func() { close(stopping) })
	// A new admin's key comes with the listening line, in one write: it is
	// shown only once the server can be reached with it.
	fmt.Fprintf(cmd.OutOrStdout(), "contextd listening on http://%s\n%s%s", ln.Addr(), metrics.announce(), announce)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if metrics != nil {
		go func() { errc <- metrics.srv.Serve(metrics.ln) }()
		defer metrics.srv.Close()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// metricsServer serves /metrics on --metrics-listen.
type metricsServer struct {
	ln  net.Listener
	srv *http.Server
}

// metricsListener listens on --metrics-listen, when it is set, serving
// /metrics there to anyone who reaches it (nil: not set; /metrics is then
// on the main listener, to admin keys).
func metricsListener(cfg app.Config, a *app.App) (*metricsServer, error) {
	if cfg.MetricsListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.Obs.Metrics.Handler())
	return &metricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: cfg.ReadHeaderTimeout}}, nil
}

func (m *metricsServer) announce() string {
	if m == nil {
		return ""
	}
	return fmt.Sprintf("contextd metrics on http://%s/metrics\n", m.ln.Addr())
}

// migrateAndLogin migrates with the owner's login (--migrate-database-url,
// or the one URL there is) and returns the URL the server connects with:
// --database-url, or for the embedded default a login of contextd_app made
// by its superuser, with a password from the cluster, which takes no login
// without one (the URL carries it: never log it). A server that still runs
// as a superuser or an owner says at start what that allows.
func migrateAndLogin(ctx context.Context, cfg app.Config, cluster *pgcluster.Cluster, log *slog.Logger) (string, error) {
	url, owner := cfg.Store.URL, cfg.MigrateURL
	if owner == "" {
		owner = url
	}
	if cfg.Migrate {
		if err := store.MigrateUp(ctx, owner); err != nil {
			return "", err
		}
	} else if pending, err := store.MigrationsPending(ctx, owner); err != nil {
		return "", err
	} else if pending {
		return "", errors.New("the database schema is not current and --migrate=false: run `contextd migrate up` first")
	}
	if cluster != nil && cfg.MigrateURL == "" {
		if _, err := store.EnsureLogin(ctx, owner, store.ServerLogin); err != nil {
			return "", err
		}
		var err error
		if url, err = cluster.LoginURL(ctx, store.ServerLogin, pgcluster.DefaultDatabase); err != nil {
			return "", err
		}
	}
	user, super, owns, err := store.Standing(ctx, url)
	if err != nil {
		return "", fmt.Errorf("database login: %w", err)
	}
	if super || owns {
		log.Warn("the server's database login can rewrite history: it is a superuser or owns the tables, so it may switch the append-only triggers off; "+
			"give it a login that is only a member of "+store.AppRole+" and migrate with --migrate-database-url (the audit chain still detects a rewrite)",
			slog.String("login", user), slog.Bool("superuser", super), slog.Bool("owner", owns))
	}
	return url, nil
}

// adoptChains seals, with a start seal each, the chains this process's
// migrations wrote on a fresh database (the _shared project's entry): the
// only entries written before a key could seal them; on a database
// another process migrated, the _shared row's entry alone. Otherwise the
// chains stay as they are: a database writer could have
// dropped the seals and rewritten the entries, and a server that adopted
// what it finds would sign the forgery. Chains written while a server had
// no key are adopted by an operator (`contextd audit adopt`).
func adoptChains(ctx context.Context, st *store.Store, keys *evidence.Keys, fresh bool, log *slog.Logger) error {
	if keys == nil {
		return nil
	}
	if !fresh {
		// A database another process migrated: only the _shared row's
		// entry, which every database has (store.AdoptSharedRow).
		_, err := st.AdoptSharedRow(ctx, keys.Seal)
		return err
	}
	adopted, err := st.AdoptChains(ctx, keys.Seal)
	if err != nil {
		return fmt.Errorf("seal the chains the migrations wrote: %w", err)
	}
	if len(adopted) > 0 {
		log.Debug("sealed the chains the migrations wrote", slog.Int("chains", len(adopted)))
	}
	return nil
}

// auditKeys is the deployment's audit key: CONTEXTD_AUDIT_KEY, else
// --audit-key-file, else, for the embedded default, audit.key in its data
// directory (made on first start). A server on another database without
// one runs, but signs no checkpoints and stores idempotency answers
// without their HMAC; it says so at start.
func auditKeys(cmd *cobra.Command, cfg app.Config, cluster *pgcluster.Cluster, log *slog.Logger) (*evidence.Keys, error) {
	switch {
	case cfg.AuditKey != "":
		return evidence.ParseKey(cfg.AuditKey)
	case cfg.AuditKeyFile != "":
		return evidence.LoadKeyFile(cfg.AuditKeyFile)
	case cluster != nil:
		path := filepath.Join(cluster.DataDir(), "audit.key")
		k, made, err := evidence.EnsureKeyFile(path)
		if made {
			fmt.Fprintf(cmd.OutOrStdout(), "Created the audit key in %s (mode 0600): checkpoints are signed with it.\n", path)
		}
		return k, err
	}
	log.Warn("no audit key (--audit-key-file or CONTEXTD_AUDIT_KEY): entries are written without a seal, checkpoints are refused and idempotency answers are stored without an HMAC")
	return nil, nil
}

// bootstrap makes the first admin on an empty database, keeps its key in
// the data directory of the embedded default (0600), and returns what to
// show once the server listens: the key, once; "" when there was an admin.
func bootstrap(ctx context.Context, a *app.App, cluster *pgcluster.Cluster) (string, error) {
	agent, key, err := a.Agents.Bootstrap(ctx)
	if err != nil || key == "" {
		return "", err
	}
	msg := fmt.Sprintf("Created the first admin agent %s. Its key is shown once:\n\n    %s\n\n", agent.ID, key)
	if cluster != nil {
		path := filepath.Join(cluster.DataDir(), "admin.key")
		if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("write admin key: %w", err)
		}
		msg += fmt.Sprintf("It is also in %s (mode 0600); the command line reads it when no --key is given.\n", path)
	}
	return msg, nil
}

// sweepIdempotencyKeys deletes answers older than 24 hours, hourly.
func sweepIdempotencyKeys(ctx context.Context, st *store.Store, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := st.IdempotencyKeyDeleteExpired(ctx); err != nil && ctx.Err() == nil {
			log.Warn("sweep idempotency keys", slog.Any("error", err))
		} else if n > 0 {
			log.Info("swept idempotency keys", slog.Int64("deleted", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
