package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

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
