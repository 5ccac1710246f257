package pgcluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// dataDir returns a fresh directory for a cluster. t.TempDir creates its
// directories 0700, which the postgres user (the server runs as postgres
// when the tests run as root) cannot traverse, so open them up.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir() // <TMPDIR>/<TestName><random>/<NNN>
	for _, d := range []string{filepath.Dir(dir), dir} {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	return filepath.Join(dir, "data")
}

func TestFindBinariesNotFound(t *testing.T) {
	_, err := FindBinaries(t.TempDir())
	require.ErrorIs(t, err, ErrBinariesNotFound)

	t.Setenv("PATH", t.TempDir())
	if _, err := FindBinaries(""); err != nil {
		require.ErrorIs(t, err, ErrBinariesNotFound)
		require.Contains(t, err.Error(), "apt-get install postgresql")
	}
}

func TestStartStopRestart(t *testing.T) {
	if _, err := FindBinaries(""); err != nil {
		t.Fatalf("this test needs PostgreSQL server binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := dataDir(t)
	opts := Options{DataDir: dir, Logf: t.Logf}

	c, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	require.FileExists(t, filepath.Join(dir, "pgdata", "PG_VERSION"))
	require.FileExists(t, filepath.Join(dir, "postgres.log"))
	require.NoDirExists(t, filepath.Join(dir, "pgdata.initdb"))

	conn, err := pgx.Connect(ctx, c.URL(DefaultDatabase))
	require.NoError(t, err, "Start must create the %s database", DefaultDatabase)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')")
	require.NoError(t, err)
	var sock string
	require.NoError(t, conn.QueryRow(ctx, "SHOW unix_socket_directories").Scan(&sock))
	require.Equal(t, filepath.Join(dir, "run"), sock, "the socket must not go to the system directory")
	for name, want := range map[string]string{"autovacuum": "on", "autovacuum_naptime": "15s",
		"autovacuum_vacuum_cost_limit": "1000", "maintenance_work_mem": "128MB", "max_wal_size": "4GB"} {
		var got string
		require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got))
		require.Equal(t, want, got, "the embedded cluster's %s", name)
	}
	require.NoError(t, conn.Close(ctx))

	require.NoError(t, c.EnsureDatabase(ctx, "other"))
	require.NoError(t, c.EnsureDatabase(ctx, "other"), "EnsureDatabase must be idempotent")

	// A second Start while the server runs adopts it.
	again, err := Start(ctx, opts)
	require.NoError(t, err)
	require.Equal(t, c.Port(), again.Port())

	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx), "stopping a stopped cluster is not an error")
	_, err = pgx.Connect(ctx, c.URL(DefaultDatabase))
	require.Error(t, err, "server still answers after Stop")

	// Restart on the same data dir: no initdb, the data is still there.
	c2, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Stop(context.Background()) })
	conn, err = pgx.Connect(ctx, c2.URL(DefaultDatabase))
	require.NoError(t, err)
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "hello", v)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, c2.Stop(ctx))
}

func TestStartRejectsForeignDirectory(t *testing.T) {
	if _, err := FindBinaries(""); err != nil {
		t.Fatalf("this test needs PostgreSQL server binaries: %v", err)
	}
	dir := dataDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "pgdata"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pgdata", "junk"), nil, 0o600))

	if os.Geteuid() == 0 {
		// As root the server runs as postgres, which cannot enter a 0700
		// root-owned data dir: Start must name the directory to fix.
		_, err := Start(t.Context(), Options{DataDir: dir})
		require.ErrorContains(t, err, "chmod o+x "+dir)
		require.NoError(t, os.Chmod(dir, 0o755))
	}

	_, err := Start(t.Context(), Options{DataDir: dir})
	require.ErrorContains(t, err, "not a PostgreSQL data directory")
	require.False(t, errors.Is(err, ErrBinariesNotFound))
}

func TestSearchDirsNewestFirst(t *testing.T) {
	require.True(t, versionLess(dirVersion("/usr/lib/postgresql/9.6/bin"), dirVersion("/usr/lib/postgresql/15/bin")))
	require.True(t, versionLess(dirVersion("/opt/homebrew/opt/postgresql@14/bin"), dirVersion("/opt/homebrew/opt/postgresql@16/bin")))
	require.False(t, versionLess(dirVersion("/usr/lib/postgresql/16/bin"), dirVersion("/usr/lib/postgresql/16/bin")))
}

// TestRunAsPostgres checks both ways of running a program as the postgres
// user when root: runuser (used whenever present) and the su fallback,
// whose single shell command must survive awkward arguments.
func TestRunAsPostgres(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: programs run as the current user, nothing to check")
		return
	}
	c := &Cluster{root: dataDir(t)}
	require.NoError(t, os.MkdirAll(c.root, 0o755))
	require.NoError(t, c.setupRoot())
	prefixes := [][]string{c.asPostgres}
	if su, err := exec.LookPath("su"); err == nil {
		prefixes = append(prefixes, []string{su, superuser, "-s", "/bin/sh", "-c"})
	}
	for _, prefix := range prefixes {
		c.asPostgres = prefix
		out, err := c.run(t.Context(), "", "/bin/sh", "-c", `id -un; echo "$1"`, "sh", `it's "quoted" $HOME`)
		require.NoError(t, err, out)
		require.Equal(t, "postgres\nit's \"quoted\" $HOME", out, prefix[0])
	}
}

// TestStartAfterCrash kills the postmaster outright: the next Start must see
// through the stale postmaster.pid and start the server again (after crash
// recovery) instead of reporting a running server.
func TestStartAfterCrash(t *testing.T) {
	if _, err := FindBinaries(""); err != nil {
		t.Fatalf("this test needs PostgreSQL server binaries: %v", err)
	}
	dir := dataDir(t)
	c, err := Start(t.Context(), Options{DataDir: dir, Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	b, err := os.ReadFile(filepath.Join(dir, "pgdata", "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	require.NoError(t, err)
	p, err := os.FindProcess(pid)
	require.NoError(t, err)
	require.NoError(t, p.Kill())

	c2, err := Start(t.Context(), Options{DataDir: dir, Logf: t.Logf})
	require.NoError(t, err)
	require.NotEqual(t, c.Port(), c2.Port(), "the killed server was reused")
	conn, err := pgx.Connect(t.Context(), c2.URL(DefaultDatabase))
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	require.NoError(t, c2.Stop(t.Context()))
}
