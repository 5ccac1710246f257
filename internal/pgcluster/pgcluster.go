// Package pgcluster runs a PostgreSQL cluster that contextd manages itself in
// a data directory. It exists so that `contextd serve` works out of the box
// when no DATABASE_URL is given, and so that the test harness has a last
// resort when no server and no Docker engine are available. It drives the
// stock initdb and pg_ctl binaries rather than embedding PostgreSQL, so the
// cluster is an ordinary one that the usual tools can inspect.
//
// Layout of a data directory:
//
//	DataDir/pgdata        the cluster (initdb output), reused across starts
//	DataDir/postgres.log  the server log (pg_ctl -l), appended to on each start
//	DataDir/pgpass        the superuser's password (mode 0600, libpq's pgpass
//	                      format), generated on first use
//	DataDir/run           the unix socket directory (mode 0700), so the socket
//	                      never collides with a system server in
//	                      /var/run/postgresql and other users cannot reach it
//
// The server listens only on 127.0.0.1, on a port picked afresh at each start,
// and on the unix socket. It is meant to be contextd's private database, and
// its superuser can make admin agents, so every login on either must give
// its role's password (SCRAM-SHA-256): being on this machine is not enough.
// A cluster made by an earlier version, which trusted every local login, is
// converted on its next start (see auth.go).
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultDatabase is the database Start creates, so that contextd can
// connect to Cluster.URL(DefaultDatabase) right after Start returns.
const DefaultDatabase = "contextd"

// superuser is both the bootstrap role initdb creates and, when contextd runs
// as root, the OS user the server runs as: initdb and postgres refuse to run
// as root, and "postgres" is the account every packaged install creates.
const superuser = "postgres"

// startTimeout bounds how long pg_ctl waits for the server to come up; crash
// recovery after an unclean shutdown can take a while on a big cluster.
const startTimeout = 120 * time.Second

// Options configures Start.
type Options struct {
	// DataDir holds the cluster in DataDir/pgdata (created if absent) and is
	// reused on the next start, so data persists across restarts. When
	// running as root the server runs as the postgres user, which must be
	// able to traverse every parent of DataDir; Start creates DataDir with
	// mode 0755 and reports the first parent that blocks it.
	DataDir string
	// BinDir is the directory holding initdb and pg_ctl. If empty,
	// FindBinaries searches PATH and the usual install locations.
	BinDir string
	// Logf, if set, receives progress messages (initdb, start, reuse), which
	// matter because a first start takes a few seconds.
	Logf func(format string, args ...any)
}

// Cluster is a running server started (or found running) by Start.
type Cluster struct {
	root    string // Options.DataDir, absolute
	pgdata  string
	logPath string
	sockDir string
	binDir  string
	port    int
	logf    func(string, ...any)
	// asPostgres is non-nil when we run as root: the command prefix that
	// runs a program as the postgres user, and that user's ids for chown.
	asPostgres []string
	uid, gid   int
	reused     bool
	// password is the superuser's, from DataDir/pgpass.
	password string
}

// Start brings up the cluster in opts.DataDir and returns once it accepts
// connections and the DefaultDatabase exists. On first use it runs initdb
// (password authentication only, superuser postgres with a new random
// password, UTF8, locale C) into a scratch directory and renames it into
// place, so a crash mid-initdb never leaves a half-initialised pgdata behind.
// A cluster that still trusts local logins (made by an earlier version) is
// given a password and switched to password authentication first.
//
// If pgdata already holds a running server that answers on its recorded
// port, Start reuses it instead of failing: the server is detached from the
// contextd process (pg_ctl daemonises it), so after contextd crashes or is
// killed the server is still up, and restarting contextd must just work.
// A server that is running but does not answer is reported as an error
// rather than touched. Stop on a reused cluster stops the server as usual.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.DataDir == "" {
		return nil, errors.New("pgcluster: DataDir is required")
	}
	root, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: data dir: %w", err)
	}
	// pg_ctl embeds the data and log paths in a /bin/sh command line inside
	// double quotes; refuse paths it would mangle rather than fail obscurely.
	if strings.ContainsAny(root, "\"$`\\\n") {
		return nil, fmt.Errorf("pgcluster: data dir %q contains characters pg_ctl cannot quote", root)
	}
	binDir, err := FindBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		root:    root,
		pgdata:  filepath.Join(root, "pgdata"),
		logPath: filepath.Join(root, "postgres.log"),
		sockDir: filepath.Join(root, "run"),
		binDir:  binDir,
		logf:    opts.Logf,
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if os.Geteuid() == 0 {
		if err := c.setupRoot(); err != nil {
			return nil, err
		}
	}
	if err := c.prepareDirs(ctx); err != nil {
		return nil, err
	}
	if err := c.bringUp(ctx); err != nil {
		return nil, err
	}
	if err := c.EnsureDatabase(ctx, DefaultDatabase); err != nil {
		return nil, err
	}
	return c, nil
}

// bringUp makes the cluster if there is none, converts one that still
// trusts local logins, and starts it or adopts the server already running.
func (c *Cluster) bringUp(ctx context.Context) error {
	if err := c.initdb(ctx); err != nil {
		return err
	}
	trusts, err := c.hbaTrusts()
	if err != nil {
		return err
	}
	if err := c.loadPassword(trusts); err != nil {
		return err
	}
	reused, err := c.findRunning(ctx)
	if err != nil {
		return err
	}
	if c.reused = reused; reused {
		return c.secureRunning(ctx, trusts)
	}
	if trusts {
		if err := c.upgradeStopped(ctx); err != nil {
			return err
		}
	}
	return c.start(ctx)
}

// URL returns a postgres:// URL for database dbname on this cluster, in the
// form pgx and libpq accept, logging in as the superuser with its password:
// a secret, to be kept out of logs. TLS is off because the server only
// listens on loopback.
func (c *Cluster) URL(dbname string) string {
	return c.url(superuser, c.password, dbname)
}

// url is the URL for dbname that logs in as user with password (none if
// empty).
func (c *Cluster) url(user, password, dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(user, password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	if password == "" {
		u.User = url.User(user)
	}
	return u.String()
}

// Reused reports whether Start found the server already running rather
// than starting it. A short-lived command (agents create, migrate) stops
// only a server it started itself, never one a running contextd is using.
func (c *Cluster) Reused() bool { return c.reused }

// Port returns the TCP port the server listens on, which changes from one
// start to the next.
func (c *Cluster) Port() int { return c.port }

// DataDir returns the directory the cluster lives in (Options.DataDir, made
// absolute).
func (c *Cluster) DataDir() string { return c.root }

// EnsureDatabase creates database name if it does not exist yet. A fresh
// cluster only has the postgres database, and CREATE DATABASE has no IF NOT
// EXISTS, so this checks pg_database first and tolerates losing a race with
// a concurrent creator.
func (c *Cluster) EnsureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("pgcluster: look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil // duplicate_database / unique_violation: created concurrently
	}
	if err != nil {
		return fmt.Errorf("pgcluster: create database %s: %w", name, err)
	}
	c.logf("pgcluster: created database %s", name)
	return nil
}
