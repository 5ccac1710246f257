package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestCorpusIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b := NewCorpus(7), NewCorpus(7)
	require.Len(t, a.Vocab, VocabSize)
	require.Equal(t, a.Vocab, b.Vocab)
	require.Equal(t, a.Layer("bench-0", 500, 0.2), b.Layer("bench-0", 500, 0.2))
	require.NotEqual(t, a.Layer("bench-0", 500, 0.2), NewCorpus(8).Layer("bench-0", 500, 0.2), "another seed, another corpus")
	require.NotEqual(t, a.Layer("bench-0", 500, 0.2), a.Layer("bench-1", 500, 0.2), "each project its own items")
	seen := map[string]bool{}
	for _, w := range a.Vocab {
		require.False(t, seen[w], "duplicate word %q", w)
		require.Regexp(t, `^[a-z]{3,}$`, w)
		seen[w] = true
	}
}

func TestCorpusHasTheAskedFractions(t *testing.T) {
	t.Parallel()
	c := NewCorpus(1)
	for _, always := range []float64{0.2, 0.5} {
		const n = 6000
		items := c.Layer("bench-0", n, always)
		triggers := map[string]int{}
		groups := map[string][]Item{}
		hidden, templates := 0, 0
		authorities, confidences, priorities, kinds := map[string]bool{}, map[string]bool{}, map[int]bool{}, map[string]bool{}
		keyRE := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)
		for i, it := range items {
			require.Equal(t, Key("bench-0", i), it.Key)
			require.Regexp(t, keyRE, it.Key)
			triggers[it.Trigger.Kind()]++
			require.GreaterOrEqual(t, len(it.Content), 200, it.Key)
			require.LessOrEqual(t, len(it.Content), 2000, it.Key)
			if it.Trigger.Kind() == "tool" {
				require.Equal(t, "tools", it.Slot)
				require.Contains(t, Tools, it.Trigger.Tool)
			}
			if it.StateKey != "" {
				groups[it.StateKey] = append(groups[it.StateKey], it)
			}
			if it.Roles != nil {
				hidden++
				require.Len(t, it.Roles.HiddenFrom, 1)
			}
			if it.Template {
				templates++
				require.Contains(t, it.Content, "{{project}}")
			}
			authorities[it.Authority], confidences[it.Confidence], priorities[it.Priority], kinds[it.Kind] = true, true, true, true
		}
		frac := func(k string) float64 { return float64(triggers[k]) / n }
		require.InDelta(t, always, frac("always"), 0.02, "always-on fraction")
		for _, k := range []string{"keywords", "tool", "relevance"} {
			require.InDelta(t, (1-always)/3, frac(k), 0.025, "%s fraction", k)
		}
		require.InDelta(t, 0.07, float64(hidden)/n, 0.02, "hidden from a role")
		require.Greater(t, templates, 10)
		require.Len(t, authorities, 4)
		require.Len(t, confidences, 3)
		require.Len(t, priorities, 11)
		require.GreaterOrEqual(t, len(kinds), 7)
		require.GreaterOrEqual(t, len(groups), triggers["always"]/stateGroupEach-1)
		for k, g := range groups {
			require.True(t, len(g) == 2 || len(g) == 3, "state key %s has %d items", k, len(g))
			for _, it := range g {
				require.True(t, it.Trigger.Always, "contradictions are among always-on items")
			}
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ownServer is Defaults for a server of the test's own (testServer), on
// which the bench may write _shared.
func ownServer() Config {
	cfg := Defaults()
	cfg.Dedicated = true
	return cfg
}

// testServer is contextd on a database of its own: its URL, an admin key
// and the database URL.
func testServer(t *testing.T) (string, string, string) {
	t.Helper()
	dbURL := pgtest.NewURL(t)
	st, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	a := app.New(st)
	ts := httptest.NewServer(server.New(server.Config{App: a}))
	t.Cleanup(ts.Close)
	_, key, err := a.Agents.Bootstrap(context.Background())
	require.NoError(t, err)
	return ts.URL, key, dbURL
}

func TestShortRunWithFloor(t *testing.T) {
	t.Parallel()
	url, key, dbURL := testServer(t)
	progress := &syncBuffer{}
	cfg := ownServer()
	cfg.URLs, cfg.AdminKey, cfg.DatabaseURL = []string{url, url}, key, dbURL
	cfg.Items, cfg.Shared, cfg.Duration, cfg.Concurrency, cfg.Floor = 200, 20, 2*time.Second, 2, true
	cfg.Progress, cfg.RSS = progress, SelfRSSMiB
	res, err := Run(t.Context(), cfg)
	require.NoError(t, err, progress.String())
	var out bytes.Buffer
	require.NoError(t, res.WriteJSON(&out))
	var j map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &j), out.String())

	common := []string{"ops_per_s", "p50_ms", "p95_ms", "p99_ms", "errors"}
	for _, op := range []string{"assemble", "floor", "put_item", "why", "injections", "handoff"} {
		m, ok := j[op].(map[string]any)
		require.True(t, ok, "%s missing: %s", op, out.String())
		for _, k := range common {
			require.Contains(t, m, k, op)
		}
		require.Zero(t, m["errors"], "%s errors; progress:\n%s", op, progress.String())
	}
	asm, fl := j["assemble"].(map[string]any), j["floor"].(map[string]any)
	require.Contains(t, asm, "records_per_packet")
	require.Contains(t, asm, "answer_bytes")
	require.Positive(t, asm["ops_per_s"].(float64), out.String())
	require.Positive(t, asm["records_per_packet"].(float64), progress.String())
	require.Greater(t, asm["answer_bytes"].(float64), 1000.0)
	require.Positive(t, fl["ops_per_s"].(float64))
	require.Positive(t, j["server_rss_mib"].(float64))
	ratio, ok := j["ratio"].(float64)
	require.True(t, ok, out.String())
	require.InEpsilon(t, asm["ops_per_s"].(float64)/fl["ops_per_s"].(float64), ratio, 0.05)

	// A B A B, one after the other.
	require.Len(t, res.Phases, 4)
	prevEnd := 0.0
	for i, p := range res.Phases {
		want := "contextd"
		if i%2 == 1 {
			want = "floor"
		}
		require.Equal(t, want, p.System)
		require.GreaterOrEqual(t, p.StartS, prevEnd)
		// Each phase runs 0.5 s, then waits for the calls in flight.
		require.GreaterOrEqual(t, p.EndS-p.StartS, 0.5, "phase %d", i+1)
		require.Less(t, p.EndS-p.StartS, 10.0, "phase %d", i+1)
		require.Positive(t, p.Ops, "phase %d", i+1)
		require.Zero(t, p.Errors)
		prevEnd = p.EndS
	}
	require.Equal(t, res.Phases[1].Ops+res.Phases[3].Ops, res.Floor.Ops)
	local := clusterIsLocal(t, dbURL)
	requireCPU(t, res.CPU["contextd"], local, "contextd")
	requireCPU(t, res.CPU["floor"], local, "floor")
	for _, p := range res.Phases {
		require.NotNil(t, p.CPUProcessMS)
		require.Equal(t, local, p.CPUPostgresMS != nil)
	}
	cpu, ok := j["cpu_ms_per_op"].(map[string]any)
	require.True(t, ok, out.String())
	require.Contains(t, cpu, "contextd")
	require.Contains(t, cpu, "floor")
	var table bytes.Buffer
	res.WriteTable(&table)
	require.Regexp(t, `(?m)^cpu/call    contextd [\d.]+ ms in this process \+ `, table.String())
	require.Contains(t, progress.String(), "seeding [")
	require.Contains(t, progress.String(), "phase 4/4 floor")
}

// TestFloorStoresPackets: the floor's packets are real rows, with one record
// per included item, as many tokens as the budget allows and a rendered
// text of the asked size.
func TestFloorStoresPackets(t *testing.T) {
	t.Parallel()
	url, key, dbURL := testServer(t)
	cfg := ownServer()
	cfg.URLs, cfg.AdminKey, cfg.DatabaseURL = []string{url}, key, dbURL
	cfg.Items, cfg.Shared, cfg.Duration, cfg.Concurrency, cfg.Only = 200, 200, 200*time.Millisecond, 1, OpAssemble
	_, err := Run(t.Context(), cfg)
	require.NoError(t, err)
	f, err := openFloor(t.Context(), dbURL, 1, 16000)
	require.NoError(t, err)
	defer f.close()
	require.NoError(t, f.assemble(t.Context(), "bench-0", "critic", "alpha beta", 50000))

	var (
		id                    string
		size, budget, used    int
		records, rsum, shared int
	)
	require.NoError(t, f.pool.QueryRow(t.Context(),
		`SELECT id, length(rendered), token_budget, tokens_used FROM packets WHERE id LIKE 'ctxpkt\_floor\_%'`).Scan(&id, &size, &budget, &used))
	require.Equal(t, 50000, size)
	require.Equal(t, 16000, budget)
	require.Greater(t, used, 12000, "always-on items fill most of the budget")
	require.LessOrEqual(t, used, 16000)
	require.NoError(t, f.pool.QueryRow(t.Context(),
		`SELECT count(*), sum(tokens), count(*) FILTER (WHERE subject_project = '_shared') FROM packet_records WHERE packet_id = $1`, id).Scan(&records, &rsum, &shared))
	require.Positive(t, records)
	require.Equal(t, used, rsum)
	require.Positive(t, shared, "both layers, merged in rank order (_shared as large as the project here)")
}

func TestReuseAndSmallerCorpus(t *testing.T) {
	t.Parallel()
	url, key, dbURL := testServer(t)
	cfg := ownServer()
	cfg.URLs, cfg.AdminKey, cfg.DatabaseURL = []string{url}, key, dbURL
	cfg.Items, cfg.Shared, cfg.Duration, cfg.Concurrency = 120, 12, 200*time.Millisecond, 1
	_, err := Run(t.Context(), cfg)
	require.NoError(t, err)

	progress := &syncBuffer{}
	cfg.Reuse, cfg.Progress = true, progress
	_, err = Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Contains(t, progress.String(), "reusing the corpus")
	require.NotContains(t, progress.String(), "seeding [")

	progress = &syncBuffer{}
	cfg.Items, cfg.Shared, cfg.Progress = 100, 10, progress
	_, err = Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Contains(t, progress.String(), "no complete corpus with these parameters")
	f, err := openFloor(t.Context(), dbURL, 1, 16000)
	require.NoError(t, err)
	defer f.close()
	var live, sharedLive int
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE project = 'bench-0'), count(*) FILTER (WHERE project = '_shared')
		FROM items WHERE live`).Scan(&live, &sharedLive))
	require.Equal(t, 100, live, "the previous corpus's surplus items are tombstoned")
	require.Equal(t, 10, sharedLive)
	var desc string
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT description FROM projects WHERE project = 'bench-1'`).Scan(&desc))
	require.True(t, strings.HasPrefix(desc, "contextd bench corpus v1 (complete): seed=1 items=100 shared=10"), desc)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	cfg := ownServer()
	cfg.URLs, cfg.AdminKey, cfg.Floor, cfg.Phases, cfg.Only, cfg.Shared, cfg.Always = []string{"http://x"}, "k", true, 3, "why", -1, 1.5
	_, err := Run(t.Context(), cfg)
	require.Error(t, err)
	for _, want := range []string{"--database-url", "--phases must be even", "--only", "--shared", "--always"} {
		require.Contains(t, err.Error(), want)
	}
}

// TestNoAnalyze: --no-analyze leaves a new database without statistics for
// contextd and the floor alike, and says so; the default analyses it; and
// --no-analyze on a database analysed before says the statistics are there.
func TestNoAnalyze(t *testing.T) {
	t.Parallel()
	url, key, dbURL := testServer(t)
	cfg := ownServer()
	cfg.URLs, cfg.AdminKey, cfg.DatabaseURL = []string{url}, key, dbURL
	cfg.Items, cfg.Shared, cfg.Duration, cfg.Concurrency, cfg.Only = 100, 10, 400*time.Millisecond, 1, OpAssemble
	cfg.Floor, cfg.NoAnalyze = true, true
	db := dbPool(t, dbURL)
	statsRows := func() int {
		var n int
		require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stats
			WHERE schemaname = 'public' AND tablename IN ('items', 'item_versions', 'item_terms')`).Scan(&n))
		return n
	}

	res, err := Run(t.Context(), cfg)
	require.NoError(t, err)
	require.False(t, res.Analyzed)
	require.Equal(t, StatsNone, res.Statistics)
	require.Positive(t, res.Assemble.Ops)
	require.Positive(t, res.Floor.Ops, "the floor ran on the same unanalysed database")
	require.Zero(t, statsRows(), "nothing analysed the corpus")
	var out bytes.Buffer
	res.WriteTable(&out)
	require.Contains(t, out.String(), "statistics  none (not analyzed: the first minute after an import)")
	out.Reset()
	require.NoError(t, res.WriteJSON(&out))
	require.Contains(t, out.String(), `"analyzed": false`)
	require.Contains(t, out.String(), `"statistics": "none"`)

	cfg.NoAnalyze, cfg.Reuse = false, true
	res, err = Run(t.Context(), cfg)
	require.NoError(t, err)
	require.True(t, res.Analyzed)
	require.Equal(t, StatsAnalyzed, res.Statistics)
	require.Positive(t, statsRows())

	cfg.NoAnalyze = true
	res, err = Run(t.Context(), cfg)
	require.NoError(t, err)
	require.False(t, res.Analyzed)
	require.Equal(t, StatsPresent, res.Statistics, "an earlier run's statistics are still there")
}

// TestShortSweep: one row per level, in the order asked, each with
// assemblies, no errors, a floor and its ratio, and the server's RSS.
func TestShortSweep(t *testing.T) {
	t.Parallel()
	url, key, dbURL := testServer(t)
	progress := &syncBuffer{}
	cfg := ownServer()
	cfg.URLs, cfg.AdminKey, cfg.DatabaseURL = []string{url}, key, dbURL
	cfg.Items, cfg.Shared, cfg.Duration, cfg.Sweep = 100, 10, time.Second, []int{2, 1}
	cfg.Progress, cfg.RSS = progress, SelfRSSMiB
	res, err := Run(t.Context(), cfg)
	require.NoError(t, err, progress.String())
	require.NotNil(t, res.Sweep)
	var out bytes.Buffer
	require.NoError(t, res.WriteJSON(&out))
	var j struct {
		Statistics string `json:"statistics"`
		Analyzed   bool   `json:"analyzed"`
		Rows       []struct {
			Concurrency int     `json:"concurrency"`
			Ops         int     `json:"ops"`
			OpsPerS     float64 `json:"ops_per_s"`
			P50         float64 `json:"p50_ms"`
			P99         float64 `json:"p99_ms"`
			Spread      float64 `json:"p99_over_p50"`
			Errors      int     `json:"errors"`
			Floor       float64 `json:"floor_ops_per_s"`
			Ratio       float64 `json:"ratio"`
			RSS         float64 `json:"server_rss_peak_mib"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &j), out.String())
	require.Equal(t, StatsAnalyzed, j.Statistics)
	require.True(t, j.Analyzed)
	require.Len(t, j.Rows, 2)
	for i, want := range []int{2, 1} {
		row := j.Rows[i]
		require.Equal(t, want, row.Concurrency)
		require.Positive(t, row.Ops, out.String())
		require.Positive(t, row.OpsPerS)
		require.Zero(t, row.Errors, progress.String())
		require.Positive(t, row.P50)
		require.GreaterOrEqual(t, row.P99, row.P50)
		require.InDelta(t, row.P99/row.P50, row.Spread, 0.01)
		require.Positive(t, row.Floor)
		require.InEpsilon(t, row.OpsPerS/row.Floor, row.Ratio, 0.01)
		require.Positive(t, row.RSS)
	}
	local := clusterIsLocal(t, dbURL)
	for _, row := range res.Sweep.Rows {
		requireCPU(t, row.CPU, local, fmt.Sprintf("agents %d", row.Concurrency))
		requireCPU(t, row.FloorCPU, local, fmt.Sprintf("agents %d, floor", row.Concurrency))
	}
	var table bytes.Buffer
	res.WriteTable(&table)
	require.Regexp(t, `(?m)^ +2 +\d+ +[\d.]+ .* 0 +[\d.]+ +[\d.]+ +[\d.]+$`, table.String())
	require.Regexp(t, `(?m)^ +1 +\d+ `, table.String())
	require.Contains(t, table.String(), "statistics  analyzed")
	require.Regexp(t, `(?m)^cpu/packet  agents 2: contextd [\d.]+ ms in this process`, table.String())
	// Half of each level's phases going up the list, half coming back:
	// 2 (1, 2), 1 (1, 2), 1 (3, 4), 2 (3, 4).
	at := func(s string) int {
		i := strings.Index(progress.String(), s)
		require.GreaterOrEqual(t, i, 0, "%q not in the progress:\n%s", s, progress.String())
		return i
	}
	order := []int{at("agents 2: phase 1/4 contextd"), at("agents 2: phase 2/4 floor"), at("agents 1: phase 1/4 contextd"),
		at("agents 1: phase 2/4 floor"), at("agents 1: phase 3/4 contextd"), at("agents 1: phase 4/4 floor"),
		at("agents 2: phase 3/4 contextd"), at("agents 2: phase 4/4 floor")}
	require.True(t, slices.IsSorted(order), "%v\n%s", order, progress.String())
	require.Contains(t, table.String(), "half going up the list of levels and half coming back")
}

func TestParseSweep(t *testing.T) {
	t.Parallel()
	levels, err := ParseSweep("1,8, 32,64")
	require.NoError(t, err)
	require.Equal(t, []int{1, 8, 32, 64}, levels)
	for in, want := range map[string]string{
		"":      `"" is not a number`,
		"1,,8":  `"" is not a number`,
		"1,x":   `"x" is not a number`,
		"0,8":   "must be 1 to 256 agents, not 0",
		"8,257": "must be 1 to 256 agents, not 257",
		"-1":    "not -1",
		"8,8":   "lists 8 twice",
	} {
		_, err := ParseSweep(in)
		require.ErrorContains(t, err, want, in)
	}
	cfg := ownServer()
	cfg.URLs, cfg.AdminKey, cfg.Sweep, cfg.Only, cfg.Phases = []string{"http://x"}, "k", []int{1, 8}, ModePut, 6
	_, err = Run(t.Context(), cfg)
	for _, want := range []string{"--sweep runs assembly alone", "--sweep measures a floor", "--phases must be a multiple of 4"} {
		require.ErrorContains(t, err, want)
	}
}

// TestPacketIDOf: the load generator's short read of an assembly answer
// finds the same packet_id as a whole decode, wherever the key stands and
// whatever the strings before it hold, and refuses what is not an answer.
func TestPacketIDOf(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"budget":{"limit":10,"used":"x\"packet_id\":\"no"},"excluded":{"packet_id":1},"packet_id":"ctxpkt_1","rendered":"a"}`,
		`{"rendered":"\"packet_id\":\"ctxpkt_0\"","sections":[{"packet_id":"no"}],"packet_id":"ctxpkt_1"}`,
		` {"packet_id" : "ctxpkt_1"}`,
	} {
		var whole packetAnswer
		require.NoError(t, json.Unmarshal([]byte(raw), &whole), raw)
		got, err := packetIDOf([]byte(raw))
		require.NoError(t, err, raw)
		require.Equal(t, whole.PacketID, got, raw)
		require.Equal(t, "ctxpkt_1", got, raw)
	}
	got, err := packetIDOf([]byte(`{"rendered":"x"}`))
	require.NoError(t, err)
	require.Empty(t, got, "no packet_id: the caller reports the answer")
	for _, bad := range []string{``, `[]`, `"x"`, `{"packet_id":1}`, `{"budget":`, `{"budget":{} "packet_id":"x"}`} {
		_, err := packetIDOf([]byte(bad))
		require.Error(t, err, bad)
	}
}
