package cli

import (
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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/migrate"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

func newServe() *cobra.Command {
	var (
		db        dbFlags
		listen    string
		doMigrate bool
		bodyLimit int64
		logLevel  string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			stderr := cmd.ErrOrStderr()
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

			if db.url == "" {
				unlock, err := lockDataDir(db.dataDir)
				if err != nil {
					return err
				}
				defer unlock()
			}
			url, cluster, err := db.open(ctx, stderr)
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
			if doMigrate {
				if err := migrate.Up(ctx, url); err != nil {
					return err
				}
			} else if pending, err := migrate.Pending(ctx, url); err != nil {
				return err
			} else if pending {
				return errors.New("the database schema is not current and --migrate=false: run `contextd migrate up` first")
			}
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				return fmt.Errorf("connect: %w", err)
			}
			defer pool.Close()

			agent, key, err := auth.NewService(pool).Bootstrap(ctx)
			if err != nil {
				return err
			}
			if key != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "Created the first admin agent %s. Its key is shown once:\n\n    %s\n\n", agent.ID, key)
				if cluster != nil {
					path := filepath.Join(cluster.DataDir(), "admin.key")
					if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
						return fmt.Errorf("write admin key: %w", err)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "It is also in %s (mode 0600).\n", path)
				}
			}

			go sweepIdempotencyKeys(ctx, pool, log)
			stopping := make(chan struct{})
			e := server.New(server.Config{
				Pool: pool, Logger: log, BodyLimit: bodyLimit, Stopping: stopping,
				Ready: func(ctx context.Context) error {
					pending, err := migrate.Pending(ctx, url)
					if err == nil && pending {
						err = errors.New("schema is not current")
					}
					return err
				},
			})
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen: %w", err)
			}
			srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
			srv.RegisterOnShutdown(func() { close(stopping) })
			fmt.Fprintf(cmd.OutOrStdout(), "contextd listening on http://%s\n", ln.Addr())
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			defer cancel()
			return srv.Shutdown(shutdownCtx)
		},
	}
	db.register(cmd)
	cmd.Flags().StringVar(&listen, "listen", envOr("CONTEXTD_LISTEN", "127.0.0.1:8080"), "address to listen on (env CONTEXTD_LISTEN)")
	cmd.Flags().BoolVar(&doMigrate, "migrate", true, "apply pending migrations on start; with false, refuse to start on a stale schema")
	cmd.Flags().Int64Var(&bodyLimit, "body-limit", server.DefaultBodyLimit, "largest request body, in bytes")
	cmd.Flags().StringVar(&logLevel, "log-level", envOr("CONTEXTD_LOG_LEVEL", "info"), "debug, info, warn or error")
	return cmd
}

// sweepIdempotencyKeys deletes answers older than 24 hours, hourly.
func sweepIdempotencyKeys(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := store.Q.IdempotencyKeyDeleteExpired(ctx, pool); err != nil && ctx.Err() == nil {
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
