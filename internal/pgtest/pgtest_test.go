package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/store"
)

func TestMain(m *testing.M) { Main(m) }

// requireSchema checks that the pool's database holds the migrated schema
// and nothing but the seed data.
func requireSchema(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	var versions *string
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('item_versions')::text").Scan(&versions))
	require.NotNil(t, versions, "item_versions table missing")
	var shared bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM projects WHERE project = '_shared')").Scan(&shared))
	require.True(t, shared, "_shared project missing")
}

func currentDB(t *testing.T, ctx context.Context, pool *pgxpool.Pool) string {
	t.Helper()
	var name string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_database()").Scan(&name))
	return name
}

// TestParallelDatabases runs several parallel tests, each writing to its own
// database; every one must see the schema and only its own write.
func TestParallelDatabases(t *testing.T) {
	t.Parallel()
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := New(t)
			requireSchema(t, ctx, pool)
			_, err := pool.Exec(ctx, "INSERT INTO projects (project) VALUES ($1)", fmt.Sprintf("p%d", i))
			require.NoError(t, err)
			var projects []string
			rows, err := pool.Query(ctx, "SELECT project FROM projects ORDER BY project")
			require.NoError(t, err)
			projects, err = pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Equal(t, []string{"_shared", fmt.Sprintf("p%d", i)}, projects)
		})
	}
}

// TestIsolation checks deterministically that two databases are distinct
// and that a write in one is invisible in the other.
func TestIsolation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := New(t), New(t)
	require.NotEqual(t, currentDB(t, ctx, a), currentDB(t, ctx, b))
	requireSchema(t, ctx, a)
	requireSchema(t, ctx, b)

	_, err := a.Exec(ctx, "INSERT INTO projects (project) VALUES ('only-in-a')")
	require.NoError(t, err)
	var n int
	require.NoError(t, b.QueryRow(ctx, "SELECT count(*) FROM projects WHERE project = 'only-in-a'").Scan(&n))
	require.Zero(t, n)
	require.NoError(t, a.QueryRow(ctx, "SELECT count(*) FROM projects WHERE project = 'only-in-a'").Scan(&n))
	require.Equal(t, 1, n)
}

// TestDroppedAtCleanup checks that a test's database is gone after its
// cleanup ran.
func TestDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		name = currentDB(t, t.Context(), New(t))
	})
	var exists bool
	require.NoError(t, get(t).admin.QueryRow(t.Context(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	require.False(t, exists, "database %s survived its test", name)
}

// TestNewURL checks the URL form, as a server under test would use it.
func TestNewURL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, NewURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM item_versions").Scan(&n))
	require.Zero(t, n)
}

// TestEmpty checks that Empty gives an unmigrated database that the
// migrations can then be run on.
func TestEmpty(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := Empty(t)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var projects *string
	require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass('projects')::text").Scan(&projects))
	require.Nil(t, projects, "Empty database has a projects table")

	require.NoError(t, store.MigrateUp(ctx, dbURL))
	require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass('projects')::text").Scan(&projects))
	require.NotNil(t, projects)
}

// TestHalfBuiltTemplateIsRebuilt simulates a template left by a build that
// crashed before marking it complete: it must be dropped and rebuilt, not
// cloned. It uses a template name of its own so it cannot disturb the
// template the other tests clone.
func TestHalfBuiltTemplateIsRebuilt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := get(t)
	name := "contextd_tmpl_test_" + randomHex(6)
	ident := pgx.Identifier{name}.Sanitize()
	_, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE template0")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = s.admin.Exec(ctx, "ALTER DATABASE "+ident+" IS_TEMPLATE false")
		_, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
		require.NoError(t, err)
	})

	require.NoError(t, s.ensureTemplate(ctx, name))
	ready, exists, err := s.templateState(ctx, name)
	require.NoError(t, err)
	require.True(t, exists && ready, "template not marked complete")

	clone := "contextd_test_" + randomHex(8)
	require.NoError(t, s.createDatabase(ctx, clone, name))
	t.Cleanup(func() {
		_, err := s.admin.Exec(context.Background(), "DROP DATABASE "+pgx.Identifier{clone}.Sanitize()+" WITH (FORCE)")
		require.NoError(t, err)
	})
	pool, err := pgxpool.New(ctx, s.dbURL(clone))
	require.NoError(t, err)
	defer pool.Close()
	requireSchema(t, ctx, pool)

	// A completed template is left alone.
	require.NoError(t, s.ensureTemplate(ctx, name))
}

// TestCreateRetriesWhileSourceBusy holds a session on the source database
// for longer than PostgreSQL's own 5 s wait, so CREATE DATABASE fails with
// "source database is being accessed by other users" once and
// createDatabase has to retry.
func TestCreateRetriesWhileSourceBusy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := get(t)
	source := "contextd_test_" + randomHex(8)
	require.NoError(t, s.createDatabase(ctx, source, "template0"))
	t.Cleanup(func() {
		_, _ = s.admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{source}.Sanitize()+" WITH (FORCE)")
	})
	busy, err := pgx.Connect(ctx, s.dbURL(source))
	require.NoError(t, err)
	go func() {
		time.Sleep(6 * time.Second)
		busy.Close(context.Background())
	}()

	clone := "contextd_test_" + randomHex(8)
	start := time.Now()
	require.NoError(t, s.createDatabase(ctx, clone, source))
	require.Greater(t, time.Since(start), 5*time.Second, "the source was not busy: the test proves nothing")
	_, err = s.admin.Exec(context.Background(), "DROP DATABASE "+pgx.Identifier{clone}.Sanitize()+" WITH (FORCE)")
	require.NoError(t, err)
}

// exercise runs the harness end to end on s: template, clone, empty.
func exercise(t *testing.T, s *server) {
	t.Helper()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, s.newDatabase(t, true))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	requireSchema(t, ctx, pool)

	conn, err := pgx.Connect(ctx, s.newDatabase(t, false))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var projects *string
	require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass('projects')::text").Scan(&projects))
	require.Nil(t, projects)
}

// TestLocalClusterPath forces discovery path 4 (a throwaway cluster from
// local binaries), which the normal discovery never reaches on a machine
// with a server on 127.0.0.1:5432.
func TestLocalClusterPath(t *testing.T) {
	t.Parallel()
	s, err := startLocalCluster(t.Context())
	require.NoError(t, err, "path 4 needs PostgreSQL server binaries")
	t.Cleanup(s.close) // registered first, so it runs after the drops
	t.Logf("started %s", s.desc)
	exercise(t, s)
}

// TestDockerPath checks that Docker detection answers promptly and without
// panicking whether or not an engine runs, and exercises path 3 when one
// does.
func TestDockerPath(t *testing.T) {
	t.Parallel()
	start := time.Now()
	err := dockerHealthy(t.Context())
	require.Less(t, time.Since(start), 15*time.Second, "Docker detection is too slow for a fallback")
	if err != nil {
		t.Logf("no Docker engine (%v): path 3 not exercised beyond detection", err)
		return
	}
	s, err := startContainer(t.Context())
	require.NoError(t, err)
	t.Cleanup(s.close)
	exercise(t, s)
}

// TestURLMaker checks that database URLs keep the server's settings.
func TestURLMaker(t *testing.T) {
	for _, k := range append(libpqVars, "PGSSLMODE", "PGAPPNAME", "PGCONNECT_TIMEOUT") {
		t.Setenv(k, "") // pgconn ignores empty variables
	}
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:p@h:5433/db?sslmode=disable&application_name=x", "postgres://u:p@h:5433/other?sslmode=disable&application_name=x"},
		{"host=h port=5433 user=u password=p dbname=db sslmode=disable", "postgres://u:p@h:5433/other?sslmode=disable"},
		{"host=/var/run/postgresql port=5432 user=u sslmode=disable", "postgres://u@/other?host=%2Fvar%2Frun%2Fpostgresql&port=5432&sslmode=disable"},
	} {
		f, err := urlMaker(tc.in)
		require.NoError(t, err)
		require.Equal(t, tc.want, f("other"), tc.in)
	}
}

// TestLibpqDefaults checks how path 2 chooses its connection string.
func TestLibpqDefaults(t *testing.T) {
	for _, k := range libpqVars {
		t.Setenv(k, "")
	}
	connStr, _ := libpqDefaults()
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", connStr)
	t.Setenv("PGPORT", "5999")
	t.Setenv("PGPASSWORD", "secret")
	connStr, desc := libpqDefaults()
	require.Empty(t, connStr, "PG* variables are applied by pgconn from the empty string")
	require.Contains(t, desc, "PGPORT=5999")
	require.NotContains(t, desc, "secret")
}
