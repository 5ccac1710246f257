package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgcluster"
	"github.com/contextd/contextd/internal/store"
)

// embeddedPassword returns the superuser's password from the embedded
// cluster's password file.
func embeddedPassword(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, pgcluster.PasswordFile))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if pw, ok := strings.CutPrefix(line, "*:*:*:postgres:"); ok {
			return pw
		}
	}
	t.Fatalf("no password for postgres in %s:\n%s", pgcluster.PasswordFile, b)
	return ""
}

// embeddedPort returns the port of the embedded cluster's running server,
// from its postmaster.pid (line 4).
func embeddedPort(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pgdata", "postmaster.pid"))
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	require.Greater(t, len(lines), 3)
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	require.NoError(t, err)
	return port
}

// TestEmbeddedDefaultUsesPasswords: the embedded default's commands log in
// with passwords and never print them, and the server's own login
// (contextd_server) has a password and cannot log in without it.
func TestEmbeddedDefaultUsesPasswords(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := embeddedDataDir(t)
	stdout, stderr, code := run(t, "migrate", "up", "--database-url", "", "--data-dir", dir)
	require.Equal(t, 0, code, stderr)
	pw := embeddedPassword(t, dir)
	require.NotContains(t, stdout+stderr, pw, "the password must not be printed")

	_, out, stop := serve(t, "--database-url", "", "--data-dir", dir)
	defer stop()
	port := embeddedPort(t, dir)
	superURL := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", pw, port, pgcluster.DefaultDatabase)
	conn, err := pgx.Connect(ctx, superURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var scram bool
	var sessions int
	require.NoError(t, conn.QueryRow(ctx, "SELECT rolpassword LIKE 'SCRAM-SHA-256$%' FROM pg_authid WHERE rolname = $1", store.ServerLogin).Scan(&scram))
	require.True(t, scram, "%s must have a SCRAM password", store.ServerLogin)
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", store.ServerLogin).Scan(&sessions))
	require.Positive(t, sessions, "the server must be connected as %s", store.ServerLogin)

	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", store.ServerLogin, port, pgcluster.DefaultDatabase))
	require.NoError(t, err)
	cfg.Password = "" // not PGPASSWORD's either
	_, err = pgx.ConnectConfig(ctx, cfg)
	require.ErrorContains(t, err, "password", "%s logged in without a password", store.ServerLogin)
	require.NotContains(t, out.String(), pw, "the password must not be printed")
	require.Equal(t, 0, stop())
}
