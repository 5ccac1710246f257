package app

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/mcp"
	"github.com/contextd/contextd/internal/obs"
	"github.com/contextd/contextd/internal/secretfile"
	"github.com/contextd/contextd/internal/store"
)

// Config is everything a contextd process is configured with, parsed once
// from flags, environment and an optional file (configsrc.go; flags over
// environment over file over defaults), validated at start and passed
// explicitly.
type Config struct {
	Listen   string
	LogLevel slog.Level
	// LogFormat is text or json.
	LogFormat string
	// MetricsListen, when set, is the address /metrics is served on, to
	// anyone who reaches it; empty: on Listen, to admin keys only.
	MetricsListen string
	// ConfigFile is the optional YAML or TOML file of settings (--config).
	ConfigFile string
	// DatabaseURL is the database (empty: the embedded default cluster in
	// DataDir).
	DatabaseURL string
	DataDir     string
	// Traces is the OpenTelemetry exporter, from the OTEL_* variables.
	Traces  obs.TraceSettings
	Migrate bool
	// MigrateURL is the owner's login, for migrations; the server itself
	// then connects with Store.URL, a member of contextd_app only. Empty:
	// migrations use Store.URL (the embedded default uses its superuser
	// and makes the server a login of its own).
	MigrateURL string
	// Store is the database connection: URL (empty for the embedded
	// default), pool size and timeouts.
	Store store.Config
	// ReadDatabaseURL, when set, is a streaming standby of the database
	// that serves the reads of append-only history (store.Replica); empty:
	// every read goes to the primary. ReadWait bounds how long such a read
	// waits for the standby to replay what the primary had committed when
	// the read began before it reads the primary.
	ReadDatabaseURL string
	ReadWait        time.Duration
	// BodyLimit is the largest request body, in bytes; BatchBodyLimit the
	// largest body of a batch of items (10,000 items of 2 KB fit).
	BodyLimit      int64
	BatchBodyLimit int64
	// HTTP server timeouts (see HTTPServer; 0: none). ReadTimeout bounds
	// a whole request, body included, so a body trickled in slowly cannot
	// hold a connection; WriteTimeout bounds a whole answer, so a client
	// that never reads it cannot pin its memory (event streams lift it and
	// bound each write instead).
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
	// MinBodyRate is the slowest a request body may arrive once
	// MinBodyRateGrace has passed, in bytes per second averaged since its
	// first read (0: no minimum); slower is 408 and the connection is
	// closed (bodyrate.go), so a trickled body holds its connection for
	// the grace period, not the whole ReadTimeout.
	MinBodyRate      int64
	MinBodyRateGrace time.Duration
	// RateLimit is each agent's sustained requests per second (0: no
	// limit); RateBurst how many it may send at once (0: one second's
	// worth, at least 1).
	RateLimit float64
	RateBurst int
	// MCPAllowedOrigins are the browser origins that may call /mcp
	// (exact scheme://host[:port]; none by default): the MCP transport
	// requires Origin to be checked against DNS rebinding. Requests
	// without Origin, from MCP hosts rather than browsers, need none.
	MCPAllowedOrigins mcp.Origins
	// AuditKeyFile holds the deployment's audit key (checkpoints and
	// idempotency answers); AuditKey is the key itself, from the
	// environment. Neither set: the embedded default keeps one in its data
	// directory; a server on another database runs without.
	AuditKeyFile string
	AuditKey     string

	// Limits bound every input (package limits); --limit name=value
	// changes one.
	Limits limits.Limits

	logLevel   string
	limitArgs  map[string]string
	mcpOrigins []string
	// fs is the flag set RegisterFlags declared the settings on (each
	// one's variable is envName's); source says where each value came
	// from (flag, env, file, default), for config check.
	fs       *pflag.FlagSet
	source   map[string]string
	resolved bool
}

// DefaultBodyLimit is the largest request body accepted unless configured;
// DefaultBatchBodyLimit the largest batch of items.
const (
	DefaultBodyLimit      = 8 << 20
	DefaultBatchBodyLimit = 32 << 20
)

// Defaults of the HTTP server's timeouts. A batch body of
// DefaultBatchBodyLimit takes half a minute at 1 MB/s, and the write timeout
// outlasts the database's statement timeout, so a slow statement ends in a
// 503 the client reads rather than a dropped connection.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = time.Minute
	DefaultWriteTimeout      = time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
)

// RegisterFlags declares the configuration's flags. Each has an
// environment variable (envName) and a key of the config file (its name);
// Validate fills in from them what the command line left unset.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.ConfigFile, "config", "", "YAML (.yaml, .yml) or TOML (.toml) file of settings, keyed by flag name; flags and environment override it (env CONTEXTD_CONFIG)")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address to listen on (env CONTEXTD_LISTEN)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "address to serve /metrics on, to anyone who reaches it; empty: on --listen, to admin keys only (env CONTEXTD_METRICS_LISTEN)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (env CONTEXTD_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text or json (env CONTEXTD_LOG_FORMAT)")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL URL (env DATABASE_URL); empty: the embedded default cluster")
	fs.StringVar(&c.DataDir, "data-dir", ".contextd", "data directory of the embedded default cluster (env CONTEXTD_DATA_DIR)")
	fs.StringVar(&c.ReadDatabaseURL, "read-database-url", "",
		"a streaming standby of --database-url that serves the reads of history (why, replay, attribute, injections, packets and their records, task histories, audit entries); empty: the primary serves every read (env CONTEXTD_READ_DATABASE_URL)")
	fs.DurationVar(&c.ReadWait, "read-wait", store.DefaultReplicaWait,
		"longest a read waits for the standby of --read-database-url to replay what the primary had committed when the read began before it reads the primary instead")
	fs.BoolVar(&c.Migrate, "migrate", true, "apply pending migrations on start; with false, refuse to start on a stale schema")
	fs.StringVar(&c.MigrateURL, "migrate-database-url", "",
		"the owner's URL, for migrations; the server then connects with --database-url, a login of contextd_app (env CONTEXTD_MIGRATE_DATABASE_URL)")
	fs.Int64Var(&c.BodyLimit, "body-limit", DefaultBodyLimit, "largest request body, in bytes")
	fs.Int64Var(&c.BatchBodyLimit, "batch-body-limit", DefaultBatchBodyLimit, "largest body of a batch or an import of items (POST /v1/projects/{p}/items and .../items:import), in bytes")
	fs.Int32Var(&c.Store.MaxConns, "db-max-conns", 0, "database pool size; 0: 4 per core, at least 8 (env CONTEXTD_DB_MAX_CONNS)")
	fs.DurationVar(&c.Store.AcquireTimeout, "db-acquire-timeout", store.DefaultAcquireTimeout, "how long the pool may hand no connection to anyone before a waiting request is answered 503; while connections come free, requests queue (at most 30s)")
	fs.DurationVar(&c.Store.StatementTimeout, "db-statement-timeout", store.DefaultStatementTimeout, "longest a statement may run on the server")
	fs.DurationVar(&c.Store.LockTimeout, "db-lock-timeout", store.DefaultLockTimeout, "longest wait for a row lock")
	fs.DurationVar(&c.Store.HealthCheckPeriod, "db-health-check", store.DefaultHealthCheckPeriod, "how often idle database connections are checked")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", DefaultReadHeaderTimeout, "longest time to read a request's headers")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", DefaultReadTimeout, "longest time to read a whole request, body included; 0: none")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", DefaultWriteTimeout,
		"longest time from a request's headers to the end of its answer; event streams are exempt and bound each write by 10s instead; 0: none")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	fs.Int64Var(&c.MinBodyRate, "min-body-rate", DefaultMinBodyRate,
		"slowest a request body may arrive, in bytes per second averaged, once --min-body-rate-grace has passed; slower is 408 request_timeout and the connection is closed; 0: no minimum (env CONTEXTD_MIN_BODY_RATE)")
	fs.DurationVar(&c.MinBodyRateGrace, "min-body-rate-grace", DefaultMinBodyRateGrace, "how long a request body may take before --min-body-rate applies")
	fs.Float64Var(&c.RateLimit, "rate-limit", 0,
		"requests per second each agent may send, sustained; past it 429 rate_limited with Retry-After; 0: no limit (env CONTEXTD_RATE_LIMIT)")
	fs.IntVar(&c.RateBurst, "rate-burst", 0,
		"requests each agent may send at once before --rate-limit applies; 0: one second's worth, at least 1 (env CONTEXTD_RATE_BURST)")
	fs.StringSliceVar(&c.mcpOrigins, "mcp-allowed-origins", nil,
		"browser origins that may call /mcp, comma-separated, each exactly scheme://host[:port]; any other Origin is 403 origin_not_allowed, a request without Origin is not refused; default none (env CONTEXTD_MCP_ALLOWED_ORIGINS)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "longest wait for requests to finish on shutdown")
	fs.StringVar(&c.AuditKeyFile, "audit-key-file", "",
		"file with the audit key: base64 of 32 bytes, the same for every process (env CONTEXTD_AUDIT_KEY_FILE, or the key itself in CONTEXTD_AUDIT_KEY)")
	fs.StringToStringVar(&c.limitArgs, "limit", nil,
		"change an input limit, name=value (repeatable); names: "+strings.Join(limits.Names(), ", ")+" (defaults in docs/operations.md)")
}

// Validate fills in from the environment and the config file what the
// command line left unset (once), then checks the values and fills
// derived ones. Each error names its setting.
func (c *Config) Validate() error {
	errs := c.resolve()
	if c.logLevel != "" {
		if err := c.LogLevel.UnmarshalText([]byte(c.logLevel)); err != nil {
			errs = append(errs, fmt.Errorf("--log-level: %w", err))
		}
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format: %q is neither text nor json", c.LogFormat))
	}
	if err := checkAddr(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen: %w", err))
	}
	if c.MetricsListen != "" {
		if err := checkAddr(c.MetricsListen); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-listen: %w", err))
		} else if _, port, _ := net.SplitHostPort(c.MetricsListen); c.MetricsListen == c.Listen && port != "0" {
			errs = append(errs, fmt.Errorf("--metrics-listen: %q is --listen's address too; give another, or none to serve /metrics on the main listener to admins", c.MetricsListen))
		}
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
	if c.ReadWait < 0 {
		errs = append(errs, fmt.Errorf("--read-wait: must not be negative"))
	}
	if c.ReadDatabaseURL != "" && c.DatabaseURL == "" {
		errs = append(errs, fmt.Errorf("--read-database-url: needs --database-url: the embedded default cluster has no standby"))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout: must not be negative"))
	}
	errs = append(errs, c.validateHTTP()...)
	errs = append(errs, c.validateSecrets()...)
	var err error
	if c.MCPAllowedOrigins, err = mcp.ParseOrigins(c.mcpOrigins); err != nil {
		errs = append(errs, fmt.Errorf("--mcp-allowed-origins: %w", err))
	}
	if err := c.Traces.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Limits, err = limits.Default.With(c.limitArgs); err != nil {
		errs = append(errs, fmt.Errorf("--limit: %w", err))
	}
	return errors.Join(errs...)
}

// checkAddr refuses an address net.Listen could not take: host:port, the
// port a number (0: any free one).
func checkAddr(addr string) error {
	if addr == "" {
		return errors.New("an address (host:port) is required")
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 0 to 65535", addr)
	}
	return nil
}

// validateSecrets checks that the audit key can be read and parsed, and
// that the database URLs parse.
func (c *Config) validateSecrets() []error {
	var errs []error
	if c.AuditKey != "" {
		if _, err := evidence.ParseKey(c.AuditKey); err != nil {
			errs = append(errs, fmt.Errorf("CONTEXTD_AUDIT_KEY: %w", err))
		}
		if c.source[auditKeySetting] == FromFile {
			// The key is in the config file: the file is as secret as a key file.
			if err := secretfile.CheckPath("config file with the audit key", c.ConfigFile); err != nil {
				errs = append(errs, fmt.Errorf("--config: %w", err))
			}
		}
	} else if c.AuditKeyFile != "" {
		if _, err := evidence.LoadKeyFile(c.AuditKeyFile); err != nil {
			errs = append(errs, fmt.Errorf("--audit-key-file: %w", err))
		}
	}
	for _, u := range []struct{ flag, url string }{{"--database-url", c.DatabaseURL}, {"--migrate-database-url", c.MigrateURL}, {"--read-database-url", c.ReadDatabaseURL}} {
		if err := checkDatabaseURL(u.url); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.flag, err))
		}
	}
	return errs
}

// validateHTTP checks the HTTP server's timeouts and the rate limit.
func (c *Config) validateHTTP() []error {
	var errs []error
	for _, t := range []struct {
		flag string
		d    time.Duration
	}{{"--read-header-timeout", c.ReadHeaderTimeout}, {"--read-timeout", c.ReadTimeout}, {"--write-timeout", c.WriteTimeout}, {"--idle-timeout", c.IdleTimeout}} {
		if t.d < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative", t.flag))
		}
	}
	if c.ReadTimeout > 0 && c.ReadHeaderTimeout > c.ReadTimeout {
		errs = append(errs, fmt.Errorf("--read-header-timeout: must not be longer than --read-timeout (%s)", c.ReadTimeout))
	}
	stmt := c.Store.StatementTimeout
	if stmt == 0 {
		stmt = store.DefaultStatementTimeout
	}
	if c.WriteTimeout > 0 && stmt > 0 && c.WriteTimeout <= stmt {
		errs = append(errs, fmt.Errorf("--write-timeout: must be longer than --db-statement-timeout (%s), or a slow statement's 503 is never written", stmt))
	}
	if c.RateLimit < 0 || math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0) {
		errs = append(errs, fmt.Errorf("--rate-limit: must be a number of requests per second, at least 0, not %v", c.RateLimit))
	}
	if c.RateBurst < 0 {
		errs = append(errs, fmt.Errorf("--rate-burst: must not be negative"))
	}
	return append(errs, c.validateBodyRate()...)
}

// HTTPServer is the http.Server serving h with the configured timeouts
// and minimum body rate; serve and bench both build theirs here, so they
// cannot drift apart.
func (c *Config) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: c.withBodyRate(h), ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout,
		WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout}
}

// EnvOr is the environment variable name, or def when it is unset or empty.
func EnvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
