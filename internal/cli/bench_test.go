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

// TestBenchAgainstURL loads a running server, with the floor on its
// database; the server being the test's own, --dedicated lets it write
// _shared too.
func TestBenchAgainstURL(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	base, sout, stop := serve(t, "--database-url", dbURL)
	defer stop()
	key := keyRE.FindString(sout.String())
	out, errs, code := run(t, "bench", "--url", base, "--key", key, "--database-url", dbURL, "--items", "100", "--shared", "10",
		"--dedicated", "--duration", "2s", "--concurrency", "2", "--floor")
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
	_, errs, code = run(t, "bench", "--dedicated")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "--dedicated goes with --url")
	_, errs, code = run(t, "bench", "--clean")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "--clean needs --url and --key")
	for _, c := range []struct{ args, want []string }{
		{[]string{"--sweep", "1,8,x"}, []string{`"x" is not a number`}},
		{[]string{"--sweep", ""}, []string{`"" is not a number`}},
		{[]string{"--sweep", "0,8,300"}, []string{"1 to 256 agents, not 0", "not 300"}},
		{[]string{"--sweep", "1,8", "--concurrency", "4"}, []string{"--sweep sets the concurrency of each level"}},
		{[]string{"--sweep", "1,8", "--only", "put"}, []string{"--sweep runs assembly alone"}},
	} {
		// Without --url a valid sweep would start a server: these fail first.
		_, errs, code := run(t, append([]string{"bench", "--url", "http://127.0.0.1:1", "--key", "ctxd_x", "--database-url", "postgres://x"}, c.args...)...)
		require.Equal(t, 1, code, c.args)
		for _, w := range c.want {
			require.Contains(t, errs, w, c.args)
		}
	}
}

// TestBenchSweepFirstMinute: --sweep 1,2 --no-analyze prints a row per
// level, assemblies and no errors, and says the statistics were not
// analysed.
func TestBenchSweepFirstMinute(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	out, errs, code := run(t, "bench", "--database-url", url, "--items", "100", "--shared", "10",
		"--duration", "1s", "--sweep", "1,2", "--no-analyze")
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `(?m)^ *agents +ops +ops/s +p50 ms +p95 ms +p99 ms +p99/p50 +errors +floor ops/s +ratio +RSS MiB$`, out)
	for _, n := range []string{"1", "2"} {
		// agents, ops > 0, ..., errors 0, floor ops/s, ratio > 0, RSS > 0.
		require.Regexp(t, `(?m)^ +`+n+` +[1-9]\d* +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +0 +[\d.]+ +(0\.\d*[1-9]\d*|[1-9][\d.]*) +[1-9][\d.]*$`, out)
	}
	require.Contains(t, out, "statistics  none (not analyzed: the first minute after an import)")
	require.Contains(t, errs, "--no-analyze: no VACUUM, no ANALYZE")
}

// TestBenchIngestInProcess: the in-process server seals its writes, and the
// ingest floor copies a batch's chain entries and their seals after the
// target project's own (both append-only) instead of replacing them.
func TestBenchIngestInProcess(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	out, errs, code := run(t, "bench", "--database-url", url, "--only", "ingest", "--ingest-items", "100", "--duration", "1s", "--json")
	require.Equal(t, 0, code, errs)
	var res struct {
		Ingest struct {
			Rounds int `json:"rounds"`
			Tables []struct {
				Table string `json:"table"`
				Rows  int    `json:"rows"`
			} `json:"tables"`
		} `json:"ingest"`
		Statistics string `json:"statistics"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.GreaterOrEqual(t, res.Ingest.Rounds, 3)
	tables := map[string]int{}
	for _, tr := range res.Ingest.Tables {
		tables[tr.Table] = tr.Rows
	}
	require.Equal(t, 100, tables["items"], out)
	require.Positive(t, tables["audit_seals"], "the batch's seal is copied too: %s", out)
	require.Equal(t, "none", res.Statistics, "ingest analyses nothing")
}
