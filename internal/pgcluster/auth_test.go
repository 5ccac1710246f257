package pgcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// connectNoPassword connects to connStr with no password at all: not the
// URL's, not PGPASSWORD's, not a ~/.pgpass entry's.
func connectNoPassword(ctx context.Context, connStr string) error {
	cfg, err := pgx.ParseConfig(connStr)
	if err != nil {
		return err
	}
	cfg.Password = ""
	cfg.ConnectTimeout = 5 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(ctx)
	}
	return err
}

// requireRefused asserts that the server refused a login for want of a
// password (not, say, because it was down).
func requireRefused(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, "%s: logged in without a password", what)
	require.True(t, isAuthError(err), "%s: not an authentication error: %v", what, err)
	require.Contains(t, err.Error(), "password", what)
}

// socketConnStr is a libpq keyword/value string for the unix socket in dir.
func socketConnStr(dir string, port int, user, password string) string {
	s := fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", dir, port, user)
	if password != "" {
		s += " password=" + password
	}
	return s
}

func requirePerm(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, want, fi.Mode().Perm(), "mode of %s", path)
}

// requireOnlyPasswords checks a running cluster end to end: the password
// file and socket directory modes, and that the superuser gets in on TCP
// and on the socket with the password only.
func requireOnlyPasswords(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	requirePerm(t, filepath.Join(c.DataDir(), PasswordFile), 0o600)
	requirePerm(t, c.sockDir, 0o700)
	trusts, err := c.hbaTrusts()
	require.NoError(t, err)
	require.False(t, trusts, "pg_hba.conf still trusts")

	requireRefused(t, connectNoPassword(ctx, c.URL("postgres")), "TCP")
	requireRefused(t, connectNoPassword(ctx, socketConnStr(c.sockDir, c.Port(), superuser, "")), "unix socket")
	conn, err := pgx.Connect(ctx, socketConnStr(c.sockDir, c.Port(), superuser, c.password))
	require.NoError(t, err, "the password must work on the socket")
	require.NoError(t, conn.Close(ctx))
	conn, err = pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err, "the password must work on TCP")
	var enc string
	require.NoError(t, conn.QueryRow(ctx, "SHOW password_encryption").Scan(&enc))
	require.Equal(t, "scram-sha-256", enc)
	require.NoError(t, conn.Close(ctx))
}

// TestPasswordAuthentication: a new cluster takes only password logins,
// from this user and from another OS user, and contextd's own logins get
// passwords too.
func TestPasswordAuthentication(t *testing.T) {
	t.Parallel()
	if _, err := FindBinaries(""); err != nil {
		t.Fatalf("this test needs PostgreSQL server binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{DataDir: dataDir(t), Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	require.NoDirExists(t, c.pgdata+".initdb")
	require.NoFileExists(t, c.pgdata+".initdb.pw", "initdb's password file must go")

	t.Run("superuser", func(t *testing.T) { requireOnlyPasswords(ctx, t, c) })
	t.Run("pgpass file works with psql", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "psql"), "-w", "-X", "-At",
			"-h", "127.0.0.1", "-p", fmt.Sprint(c.Port()), "-U", superuser, "-d", DefaultDatabase, "-c", "select 1")
		cmd.Env = append(os.Environ(), "PGPASSWORD=", "PGPASSFILE="+filepath.Join(c.DataDir(), PasswordFile))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Equal(t, "1", strings.TrimSpace(string(out)))
	})
	t.Run("other OS user", func(t *testing.T) { testOtherUser(ctx, t, c) })
	t.Run("contextd's own login", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "CREATE ROLE login_under_test LOGIN")
		require.NoError(t, err)
		require.NoError(t, conn.Close(ctx))
		requireLoginURL(ctx, t, c, "login_under_test")
	})
}

// requireLoginURL checks LoginURL on an existing role: its URL logs in, the
// same URL comes back on the next call, and no password means no login.
func requireLoginURL(ctx context.Context, t *testing.T, c *Cluster, login string) {
	t.Helper()
	u, err := c.LoginURL(ctx, login, DefaultDatabase)
	require.NoError(t, err)
	require.NotContains(t, u, c.password, "a login's password is not the superuser's")
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	var user string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_user::text").Scan(&user))
	require.Equal(t, login, user)
	require.NoError(t, conn.Close(ctx))
	again, err := c.LoginURL(ctx, login, DefaultDatabase)
	require.NoError(t, err)
	require.Equal(t, u, again, "the password is derived, the same on every call")
	requireRefused(t, connectNoPassword(ctx, u), login+" on TCP")
}

// testOtherUser runs psql as another OS user (nobody), with no password,
// on TCP and on the socket: both must fail. That needs root; as another
// user the test checks what it can see instead, and says so: the socket
// directory is ours and 0700, and psql without a password fails.
func testOtherUser(ctx context.Context, t *testing.T, c *Cluster) {
	psql := func(host, password string) (string, error) {
		args := []string{filepath.Join(c.binDir, "psql"), "-w", "-X", "-At",
			"-h", host, "-p", fmt.Sprint(c.Port()), "-U", superuser, "-d", "postgres", "-c", "select 1"}
		if os.Geteuid() == 0 {
			args = append([]string{"runuser", "-u", "nobody", "--"}, args...)
		}
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "HOME=/nonexistent",
			"PGPASSWORD=" + password, "PGPASSFILE=/nonexistent/pgpass"}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if os.Geteuid() != 0 {
		t.Log("not root: cannot run psql as another OS user; checking that the socket directory is ours and 0700, and that psql needs the password")
		fi, err := os.Stat(c.sockDir)
		require.NoError(t, err)
		st, ok := statOwner(fi)
		require.True(t, ok)
		require.Equal(t, os.Geteuid(), st.uid, "the socket directory must be the server user's")
		requirePerm(t, c.sockDir, 0o700)
	}
	out, err := psql("127.0.0.1", "")
	require.Error(t, err, "psql on TCP without a password got in: %s", out)
	require.Contains(t, out, "password", "TCP")
	out, err = psql(c.sockDir, "")
	require.Error(t, err, "psql on the socket without a password got in: %s", out)
	// The same psql with the password proves the refusals were about it.
	out, err = psql("127.0.0.1", c.password)
	require.NoError(t, err, out)
	require.Equal(t, "1", out)
	if os.Geteuid() == 0 {
		out, err = psql(c.sockDir, c.password)
		require.Error(t, err, "nobody reached the socket in the 0700 directory: %s", out)
		require.Contains(t, out, "Permission denied")
	}
}

// startOldStyle makes a cluster as contextd did before passwords
// (initdb --auth=trust, a 0755 socket directory, no password file), starts
// it as that version did, and fills it as that version's server would
// have: the contextd database with a table, and the server's login without
// a password. The cluster is left running.
func startOldStyle(ctx context.Context, t *testing.T, dir string) *Cluster {
	t.Helper()
	binDir, err := FindBinaries("")
	require.NoError(t, err)
	c := &Cluster{root: dir, pgdata: filepath.Join(dir, "pgdata"), logPath: filepath.Join(dir, "postgres.log"),
		sockDir: filepath.Join(dir, "run"), binDir: binDir, logf: t.Logf}
	if os.Geteuid() == 0 {
		require.NoError(t, c.setupRoot())
	}
	for _, d := range []string{c.root, c.sockDir} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.Chmod(d, 0o755))
	}
	require.NoError(t, os.Mkdir(c.pgdata, 0o700))
	require.NoError(t, os.WriteFile(c.logPath, nil, 0o600))
	if c.asPostgres != nil {
		for _, p := range []string{c.sockDir, c.logPath, c.pgdata} {
			require.NoError(t, os.Chown(p, c.uid, c.gid))
		}
	}
	out, err := c.run(ctx, "initdb", "-D", c.pgdata, "-U", superuser, "--auth=trust", "--encoding=UTF8", "--locale=C")
	require.NoError(t, err, out)
	c.port, err = freePort()
	require.NoError(t, err)
	out, err = c.run(ctx, "pg_ctl", "start", "-D", c.pgdata, "-l", c.logPath, "-w", "-o",
		fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s", c.port, shellQuote(c.sockDir)))
	require.NoError(t, err, out)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	require.NoError(t, connectNoPassword(ctx, c.URL("postgres")), "the old way trusts")
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+DefaultDatabase)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE ROLE old_server_login LOGIN")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	conn, err = pgx.Connect(ctx, c.URL(DefaultDatabase))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('from before')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	require.NoFileExists(t, filepath.Join(dir, PasswordFile))
	return c
}

// requireKept checks that the table startOldStyle made survived.
func requireKept(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL(DefaultDatabase))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "from before", v)
}

// TestUpgradeStoppedTrustCluster: a data directory of an earlier version,
// its server stopped, is converted by the next Start (in single-user mode),
// keeps its data, and then restarts like any other; a password file that
// is lost or open to others stops Start with what to do.
func TestUpgradeStoppedTrustCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := dataDir(t)
	old := startOldStyle(ctx, t, dir)
	require.NoError(t, old.Stop(ctx))

	opts := Options{DataDir: dir, Logf: t.Logf}
	c, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	require.False(t, c.Reused())
	requireOnlyPasswords(ctx, t, c)
	requireKept(ctx, t, c)
	requireLoginURL(ctx, t, c, "old_server_login")
	pgpass, err := os.ReadFile(filepath.Join(dir, PasswordFile))
	require.NoError(t, err)

	// A second Start while it runs adopts it; a restart keeps the password.
	again, err := Start(ctx, opts)
	require.NoError(t, err)
	require.True(t, again.Reused())
	require.Equal(t, c.Port(), again.Port())
	require.NoError(t, c.Stop(ctx))
	c, err = Start(ctx, opts)
	require.NoError(t, err)
	requireOnlyPasswords(ctx, t, c)
	requireKept(ctx, t, c)
	after, err := os.ReadFile(filepath.Join(dir, PasswordFile))
	require.NoError(t, err)
	require.Equal(t, string(pgpass), string(after), "a restart must not change the password")
	require.NoError(t, c.Stop(ctx))

	testPasswordFileProblems(ctx, t, opts)
}

// testPasswordFileProblems: Start on a converted, stopped cluster refuses
// a password file that others may read, and one that is gone, saying what
// to do; fixed, it starts.
func testPasswordFileProblems(ctx context.Context, t *testing.T, opts Options) {
	path := filepath.Join(opts.DataDir, PasswordFile)
	require.NoError(t, os.Chmod(path, 0o644))
	_, err := Start(ctx, opts)
	require.ErrorContains(t, err, "chmod 600 "+path)
	require.NoError(t, os.Chmod(path, 0o600))

	require.NoError(t, os.Rename(path, path+".away"))
	_, err = Start(ctx, opts)
	require.ErrorContains(t, err, path+" is missing")
	require.NoError(t, os.Rename(path+".away", path))

	c, err := Start(ctx, opts)
	require.NoError(t, err)
	require.NoError(t, c.Stop(ctx))
}

// TestUpgradeRunningTrustCluster: an earlier version's server still
// running (contextd crashed or was killed) is adopted and converted on
// the spot: when Start returns, trust no longer works on TCP.
func TestUpgradeRunningTrustCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := dataDir(t)
	old := startOldStyle(ctx, t, dir)

	c, err := Start(ctx, Options{DataDir: dir, Logf: t.Logf})
	require.NoError(t, err)
	require.True(t, c.Reused(), "the running server must be adopted")
	require.Equal(t, old.Port(), c.Port())
	requireOnlyPasswords(ctx, t, c)
	requireKept(ctx, t, c)
	require.NoError(t, c.Stop(ctx))
}

func TestPgpassLookup(t *testing.T) {
	content := "# comment\n\nlocalhost:5432:db:alice:secret\r\n*:*:*:postgres:pa\\:ss:word\\\\\n*:*:*:*:fallback\n"
	pw, ok := pgpassLookup(content, "postgres")
	require.True(t, ok)
	require.Equal(t, `pa:ss:word\`, pw)
	pw, ok = pgpassLookup(content, "alice")
	require.True(t, ok)
	require.Equal(t, "secret", pw)
	pw, ok = pgpassLookup(content, "bob")
	require.True(t, ok)
	require.Equal(t, "fallback", pw)
	_, ok = pgpassLookup("# nothing\n*:*:*:alice:x\n", "postgres")
	require.False(t, ok)
}
