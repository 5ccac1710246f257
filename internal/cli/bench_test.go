package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

// TestBenchInProcess: without --url, bench starts contextd in this process
// (here on a database of its own instead of the embedded cluster).
func TestBenchInProcess(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	out, errs, code := run(t, "bench", "--database-url", url, "--items", "100", "--shared", "10",
		"--duration", "1s", "--concurrency", "2", "--only", "assemble", "--json")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "bench server listening on http://127.0.0.1:")
	var res struct {
		Assemble struct {
			Ops    int     `json:"ops"`
			Errors int     `json:"errors"`
			P50    float64 `json:"p50_ms"`
		} `json:"assemble"`
		PutItem struct {
			Ops int `json:"ops"`
		} `json:"put_item"`
		Floor  *json.RawMessage `json:"floor"`
		Ratio  *float64         `json:"ratio"`
		RSS    float64          `json:"server_rss_mib"`
		Phases []struct {
			System string `json:"system"`
		} `json:"phases"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Positive(t, res.Assemble.Ops)
	require.Zero(t, res.Assemble.Errors)
	require.Positive(t, res.Assemble.P50)
	require.Zero(t, res.PutItem.Ops, "--only assemble")
	require.Nil(t, res.Floor, "no --floor")
	require.Nil(t, res.Ratio)
	require.Positive(t, res.RSS, "in-process: this process's RSS")
	require.Len(t, res.Phases, 1)
}

// TestBenchAgainstURL loads a running server, with the floor on its database.
func TestBenchAgainstURL(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	base, sout, stop := serve(t, "--database-url", dbURL)
	defer stop()
	key := keyRE.FindString(sout.String())
	out, errs, code := run(t, "bench", "--url", base, "--key", key, "--database-url", dbURL, "--items", "100", "--shared", "10",
		"--duration", "2s", "--concurrency", "2", "--floor")
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `(?m)^assemble +\d+ `, out)
	require.Regexp(t, `(?m)^floor +\d+ `, out)
	require.Regexp(t, `(?m)^ratio +\d`, out)
	require.NotContains(t, out, "server RSS", "unknown for a server elsewhere")
	require.Regexp(t, `(?m)^phase 4 +floor`, out)
}

func TestBenchFlagErrors(t *testing.T) {
	t.Parallel()
	_, errs, code := run(t, "bench", "--key", "ctxd_x")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "--key goes with --url")
	_, errs, code = run(t, "bench", "--url", "http://127.0.0.1:1", "--key", "")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "--url needs --key")
	_, errs, code = run(t, "bench", "--url", "http://127.0.0.1:1", "--key", "ctxd_x", "--floor")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "--floor needs the database")
}
