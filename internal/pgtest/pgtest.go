// Package pgtest gives each test a PostgreSQL database of its own, so tests
// can run in parallel (t.Parallel, and `go test ./...` running packages in
// parallel processes) without seeing each other's rows.
//
// Every test database is cloned with CREATE DATABASE ... TEMPLATE from a
// template that holds the migrated schema. Cloning copies files and takes
// milliseconds, whereas migrating each database would cost a full migration
// run per test. The template is named after store.MigrationsHash(), so editing a
// migration yields a new template instead of a stale schema, and it is built
// once per server, by whichever test process gets there first.
//
// The server is found once per test binary, trying in order:
//
//  1. TEST_DATABASE_URL, if set (and then only it: an explicit choice that
//     does not work is an error, not a reason to quietly test elsewhere);
//  2. the libpq defaults: the PGHOST, PGPORT, PGUSER, PGDATABASE and
//     PGPASSWORD variables if any is set, else postgres@127.0.0.1:5432;
//  3. a postgres:16-alpine container via testcontainers, if a Docker engine
//     answers;
//  4. a throwaway cluster from local PostgreSQL binaries (internal/pgcluster)
//     in a temporary directory.
//
// The role used needs CREATEDB (a superuser is simplest). Databases are
// dropped at test cleanup; a test process that is killed leaves its
// contextd_test_* databases behind, and templates of old migration hashes
// (contextd_tmpl_*) are never dropped, since another checkout may still use
// them.
//
// Packages that use pgtest should call Main from TestMain, so the container
// or throwaway cluster of paths 3 and 4 is stopped when the tests end:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Without it a container is still removed by the testcontainers reaper, but
// a throwaway cluster keeps running (a warning on stderr says how to stop it).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/contextd/contextd/internal/pgcluster"
	"github.com/contextd/contextd/internal/store"
)

// templateLockKey is the pg_advisory_lock key that serialises template
// builds across test processes sharing a server ("contextd" in ASCII).
const templateLockKey int64 = 0x636f6e7465787464

// libpqVars are the variables that make path 2 use pgconn's libpq-style
// defaults instead of postgres@127.0.0.1:5432.
var libpqVars = []string{"PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSWORD"}

// harness is the per-test-binary state. It is written only inside once (and
// mainUsed only by Main, before any test runs).
type harness struct {
	once     sync.Once
	srv      *server
	err      error
	mainUsed bool
}

var h harness

// server is a PostgreSQL server tests get databases on.
type server struct {
	desc    string                 // where it came from, for logs
	dbURL   func(db string) string // the URL of one of its databases
	admin   *pgxpool.Pool          // for CREATE/DROP DATABASE; never on a template
	adminDB string                 // connection string of the admin database
	stop    func()                 // tears down a server we started; nil otherwise

	tmplOnce sync.Once
	tmpl     string
	tmplErr  error
}

// Main runs the tests and then stops the container or throwaway cluster
// started for them, since a test binary has no other hook that runs after
// all tests. Call it from TestMain; when TestMain returns, the testing
// package exits with m.Run's result.
func Main(m *testing.M) {
	h.mainUsed = true
	m.Run()
	if h.srv != nil {
		h.srv.close()
	}
}

// New returns a pgxpool.Pool on a fresh database of its own, cloned from a
// migrated template, dropped at t.Cleanup (after the pool is closed).
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := NewURL(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("pgtest: open pool: %v", err)
	}
	// Registered after NewURL's drop, so it runs before it.
	t.Cleanup(pool.Close)
	return pool
}

// NewURL is like New but returns the database URL, for code that opens its
// own connections (a server under test, migration tests).
func NewURL(t testing.TB) string {
	t.Helper()
	return get(t).newDatabase(t, true)
}

// Empty returns the URL of a fresh, empty (unmigrated) database, dropped at
// cleanup, for testing migrations themselves.
func Empty(t testing.TB) string {
	t.Helper()
	return get(t).newDatabase(t, false)
}

// get returns the server for this test binary, finding it on first use.
func get(t testing.TB) *server {
	t.Helper()
	h.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		h.srv, h.err = discover(ctx)
		if h.err == nil && h.srv.stop != nil && !h.mainUsed {
			fmt.Fprintf(os.Stderr, "pgtest: using %s; pgtest.Main is not called from TestMain, so it is not stopped after the tests\n", h.srv.desc)
		}
	})
	if h.err != nil {
		t.Fatalf("pgtest: %v", h.err)
	}
	return h.srv
}

// discover tries the four sources of a server in order (see the package
// documentation) and, if all fail, says what was tried and how to fix it.
func discover(ctx context.Context) (*server, error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		s, err := connect(ctx, u, "TEST_DATABASE_URL", 10*time.Second)
		if err != nil {
			return nil, fmt.Errorf("TEST_DATABASE_URL is set but unusable (unset it to let pgtest find a server): %w", err)
		}
		return s, nil
	}
	tried := []string{"TEST_DATABASE_URL: not set"}

	connStr, desc := libpqDefaults()
	s, err := connect(ctx, connStr, desc, 2*time.Second)
	if err == nil {
		return s, nil
	}
	tried = append(tried, fmt.Sprintf("%s: %v", desc, err))

	if err := dockerHealthy(ctx); err != nil {
		tried = append(tried, fmt.Sprintf("Docker (testcontainers): no engine answers: %v", err))
	} else if s, err := startContainer(ctx); err != nil {
		tried = append(tried, fmt.Sprintf("Docker (testcontainers): %v", err))
	} else {
		return s, nil
	}

	s, err = startLocalCluster(ctx)
	if err == nil {
		return s, nil
	}
	tried = append(tried, fmt.Sprintf("local PostgreSQL binaries (throwaway cluster): %v", err))

	return nil, fmt.Errorf("no PostgreSQL server for tests. Tried:\n  - %s\n"+
		"Do one of: set TEST_DATABASE_URL=postgres://USER@HOST:PORT/DB (a role with CREATEDB); "+
		"start a local PostgreSQL that accepts postgres@127.0.0.1:5432, or point PGHOST/PGPORT/PGUSER at one; "+
		"install the PostgreSQL server binaries (Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql@16); "+
		"or start Docker", strings.Join(tried, "\n  - "))
}

// libpqDefaults returns the connection string and description for path 2.
// With PG* variables set, the empty connection string makes pgconn apply
// them exactly as libpq would.
func libpqDefaults() (connStr, desc string) {
	var set []string
	for _, k := range libpqVars {
		if v := os.Getenv(k); v != "" {
			if k == "PGPASSWORD" {
				v = "***"
			}
			set = append(set, k+"="+v)
		}
	}
	if len(set) > 0 {
		return "", "the server named by " + strings.Join(set, " ")
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "a local server at postgres@127.0.0.1:5432"
}

// connect checks that connStr reaches a server within timeout and returns
// it as a server whose admin database is the one connStr names.
func connect(ctx context.Context, connStr, desc string, timeout time.Duration) (*server, error) {
	dbURL, err := urlMaker(connStr)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(connStr)
	if err != nil {
		return nil, fmt.Errorf("parse connection string: %w", err)
	}
	// timeout bounds the first ping below; later admin connections may be
	// slower under the load of many parallel tests.
	cfg.ConnConfig.ConnectTimeout = max(timeout, 10*time.Second)
	cfg.MaxConns = 4 // CREATE/DROP DATABASE only; keep clear of max_connections
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &server{desc: desc, dbURL: dbURL, admin: pool, adminDB: connStr}, nil
}

// urlMaker returns a function giving the URL of another database on the
// server connStr points at. URLs are edited in place so every parameter
// survives. Keyword/value strings and the empty (PG* environment) string
// are rebuilt as URLs from the parsed settings; what a URL cannot carry
// from them (TLS details) is again taken from the same PG* environment when
// the URL is parsed, by this process or a child that inherits it.
func urlMaker(connStr string) (func(string) string, error) {
	cfg, err := pgconn.ParseConfig(connStr)
	if err != nil {
		return nil, fmt.Errorf("parse connection string: %w", err)
	}
	base := &url.URL{Scheme: "postgres"}
	if strings.HasPrefix(connStr, "postgres://") || strings.HasPrefix(connStr, "postgresql://") {
		if base, err = url.Parse(connStr); err != nil {
			return nil, fmt.Errorf("parse connection URL: %w", err)
		}
	} else {
		base.User = url.User(cfg.User)
		if cfg.Password != "" {
			base.User = url.UserPassword(cfg.User, cfg.Password)
		}
		q := url.Values{}
		port := strconv.Itoa(int(cfg.Port))
		if strings.HasPrefix(cfg.Host, "/") { // a unix socket directory
			q.Set("host", cfg.Host)
			q.Set("port", port)
		} else {
			base.Host = net.JoinHostPort(cfg.Host, port)
		}
		if cfg.TLSConfig == nil {
			q.Set("sslmode", "disable")
		}
		for k, v := range cfg.RuntimeParams {
			q.Set(k, v)
		}
		base.RawQuery = q.Encode()
	}
	return func(db string) string {
		u := *base
		u.Path, u.RawPath = "/"+db, ""
		return u.String()
	}, nil
}

// dockerHealthy asks testcontainers whether a Docker engine answers, rather
// than looking for a docker binary: the client is often installed with no
// daemon running. testcontainers panics on some broken setups, which here
// just means "no".
func dockerHealthy(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers: %v", r)
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return p.Health(ctx) // also closes p
}

// startContainer runs a postgres:16-alpine container (fsync off, as the
// module configures it) for path 3.
func startContainer(ctx context.Context) (*server, error) {
	c, err := tcpostgres.Run(ctx, "postgres:16-alpine",
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("start container: %w", err)
	}
	connStr, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("container address: %w", err)
	}
	s, err := connect(ctx, connStr, "a testcontainers postgres:16-alpine container", 30*time.Second)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, err
	}
	s.stop = func() { _ = testcontainers.TerminateContainer(c) }
	return s, nil
}

// startLocalCluster initialises and starts a cluster in a new temporary
// directory for path 4; its stop function stops the server and removes the
// directory.
func startLocalCluster(ctx context.Context) (*server, error) {
	if _, err := pgcluster.FindBinaries(""); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "contextd-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	// MkdirTemp makes it 0700; when we are root the server runs as the
	// postgres user, which must be able to enter it.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop throwaway cluster: %v (data dir %s left in place)\n", err, dir)
			return
		}
		os.RemoveAll(dir)
	}
	s, err := connect(ctx, c.URL("postgres"), "a throwaway cluster in "+dir+" (stop it with: pg_ctl stop -D "+dir+"/pgdata)", 10*time.Second)
	if err != nil {
		stop()
		return nil, err
	}
	s.stop = stop
	return s, nil
}

// close releases the admin pool and tears down a server we started.
func (s *server) close() {
	s.admin.Close()
	if s.stop != nil {
		s.stop()
	}
}

// template returns the name of the migrated template for the current
// migrations, building it on first use in this process.
func (s *server) template(ctx context.Context) (string, error) {
	s.tmplOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		name := "contextd_tmpl_" + store.MigrationsHash()[:16]
		s.tmplErr = s.ensureTemplate(ctx, name)
		s.tmpl = name
	})
	return s.tmpl, s.tmplErr
}

// ensureTemplate makes sure database name exists as a complete, migrated
// template. A template is complete once it is marked IS_TEMPLATE, which
// happens only after the migrations succeeded; one that exists unmarked
// was left by a build that crashed and is rebuilt. Builds are serialised by
// an advisory lock, held on a connection of its own so it is released even
// if this process dies mid-build. The finished template also refuses
// connections, because CREATE DATABASE ... TEMPLATE fails while anyone is
// connected to it.
func (s *server) ensureTemplate(ctx context.Context, name string) error {
	if ready, _, err := s.templateState(ctx, name); err != nil || ready {
		return err
	}
	lockConn, err := pgx.Connect(ctx, s.adminDB)
	if err != nil {
		return fmt.Errorf("template %s: connect: %w", name, err)
	}
	defer lockConn.Close(context.WithoutCancel(ctx)) // releases the lock
	if _, err := lockConn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return fmt.Errorf("template %s: lock: %w", name, err)
	}
	ready, exists, err := s.templateState(ctx, name)
	if err != nil || ready {
		return err // built by another process while we waited
	}
	ident := pgx.Identifier{name}.Sanitize()
	if exists {
		if _, err := s.admin.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("template %s: drop half-built: %w", name, err)
		}
	}
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		return fmt.Errorf("template %s: create: %w", name, err)
	}
	if err := store.MigrateUp(ctx, s.dbURL(name)); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	if _, err := s.admin.Exec(ctx, "ALTER DATABASE "+ident+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("template %s: mark complete: %w", name, err)
	}
	return nil
}

// templateState reports whether database name exists and whether it is a
// completed template.
func (s *server) templateState(ctx context.Context, name string) (ready, exists bool, err error) {
	err = s.admin.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("template %s: look up: %w", name, err)
	}
	return ready, true, nil
}

// newDatabase creates a database for t, cloned from the migrated template
// or, if !migrated, from the pristine template0, and drops it at cleanup.
func (s *server) newDatabase(t testing.TB, migrated bool) string {
	t.Helper()
	t.Logf("pgtest: using %s", s.desc)
	ctx := t.Context()
	source := "template0"
	if migrated {
		var err error
		if source, err = s.template(ctx); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	name := "contextd_test_" + randomHex(8)
	if err := s.createDatabase(ctx, name, source); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return s.dbURL(name)
}

// createDatabase clones source into a new database name. PostgreSQL
// refuses to copy a database while other sessions are connected to it
// (SQLSTATE 55006, after waiting 5s itself), which can briefly happen just
// after the template was built, so it retries for a while.
func (s *server) createDatabase(ctx context.Context, name, source string) error {
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{source}.Sanitize()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.admin.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("create database %s from %s: %w", name, source, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create database %s from %s: %w", name, source, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// AcquireTimeout is the acquire timeout of the stores tests drive services
// with. A test database's pool is pgxpool's default (4 connections on a
// two-core machine, half of what serve opens), and under -race on a loaded
// machine a request of a concurrency test may queue for a connection past
// store.DefaultAcquireTimeout (1 s) with nothing wrong: those tests are of
// locking, not of the deadline, which tests of its own set themselves.
const AcquireTimeout = 10 * time.Second

// NewStore is New wrapped in a store, for tests that drive services.
func NewStore(t testing.TB) *store.Store { return store.New(New(t), AcquireTimeout) }
