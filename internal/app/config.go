package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/contextd/contextd/internal/store"
)

// Config is everything a contextd process is configured with, parsed once
// from flags and environment, validated at start and passed explicitly.
type Config struct {
	Listen   string
	LogLevel slog.Level
	Migrate  bool
	// MigrateURL is the owner's login, for migrations; the server itself
	// then connects with Store.URL, a member of contextd_app only. Empty:
	// migrations use Store.URL (the embedded default uses its superuser
	// and makes the server a login of its own).
	MigrateURL string
	// Store is the database connection: URL (empty for the embedded
	// default), pool size and timeouts.
	Store store.Config
	// BodyLimit is the largest request body, in bytes; BatchBodyLimit the
	// largest body of a batch of items (10,000 items of 2 KB fit).
	BodyLimit      int64
	BatchBodyLimit int64
	// HTTP server timeouts.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
	// AuditKeyFile holds the deployment's audit key (checkpoints and
	// idempotency answers); AuditKey is the key itself, from the
	// environment. Neither set: the embedded default keeps one in its data
	// directory; a server on another database runs without.
	AuditKeyFile string
	AuditKey     string

	logLevel string
}

// DefaultBodyLimit is the largest request body accepted unless configured;
// DefaultBatchBodyLimit the largest batch of items.
const (
	DefaultBodyLimit      = 8 << 20
	DefaultBatchBodyLimit = 32 << 20
)

// RegisterFlags declares the configuration's flags, with defaults from
// the environment where a variable is named.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", EnvOr("CONTEXTD_LISTEN", "127.0.0.1:8080"), "address to listen on (env CONTEXTD_LISTEN)")
	fs.StringVar(&c.logLevel, "log-level", EnvOr("CONTEXTD_LOG_LEVEL", "info"), "debug, info, warn or error (env CONTEXTD_LOG_LEVEL)")
	fs.BoolVar(&c.Migrate, "migrate", true, "apply pending migrations on start; with false, refuse to start on a stale schema")
	fs.StringVar(&c.MigrateURL, "migrate-database-url", os.Getenv("CONTEXTD_MIGRATE_DATABASE_URL"),
		"the owner's URL, for migrations; the server then connects with --database-url, a login of contextd_app (env CONTEXTD_MIGRATE_DATABASE_URL)")
	fs.Int64Var(&c.BodyLimit, "body-limit", DefaultBodyLimit, "largest request body, in bytes")
	fs.Int64Var(&c.BatchBodyLimit, "batch-body-limit", DefaultBatchBodyLimit, "largest body of a batch of items (POST /v1/projects/{p}/items), in bytes")
	fs.Int32Var(&c.Store.MaxConns, "db-max-conns", int32(envInt("CONTEXTD_DB_MAX_CONNS", 0)), "database pool size; 0: 4 per core, at least 8 (env CONTEXTD_DB_MAX_CONNS)")
	fs.DurationVar(&c.Store.AcquireTimeout, "db-acquire-timeout", store.DefaultAcquireTimeout, "longest wait for a free database connection before answering 503")
	fs.DurationVar(&c.Store.StatementTimeout, "db-statement-timeout", store.DefaultStatementTimeout, "longest a statement may run on the server")
	fs.DurationVar(&c.Store.LockTimeout, "db-lock-timeout", store.DefaultLockTimeout, "longest wait for a row lock")
	fs.DurationVar(&c.Store.HealthCheckPeriod, "db-health-check", store.DefaultHealthCheckPeriod, "how often idle database connections are checked")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "longest time to read a request's headers")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "longest wait for requests to finish on shutdown")
	fs.StringVar(&c.AuditKeyFile, "audit-key-file", os.Getenv("CONTEXTD_AUDIT_KEY_FILE"),
		"file with the audit key: base64 of 32 bytes, the same for every process (env CONTEXTD_AUDIT_KEY_FILE, or the key itself in CONTEXTD_AUDIT_KEY)")
	c.AuditKey = os.Getenv("CONTEXTD_AUDIT_KEY")
}

// Validate checks the parsed values and fills derived ones.
func (c *Config) Validate() error {
	var errs []error
	if c.logLevel != "" {
		if err := c.LogLevel.UnmarshalText([]byte(c.logLevel)); err != nil {
			errs = append(errs, fmt.Errorf("--log-level: %w", err))
		}
	}
	if c.Listen == "" {
		errs = append(errs, errors.New("--listen: an address is required"))
	}
	if c.BodyLimit <= 0 {
		errs = append(errs, fmt.Errorf("--body-limit: must be positive, not %d", c.BodyLimit))
	}
	if c.BatchBodyLimit < c.BodyLimit {
		errs = append(errs, fmt.Errorf("--batch-body-limit: must be at least --body-limit (%d), not %d", c.BodyLimit, c.BatchBodyLimit))
	}
	if c.Store.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("--db-max-conns: must not be negative"))
	}
	if c.Store.AcquireTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--db-acquire-timeout: must be positive"))
	}
	return errors.Join(errs...)
}

// EnvOr is the environment variable name, or def when it is unset or empty.
func EnvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
