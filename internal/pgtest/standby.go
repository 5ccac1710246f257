package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/pgcluster"
	"github.com/contextd/contextd/internal/store"
)

// Standby is a throwaway primary cluster and a streaming hot standby of
// it, both from the local PostgreSQL binaries, for tests of the read
// replica. The shared test server cannot serve: it may refuse replication
// connections, and a test must be free to pause or stop its standby. Both
// listen on 127.0.0.1 only, trust local connections, and are removed at
// cleanup.
type Standby struct {
	// PrimaryURL and StandbyURL are the same migrated database, contextd,
	// on each.
	PrimaryURL, StandbyURL string

	bin         string
	dir         string
	standbyData string
	asPostgres  []string
}

// standbyDatabase is the database NewStandby migrates on the primary.
const standbyDatabase = "contextd"

// NewStandby starts a primary (wal_level replica), migrates a database on
// it, makes a standby with pg_basebackup -R and starts it, and stops both
// at t.Cleanup. Without the local binaries (or their postgres user, as
// root) the test fails, saying what is missing: a replica test that is
// skipped proves nothing.
func NewStandby(t testing.TB) *Standby {
	t.Helper()
	bin, err := pgcluster.FindBinaries("")
	if err != nil {
		t.Fatalf("pgtest: a standby needs the local PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup): %v", err)
	}
	s := &Standby{bin: bin}
	if os.Geteuid() == 0 {
		s.asPostgres = []string{"runuser", "-u", "postgres", "--"}
	}
	s.dir = s.tempDir(t)
	ports := freePorts(t, 2)
	primaryData := filepath.Join(s.dir, "primary")
	s.standbyData = filepath.Join(s.dir, "standby")
	t.Cleanup(func() {
		s.pgctl(context.Background(), s.standbyData, "stop", "-m", "immediate")
		s.pgctl(context.Background(), primaryData, "stop", "-m", "immediate")
		os.RemoveAll(s.dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.must(t, s.run(ctx, "initdb", "-D", primaryData, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"))
	s.must(t, s.appendConf(filepath.Join(primaryData, "postgresql.conf"), fmt.Sprintf(
		"listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\nwal_level = replica\nmax_wal_senders = 4\n"+
			"hot_standby = on\nfsync = off\nmax_connections = 60\n", ports[0], s.dir)))
	s.must(t, s.appendConf(filepath.Join(primaryData, "pg_hba.conf"), "host replication all 127.0.0.1/32 trust\n"))
	s.must(t, s.pgctl(ctx, primaryData, "start", "-w", "-l", filepath.Join(s.dir, "primary.log")))
	primary := func(db string) string {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", ports[0], db)
	}
	s.must(t, createDatabase(ctx, primary("postgres"), standbyDatabase))
	s.PrimaryURL = primary(standbyDatabase)
	s.must(t, store.MigrateUp(ctx, s.PrimaryURL))
	s.must(t, s.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(ports[0]), "-U", "postgres",
		"-D", s.standbyData, "-R", "-X", "stream", "-c", "fast", "--no-sync"))
	s.must(t, s.appendConf(filepath.Join(s.standbyData, "postgresql.auto.conf"), fmt.Sprintf("port = %d\n", ports[1])))
	s.StartStandby(t)
	s.StandbyURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", ports[1], standbyDatabase)
	return s
}

// StopStandby stops the standby at once (as a crash would).
func (s *Standby) StopStandby(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.must(t, s.pgctl(ctx, s.standbyData, "stop", "-m", "immediate"))
}

// StartStandby starts the standby and waits until it takes connections.
func (s *Standby) StartStandby(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.must(t, s.pgctl(ctx, s.standbyData, "start", "-w", "-l", filepath.Join(s.dir, "standby.log")))
}

// PauseReplay stops the standby replaying the primary's WAL
// (pg_wal_replay_pause), until ResumeReplay; it keeps answering reads with
// what it has replayed.
func (s *Standby) PauseReplay(t testing.TB) { s.standbyExec(t, "select pg_wal_replay_pause()") }

// ResumeReplay lets the standby replay again.
func (s *Standby) ResumeReplay(t testing.TB) { s.standbyExec(t, "select pg_wal_replay_resume()") }

// CatchUp waits until the standby has replayed all the primary has
// written so far.
func (s *Standby) CatchUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	primary, err := pgx.Connect(ctx, s.PrimaryURL)
	s.must(t, err)
	lsn, err := store.WrittenLSN(ctx, primary) // as the store compares it
	_ = primary.Close(context.WithoutCancel(ctx))
	s.must(t, err)
	for {
		var replayed int64
		s.must(t, queryRow(ctx, s.StandbyURL, "select (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint", &replayed))
		if replayed >= lsn {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pgtest: the standby did not replay up to byte %d within 30s", lsn)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// SwitchWAL ends the primary's WAL segment (pg_switch_wal): its insert
// position is then the next segment's start plus the page header, where no
// record ends.
func (s *Standby) SwitchWAL(t testing.TB) {
	t.Helper()
	var lsn string
	s.must(t, queryRow(context.Background(), s.PrimaryURL, "select pg_switch_wal()::text", &lsn))
}

func (s *Standby) standbyExec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.StandbyURL)
	s.must(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	s.must(t, err)
}

func (s *Standby) must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("pgtest: standby: %v (logs in %s)", err, s.dir)
	}
}

// tempDir is a directory the postgres user owns when we are root (the
// servers run as it).
func (s *Standby) tempDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "contextd-standby-")
	if err != nil {
		t.Fatalf("pgtest: temp dir: %v", err)
	}
	if s.asPostgres != nil {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root, PostgreSQL needs a postgres user to run as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("pgtest: chown %s: %v", dir, err)
		}
	}
	return dir
}

// run runs one of the binaries, as the postgres user when we are root.
func (s *Standby) run(ctx context.Context, name string, args ...string) error {
	argv := append(append(append([]string{}, s.asPostgres...), filepath.Join(s.bin, name)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (s *Standby) pgctl(ctx context.Context, data string, args ...string) error {
	return s.run(ctx, "pg_ctl", append([]string{"-D", data}, args...)...)
}

// appendConf appends to a file of the cluster as its owner would.
func (s *Standby) appendConf(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// freePorts are n ports of 127.0.0.1 free now.
func freePorts(t testing.TB, n int) []int {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("pgtest: free port: %v", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out
}

func createDatabase(ctx context.Context, url, name string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "create database "+pgx.Identifier{name}.Sanitize())
	return err
}

func queryRow(ctx context.Context, url, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql).Scan(dest...)
}
