// Package store is contextd's one door to PostgreSQL. It owns the pool, the
// sqlc-generated queries (sealed in internal/store/internal/dbsqlc, so the
// compiler keeps everybody else out), the migrations, transactions and the
// translation of database errors into the kinds of package fault. Its
// methods take and return domain values; no pgx, pgtype or sqlc type leaves
// it.
//
// A transaction is a value (*Tx) handed to the code that runs in it; nothing
// travels in a context. InTx retries a whole transaction that PostgreSQL
// refused as a serialization failure or deadlock, or that lost its
// connection before COMMIT was sent, up to MaxRetries times; after that, or
// when COMMIT itself was lost (the outcome is unknown), the answer is
// fault.ErrUnavailable, which transports turn into 503 with Retry-After.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// MaxRetries is how many times a transaction is run again after a
// serialization failure, a deadlock or a connection lost before COMMIT.
const MaxRetries = 3

// Config is how the store connects. Zero values take the defaults below.
type Config struct {
	URL string
	// Logger, when set, hears what the store does on its own (its LISTEN
	// connections lost and back); nil: nothing is logged.
	Logger *slog.Logger
	// MaxConns is the pool's size (default 4 × cores, at least 8).
	MaxConns int32
	// AcquireTimeout is how long the pool may hand no connection to
	// anyone before a waiting request gets fault.ErrUnavailable instead of
	// waiting forever (0: 1 s; a client told 503 backs off, whereas requests
	// queued longer only pile up behind an exhausted pool). While the pool
	// hands connections out, requests queue (pool.go, at most MaxQueueWait).
	AcquireTimeout time.Duration
	// StatementTimeout bounds every statement on the server side (0: 30 s;
	// negative: none).
	StatementTimeout time.Duration
	// LockTimeout bounds the wait for a row lock (0: 10 s; negative: none).
	LockTimeout time.Duration
	// HealthCheckPeriod is how often idle connections are checked.
	HealthCheckPeriod time.Duration
	// Tracer, when set, makes a span of every SQL statement (trace.go).
	Tracer trace.TracerProvider
}

// Defaults of Config.
const (
	DefaultAcquireTimeout    = time.Second
	DefaultStatementTimeout  = 30 * time.Second
	DefaultLockTimeout       = 10 * time.Second
	DefaultHealthCheckPeriod = 30 * time.Second
)

// Store is the pool and the queries. Its embedded DB runs single
// statements on the pool; InTx and Snapshot run transactions.
type Store struct {
	DB
	pool    *pgxpool.Pool
	acquire time.Duration
	retries atomic.Int64
	// trips counts the round trips to PostgreSQL the store's statements
	// took (a pipeline is one, a COPY two): what RoundTrips reports.
	trips atomic.Int64
	// writes counts what committed transactions wrote (Stats).
	writes writeStats
	// sealer signs each transaction's entries (SealWith); nil: none.
	sealer atomic.Pointer[Sealer]
	url    string
	log    *slog.Logger
	// replica, when set, serves the reads of append-only history
	// (replica.go); nil: every read goes to this pool.
	replica atomic.Pointer[Replica]
}

// RoundTrips is how many round trips to PostgreSQL the store's statements
// have taken since the start: a pipeline of statements counts one, a COPY
// two. Tests hold the write and read paths to their budgets with it.
func (s *Store) RoundTrips() int64 { return s.trips.Load() }

// Open connects a pool as cfg says and checks that the server answers.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s, err := open(ctx, cfg, 0)
	if err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

// poolSize is the pool's size: cfg.MaxConns, else the URL's
// pool_max_conns, else 4 per core and at least 8. pgxpool's own default
// (max(4, cores)) is 4 on a 2-core machine: 8 agents would then wait for
// connections the database has to spare.
func poolSize(cfg Config) int32 {
	if cfg.MaxConns > 0 {
		return cfg.MaxConns
	}
	if strings.Contains(cfg.URL, "pool_max_conns") { // a URL or a keyword/value string
		if pc, err := pgxpool.ParseConfig(cfg.URL); err == nil {
			return pc.MaxConns
		}
	}
	return int32(max(8, 4*runtime.NumCPU()))
}

// open is Open without the check that the server answers (a replica may be
// down at start: OpenReplica), each new connection given up after
// connectTimeout unless the URL sets connect_timeout (0: the URL's).
func open(ctx context.Context, cfg Config, connectTimeout time.Duration) (*Store, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	pc.MaxConns = poolSize(cfg)
	pc.HealthCheckPeriod = orDefault(cfg.HealthCheckPeriod, DefaultHealthCheckPeriod)
	rp := pc.ConnConfig.RuntimeParams
	if d := orDefault(cfg.StatementTimeout, DefaultStatementTimeout); d > 0 {
		rp["statement_timeout"] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	if d := orDefault(cfg.LockTimeout, DefaultLockTimeout); d > 0 {
		rp["lock_timeout"] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	// JIT compilation off, unless the URL asks for it (?jit=on): it pays
	// off for long analytic scans, and contextd runs none. A batch's
	// statements over 10,000 keys are estimated costly enough to be
	// compiled, and compiling took ~105 ms of the row lock's 189 ms
	// (EXPLAIN ANALYZE of ItemLockCurrentMany; 33 ms without).
	if _, ok := rp["jit"]; !ok {
		rp["jit"] = "off"
	}
	if cfg.Tracer != nil {
		pc.ConnConfig.Tracer = sqlTracer{t: cfg.Tracer.Tracer("github.com/contextd/contextd/internal/store")}
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = connectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", interpret(err))
	}
	s := New(pool, orDefault(cfg.AcquireTimeout, DefaultAcquireTimeout))
	s.url = cfg.URL
	if cfg.Logger != nil {
		s.log = cfg.Logger
	}
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// New wraps an existing pool (the test harness hands out pools).
// acquireTimeout bounds the wait for a connection (0: the default).
func New(pool *pgxpool.Pool, acquireTimeout time.Duration) *Store {
	s := &Store{pool: pool, acquire: orDefault(acquireTimeout, DefaultAcquireTimeout), log: slog.New(slog.DiscardHandler)}
	s.DB = DB{ex: &poolExec{s: s}}
	return s
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that a pooled connection answers, with no new connection
// per call.
func (s *Store) Ping(ctx context.Context) error {
	return s.Probe(ctx, s.acquire)
}

// Probe is Ping waiting at most acquire (and never longer than the acquire
// timeout) for a connection: a readiness probe must say "cannot serve"
// when the pool is exhausted, not queue behind the requests it speaks for.
func (s *Store) Probe(ctx context.Context, acquire time.Duration) error {
	conn, err := s.connWithin(ctx, min(acquire, s.acquire))
	if err != nil {
		return err
	}
	defer conn.Release()
	if err := conn.Ping(ctx); err != nil {
		return interpret(err)
	}
	return nil
}

// Retries is how many transactions were run again since the start.
func (s *Store) Retries() int64 { return s.retries.Load() }

// conn takes a pooled connection for a request, in the queue (pool.go).
func (s *Store) conn(ctx context.Context) (*pgxpool.Conn, error) {
	return s.queue(ctx, s.acquire)
}

func (s *Store) connWithin(ctx context.Context, acquire time.Duration) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, acquire)
	defer cancel()
	c, err := s.pool.Acquire(actx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// Not wrapping err: a deadline reads as a lost connection to
			// interpret, which would make this retryable.
			return nil, &fault.UnavailableError{Reason: fmt.Sprintf("pool exhausted: no database connection free within %s", acquire)}
		}
		return nil, interpret(err)
	}
	return c, nil
}

// DB runs the store's queries on one executor: the pool (each statement on
// a connection of its own) or a transaction.
type DB struct {
	ex dbsqlc.DBTX
}

var q = dbsqlc.New()

// Tx is one transaction. Its DB runs the store's queries inside it.
type Tx struct {
	DB
	tc     *txConn
	conn   *pgxpool.Conn
	writes *writeStats
	seal   Sealer // nil: entries go unsealed
}
