package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A bench on a server of others writes no _shared items: asked to, it
// refuses before anything is written.
func TestSharedOnlyOnItsOwnServer(t *testing.T) {
	t.Parallel()
	cfg := Defaults()
	cfg.URLs, cfg.AdminKey, cfg.Shared = []string{"http://127.0.0.1:1"}, "k", 10
	_, err := Run(t.Context(), cfg)
	require.ErrorContains(t, err, "--shared 10 would write items into _shared")
	cfg.Only, cfg.DatabaseURL, cfg.Phases = ModePut, "postgres://x", 3 // refused for its phases alone
	_, err = Run(t.Context(), cfg)
	require.ErrorContains(t, err, "--phases must be even")
	require.NotContains(t, err.Error(), "_shared", "--only put writes no _shared items")
}

// A project of a bench's name that bench did not make stops the run
// before it writes anything; one it made and --clean archived is brought
// back and used.
func TestClaimOnlyItsOwnProjects(t *testing.T) {
	t.Parallel()
	url, key, dbURL := testServer(t)
	c := newClient([]string{url}, 1)
	require.NoError(t, c.call(t.Context(), "PUT", "/v1/projects/bench-1", key, map[string]string{"description": "a user's project"}, nil))
	cfg := Defaults()
	cfg.URLs, cfg.AdminKey, cfg.DatabaseURL = []string{url}, key, dbURL
	cfg.Items, cfg.Shared, cfg.Duration, cfg.Concurrency, cfg.Only = 20, 0, 200*time.Millisecond, 1, OpAssemble
	_, err := Run(t.Context(), cfg)
	require.ErrorContains(t, err, "project bench-1 exists and bench did not make it")
	f, err := openFloor(t.Context(), dbURL, 1, cfg.Budget)
	require.NoError(t, err)
	defer f.close()
	var n int
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT count(*) FROM items WHERE project LIKE 'bench-%'`).Scan(&n))
	require.Zero(t, n, "nothing written")
	var desc string
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT description FROM projects WHERE project = 'bench-1'`).Scan(&desc))
	require.Equal(t, "a user's project", desc)

	cfg.Projects = 1 // bench-0 alone
	_, err = Run(t.Context(), cfg)
	require.NoError(t, err)
	res, err := Clean(t.Context(), []string{url}, key, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"bench-0"}, res.Projects, "bench-1 is not the bench's")
	require.Len(t, res.Agents, 1+len(Roles))

	// bench-0 (archived by --clean) and bench-1 (not the bench's): the
	// refusal comes before bench-0 is restored, and the run claims nothing.
	refused := &syncBuffer{}
	cfg.Progress, cfg.Projects = refused, 2
	_, err = Run(t.Context(), cfg)
	require.ErrorContains(t, err, "project bench-1 exists and bench did not make it")
	require.NotContains(t, refused.String(), "restored bench-0")
	require.NotContains(t, refused.String(), "this run wrote")
	var archived bool
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT archived_at IS NOT NULL FROM projects WHERE project = 'bench-0'`).Scan(&archived))
	require.True(t, archived, "bench-0 stays archived")

	cfg.Projects = 1
	progress := &syncBuffer{}
	cfg.Progress = progress
	_, err = Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Contains(t, progress.String(), "restored bench-0")
}
