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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
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

// ErrBinariesNotFound is returned (wrapped) by FindBinaries and Start when no
// initdb/pg_ctl can be found, so callers can fall back to another source of
// a database and tell the user what to install.
var ErrBinariesNotFound = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found")

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

// searchDirs returns the fixed install locations FindBinaries tries after
// PATH: Linux packages, a source install, then Homebrew, newest version
// first within each, so a machine with several versions consistently gets
// the newest one.
func searchDirs() []string {
	newestFirst := func(pattern string) []string {
		matches, _ := filepath.Glob(pattern)
		sort.SliceStable(matches, func(i, j int) bool {
			return versionLess(dirVersion(matches[j]), dirVersion(matches[i]))
		})
		return matches
	}
	dirs := newestFirst("/usr/lib/postgresql/*/bin")
	dirs = append(dirs, "/usr/local/pgsql/bin")
	return append(dirs, newestFirst("/opt/homebrew/opt/postgresql*/bin")...)
}

var versionRE = regexp.MustCompile(`[0-9]+(\.[0-9]+)*`)

// dirVersion extracts the version from a path such as
// /usr/lib/postgresql/15/bin or /opt/homebrew/opt/postgresql@16/bin.
func dirVersion(binDir string) []int {
	m := versionRE.FindString(filepath.Base(filepath.Dir(binDir)))
	var v []int
	for _, part := range strings.Split(m, ".") {
		if n, err := strconv.Atoi(part); err == nil {
			v = append(v, n)
		}
	}
	return v
}

func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

// hasBinaries reports whether dir holds both initdb and pg_ctl.
func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// FindBinaries returns the directory holding initdb and pg_ctl: binDir if
// given, else the first of PATH, the newest /usr/lib/postgresql/*/bin,
// /usr/local/pgsql/bin and the newest /opt/homebrew/opt/postgresql*/bin. Both
// binaries must come from one directory, because pg_ctl and initdb locate the
// matching postgres executable next to themselves. The error says what to
// install, since a missing server package is the usual cause.
func FindBinaries(binDir string) (string, error) {
	if binDir != "" {
		if hasBinaries(binDir) {
			return binDir, nil
		}
		return "", fmt.Errorf("%w in %s: point BinDir at the bin directory of a PostgreSQL server installation", ErrBinariesNotFound, binDir)
	}
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		// Prefer the real location behind a symlink such as
		// /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	candidates = append(candidates, searchDirs()...)
	for _, dir := range candidates {
		if hasBinaries(dir) {
			if abs, err := filepath.Abs(dir); err == nil {
				dir = abs
			}
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w on PATH or in /usr/lib/postgresql/*/bin, /usr/local/pgsql/bin, /opt/homebrew/opt/postgresql*/bin: "+
		"install them (Debian/Ubuntu: apt-get install postgresql; Fedora: dnf install postgresql-server; macOS: brew install postgresql@16), "+
		"or set DATABASE_URL to an existing database", ErrBinariesNotFound)
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

// setupRoot arranges for initdb, pg_ctl and the server to run as the
// postgres user, since all three refuse to run as root.
func (c *Cluster) setupRoot() error {
	u, err := user.Lookup(superuser)
	if err != nil {
		return fmt.Errorf("pgcluster: running as root, but PostgreSQL refuses to run as root and there is no %q user to run it as: %w", superuser, err)
	}
	if c.uid, err = strconv.Atoi(u.Uid); err != nil {
		return fmt.Errorf("pgcluster: uid of %s: %w", superuser, err)
	}
	if c.gid, err = strconv.Atoi(u.Gid); err != nil {
		return fmt.Errorf("pgcluster: gid of %s: %w", superuser, err)
	}
	if p, err := exec.LookPath("runuser"); err == nil {
		c.asPostgres = []string{p, "-u", superuser, "--"}
		return nil
	}
	if p, err := exec.LookPath("su"); err == nil {
		// su takes one shell command; command() quotes the arguments.
		c.asPostgres = []string{p, superuser, "-s", "/bin/sh", "-c"}
		return nil
	}
	return errors.New("pgcluster: running as root, but neither runuser nor su is available to run PostgreSQL as the postgres user")
}

// prepareDirs creates DataDir and the socket directory and, as root, hands
// the server's files to the postgres user. DataDir itself stays owned by
// the caller (contextd may keep other files there); it only needs to be
// traversable, so it is created 0755. The socket directory is 0700, also
// when an earlier version made it 0755, so that other users cannot even
// reach the socket.
func (c *Cluster) prepareDirs(ctx context.Context) error {
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		return fmt.Errorf("pgcluster: create data dir: %w", err)
	}
	if err := os.MkdirAll(c.sockDir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: create socket dir: %w", err)
	}
	if err := os.Chmod(c.sockDir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: restrict socket dir: %w", err)
	}
	// pg_ctl opens the log as the server user, which may not be able to
	// create files in DataDir, so create it here.
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("pgcluster: create log: %w", err)
	}
	f.Close()
	if c.asPostgres == nil {
		return nil
	}
	for _, p := range []string{c.sockDir, c.logPath} {
		if err := os.Chown(p, c.uid, c.gid); err != nil {
			return fmt.Errorf("pgcluster: chown %s to %s: %w", p, superuser, err)
		}
	}
	// Probe the exact permission question (ACLs and groups included)
	// instead of guessing from mode bits.
	if err := c.command(ctx, "", "/bin/sh", "-c", `test -x "$1" && test -w "$2"`, "sh", c.root, c.sockDir).Run(); err != nil {
		return fmt.Errorf("pgcluster: the %s user cannot reach %s (the server runs as %s when contextd runs as root): %s",
			superuser, c.root, superuser, traversalHint(c.root, c.uid, c.gid))
	}
	return nil
}

// traversalHint names the first directory on the way to dir that the given
// user probably cannot search, judging by mode bits.
func traversalHint(dir string, uid, gid int) string {
	var chain []string
	for d := dir; ; d = filepath.Dir(d) {
		chain = append([]string{d}, chain...)
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range chain {
		fi, err := os.Stat(d)
		if err != nil {
			continue
		}
		mode := fi.Mode().Perm()
		ok := mode&0o001 != 0
		if st, isUnix := statOwner(fi); isUnix {
			switch {
			case st.uid == uid:
				ok = mode&0o100 != 0
			case st.gid == gid:
				ok = mode&0o010 != 0
			}
		}
		if !ok {
			return fmt.Sprintf("make every parent directory traversable, e.g. chmod o+x %s", d)
		}
	}
	return "make every parent directory of the data dir traversable (chmod o+x)"
}

// command builds a command for one of the cluster's binaries (or, with an
// empty name, the program in args[0]), run as the postgres user when we are
// root. The working directory is DataDir because the postgres user may be
// unable to read the caller's (e.g. /root), which initdb complains about.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if name != "" {
		args = append([]string{filepath.Join(c.binDir, name)}, args...)
	}
	switch {
	case c.asPostgres == nil:
	case filepath.Base(c.asPostgres[0]) == "su":
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = shellQuote(a)
		}
		args = append(append([]string{}, c.asPostgres...), strings.Join(quoted, " "))
	default:
		args = append(append([]string{}, c.asPostgres...), args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = c.root
	return cmd
}

// run runs a binary and returns its combined output, which for initdb and
// pg_ctl carries the reason of any failure.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := c.command(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// initdb creates pgdata unless it already holds a cluster. It initialises a
// scratch directory and renames it into place so that an interrupted initdb
// is simply redone on the next start.
func (c *Cluster) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.pgdata, "PG_VERSION")); err == nil {
		return c.checkVersion(ctx)
	}
	if entries, err := os.ReadDir(c.pgdata); err == nil && len(entries) > 0 {
		return fmt.Errorf("pgcluster: %s exists but is not a PostgreSQL data directory (no PG_VERSION); move it away", c.pgdata)
	}
	if err := c.loadPassword(true); err != nil {
		return err
	}
	scratch := c.pgdata + ".initdb"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("pgcluster: remove leftover %s: %w", scratch, err)
	}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return fmt.Errorf("pgcluster: create %s: %w", scratch, err)
	}
	if c.asPostgres != nil {
		if err := os.Chown(scratch, c.uid, c.gid); err != nil {
			return fmt.Errorf("pgcluster: chown %s to %s: %w", scratch, superuser, err)
		}
	}
	c.logf("pgcluster: initialising a new PostgreSQL cluster in %s", c.pgdata)
	if err := c.runInitdb(ctx, scratch); err != nil {
		os.RemoveAll(scratch)
		return err
	}
	if err := os.Rename(scratch, c.pgdata); err != nil {
		return fmt.Errorf("pgcluster: move new cluster into place: %w", err)
	}
	return nil
}

// runInitdb initialises scratch with password authentication from the
// start, so the new cluster never trusts anyone. initdb reads the
// superuser's password from a file; it gets the SCRAM verifier rather
// than the password, and the file is removed right after.
func (c *Cluster) runInitdb(ctx context.Context, scratch string) error {
	verifier, err := scramVerifier(c.password)
	if err != nil {
		return err
	}
	pwfile := scratch + ".pw"
	if err := os.WriteFile(pwfile, []byte(verifier+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgcluster: write initdb password file: %w", err)
	}
	defer os.Remove(pwfile)
	if c.asPostgres != nil {
		if err := os.Chown(pwfile, c.uid, c.gid); err != nil {
			return fmt.Errorf("pgcluster: chown %s to %s: %w", pwfile, superuser, err)
		}
	}
	out, err := c.run(ctx, "initdb", "-D", scratch, "-U", superuser, "--pwfile="+pwfile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C")
	if err != nil {
		return fmt.Errorf("pgcluster: initdb: %w: %s", err, out)
	}
	return nil
}

var pgVersionRE = regexp.MustCompile(`\(PostgreSQL\) ([0-9]+)`)

// checkVersion fails early, with a clear message, when pgdata was created by
// another major version than the binaries: the server would refuse to start
// and only say so in its log.
func (c *Cluster) checkVersion(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(c.pgdata, "PG_VERSION"))
	if err != nil {
		return fmt.Errorf("pgcluster: read PG_VERSION: %w", err)
	}
	dataVersion := strings.TrimSpace(string(b))
	out, err := c.run(ctx, "pg_ctl", "--version")
	m := pgVersionRE.FindStringSubmatch(out)
	if err != nil || m == nil {
		return nil // unknown binary version: let the server decide
	}
	if m[1] != dataVersion {
		return fmt.Errorf("pgcluster: %s was created by PostgreSQL %s but the binaries in %s are PostgreSQL %s: "+
			"point BinDir at PostgreSQL %s binaries, or upgrade the cluster with pg_upgrade",
			c.pgdata, dataVersion, c.binDir, m[1], dataVersion)
	}
	return nil
}

// running reports whether pg_ctl sees a live postmaster for pgdata.
func (c *Cluster) running(ctx context.Context) (bool, error) {
	out, err := c.run(ctx, "pg_ctl", "status", "-D", c.pgdata)
	if err == nil {
		return true, nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		return false, nil // documented: "no server running"
	}
	return false, fmt.Errorf("pgcluster: pg_ctl status: %w: %s", err, out)
}

// findRunning detects a server already running on pgdata and, if it
// answers, adopts it (see Start for why reuse rather than failure).
func (c *Cluster) findRunning(ctx context.Context) (bool, error) {
	b, err := os.ReadFile(filepath.Join(c.pgdata, "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pgcluster: read postmaster.pid: %w", err)
	}
	up, err := c.running(ctx)
	if err != nil || !up {
		return false, err // a stale pid file: the postmaster discards it
	}
	// postmaster.pid lines: pid, data dir, start time, port, socket dir,
	// listen address, shared memory key, status.
	lines := strings.Split(string(b), "\n")
	port := 0
	if len(lines) > 3 {
		port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	if port == 0 {
		return false, fmt.Errorf("pgcluster: a server is already running in %s but its postmaster.pid has no port; stop it with: pg_ctl stop -D %s", c.pgdata, c.pgdata)
	}
	c.port = port
	// Poll rather than give up at once: the server may still be in crash
	// recovery, or the postmaster may have just died (a dead but not yet
	// reaped process still counts as running), in which case we start it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.ping(ctx)
		if err == nil {
			break
		}
		if isAuthError(err) {
			return false, c.authError(err)
		}
		if up, statusErr := c.running(ctx); statusErr == nil && !up {
			return false, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, fmt.Errorf("pgcluster: a server is already running in %s (pid %s) but does not accept connections on 127.0.0.1:%d; stop it with: pg_ctl stop -D %s: %w",
				c.pgdata, strings.TrimSpace(lines[0]), port, c.pgdata, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	c.logf("pgcluster: reusing the PostgreSQL server already running in %s on port %d", c.pgdata, port)
	return true, nil
}

// freePort asks the kernel for an unused loopback port. Another process may
// take it before the server binds it; start retries for that case.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// maxSocketPath is the usable length of sockaddr_un.sun_path on macOS (104)
// and Linux (108), less the terminating NUL.
const maxSocketPath = 103

// serverSettings are what the embedded cluster runs with beyond
// PostgreSQL's defaults, for contextd's work: append-only tables that grow
// without end (versions, records, packets, the audit chain) beside a few
// hot rows rewritten on every write (items, item_terms, the counters and
// heads). Migration 00008 sets the per-table thresholds; these are the
// server's side.
var serverSettings = []string{
	// Autovacuum on, whatever a system-wide template says: the reverse
	// lookup and the packet reads are index-only scans that need the
	// visibility map it keeps, and the hot rows need their dead versions
	// gone.
	"autovacuum=on",
	// Look every 15 s (not every minute), so that the hot rows are
	// vacuumed soon after they churn...
	"autovacuum_naptime=15s",
	// ...and let a worker do five times the default I/O between its naps,
	// so that vacuuming an append-only table of 100 million rows keeps up
	// with a steady stream of packets.
	"autovacuum_vacuum_cost_limit=1000",
	// Vacuum's and index builds' (migrations') memory.
	"maintenance_work_mem=128MB",
	// A 10,000-item batch of 500 B writes ~140 MB of WAL with its indexes: with the
	// default 1 GB, bulk imports force a checkpoint every few batches, and
	// each checkpoint makes the next writes log whole pages.
	"max_wal_size=4GB",
	// Whatever a system-wide template says: a password set in plain text
	// (ALTER ROLE ... PASSWORD 'x' in psql) is stored as a SCRAM verifier,
	// never as MD5, which pg_hba.conf's scram-sha-256 would not accept.
	"password_encryption=scram-sha-256",
}

// start launches the server with pg_ctl and waits until it accepts
// connections, retrying on a new port if the one picked got taken.
func (c *Cluster) start(ctx context.Context) error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.port = port
		sock := shellQuote(c.sockDir)
		if len(c.sockDir)+len("/.s.PGSQL.65535.lock") > maxSocketPath {
			c.logf("pgcluster: %s is too long for a unix socket path; the server listens on TCP only", c.sockDir)
			sock = "''"
		}
		postOpts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s", port, sock)
		for _, set := range serverSettings {
			postOpts += " -c " + set
		}
		logStart := fileSize(c.logPath)
		c.logf("pgcluster: starting PostgreSQL in %s on 127.0.0.1:%d (log: %s)", c.pgdata, port, c.logPath)
		out, err := c.run(ctx, "pg_ctl", "start", "-D", c.pgdata, "-l", c.logPath, "-w",
			"-t", strconv.Itoa(int(startTimeout.Seconds())), "-o", postOpts)
		if err != nil {
			logTail := readFrom(c.logPath, logStart)
			lastErr = fmt.Errorf("pgcluster: pg_ctl start: %w: %s\n%s", err, out, logTail)
			if strings.Contains(logTail, "already in use") {
				continue // lost the race for the port
			}
			return lastErr
		}
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = c.waitReady(waitCtx)
		cancel()
		if isAuthError(err) {
			return err // already says what to do
		}
		if err != nil {
			return fmt.Errorf("pgcluster: server started but does not accept connections on 127.0.0.1:%d: %w", port, err)
		}
		return nil
	}
	return lastErr
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the log written since offset (its last 4 KiB), which
// is where the server explains why it did not start.
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if size := fileSize(path); size-offset > 4096 {
		offset = size - 4096
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(bytes.TrimSpace(b))
}

// waitReady polls until the server accepts a connection: pg_ctl -w only
// waits for the postmaster to report readiness in its pid file, and a
// reused server may still be in crash recovery.
func (c *Cluster) waitReady(ctx context.Context) error {
	for {
		err := c.ping(ctx)
		if err == nil {
			return nil
		}
		if isAuthError(err) {
			return c.authError(err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) ping(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(c.URL("postgres"))
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = 2 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
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

// Stop shuts the server down with pg_ctl stop -m fast: open sessions are
// rolled back and disconnected, and the cluster is cleanly checkpointed so
// the next start needs no recovery. Stopping a server that is not running
// is not an error, so Stop is safe to call twice.
func (c *Cluster) Stop(ctx context.Context) error {
	up, err := c.running(ctx)
	if err != nil || !up {
		return err
	}
	c.logf("pgcluster: stopping PostgreSQL in %s", c.pgdata)
	if out, err := c.run(ctx, "pg_ctl", "stop", "-D", c.pgdata, "-m", "fast", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("pgcluster: pg_ctl stop: %w: %s", err, out)
	}
	return nil
}
