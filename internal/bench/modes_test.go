package bench

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

func dbPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// modeConfig is a short run of mode on a server of its own; it returns the
// configuration and the database URL.
func modeConfig(t *testing.T, mode string) (Config, *syncBuffer) {
	t.Helper()
	url, key, dbURL := testServer(t)
	cfg := ownServer()
	cfg.URLs, cfg.AdminKey, cfg.DatabaseURL = []string{url}, key, dbURL
	cfg.Only, cfg.Duration, cfg.Concurrency = mode, time.Second, 2
	cfg.Items, cfg.Shared, cfg.IngestItems, cfg.Records = 100, 10, 200, 2000
	progress := &syncBuffer{}
	cfg.Progress, cfg.RSS = progress, SelfRSSMiB
	return cfg, progress
}

// runModeJSON runs cfg and returns the result and its JSON, decoded.
func runModeJSON(t *testing.T, cfg Config, progress *syncBuffer) (*ModeResult, map[string]any) {
	t.Helper()
	res, err := Run(t.Context(), cfg)
	require.NoError(t, err, progress.String())
	require.NotNil(t, res.Mode)
	var out bytes.Buffer
	require.NoError(t, res.WriteJSON(&out))
	var j map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &j), out.String())
	require.Equal(t, cfg.Only, j["mode"])
	require.Positive(t, j["server_rss_mib"].(float64))
	var table bytes.Buffer
	res.WriteTable(&table)
	require.Contains(t, table.String(), "floor", table.String())
	return res.Mode, j
}

// TestIngestMode: contextd's batch and the floor's COPY of the same rows,
// whose search vectors PostgreSQL recomputed to the same values.
func TestIngestMode(t *testing.T) {
	t.Parallel()
	cfg, progress := modeConfig(t, ModeIngest)
	m, _ := runModeJSON(t, cfg, progress)
	rep := m.Ingest
	require.GreaterOrEqual(t, rep.Rounds, 3)
	require.Positive(t, rep.Contextd.VersionsPerS)
	require.Positive(t, rep.Floor.VersionsPerS)
	require.NotNil(t, m.Ratio)
	require.NotNil(t, rep.PairedRatio)
	require.Positive(t, *rep.PairedRatio)
	tables := map[string]int{}
	for _, tr := range rep.Tables {
		tables[tr.Table] = tr.Rows
	}
	require.Equal(t, 200, tables["item_versions"], rep.Tables)
	require.Equal(t, 200, tables["items"])
	require.Positive(t, tables["item_terms"])

	db := dbPool(t, cfg.DatabaseURL)
	var n, differ int
	require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE c.search IS DISTINCT FROM f.search OR c.search IS NULL)
FROM items c JOIN items f ON f.key = c.key AND f.current_version = c.current_version
WHERE c.project LIKE 'bench-ingest-%-c0' AND f.project LIKE 'bench-ingest-%-f0'`).Scan(&n, &differ))
	require.Equal(t, 200, n, "the floor's rows are committed")
	require.Zero(t, differ)
}

func TestPutAndGetModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{ModePut, ModeGet, ModePut + "/" + PutFloorWrite} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			op, floor, _ := strings.Cut(mode, "/")
			cfg, progress := modeConfig(t, op)
			if floor != "" {
				cfg.PutFloor = floor // every floor write checks it copied a version and an item row
			}
			m, j := runModeJSON(t, cfg, progress)
			for _, side := range []string{"contextd", "floor"} {
				s := j[side].(map[string]any)
				require.Positive(t, s["ops_per_s"].(float64), side)
				require.Positive(t, s["p99_ms"].(float64), side)
				require.Zero(t, s["errors"], "%s: %s", side, progress.String())
			}
			require.NotNil(t, m.Ratio)
			require.Len(t, m.Phases, 4)
			local := clusterIsLocal(t, cfg.DatabaseURL)
			requireCPU(t, m.CPU["contextd"], local, mode)
			requireCPU(t, m.CPU["floor"], local, mode+" floor")
			var table *string
			require.NoError(t, dbPool(t, cfg.DatabaseURL).QueryRow(t.Context(),
				`SELECT coalesce(to_regclass('bench_put_floor'), to_regclass('bench_put_floor_items'), to_regclass('bench_put_floor_terms'), to_regclass('bench_store_floor'))::text`).Scan(&table))
			require.Nil(t, table, "the floor's table is dropped")
		})
	}
}

// TestInjectionsMode seeds records with SQL, then reuses them.
func TestInjectionsMode(t *testing.T) {
	t.Parallel()
	cfg, progress := modeConfig(t, ModeInjections)
	m, _ := runModeJSON(t, cfg, progress)
	rep := m.Injections
	require.EqualValues(t, 2000, rep.Records)
	require.EqualValues(t, 200, rep.HotUses)
	require.Positive(t, rep.ColdUses)
	require.False(t, rep.Reused)
	for name, s := range map[string]OpStats{"hot": rep.Hot, "hot floor": rep.HotFloor, "cold": rep.Cold, "cold floor": rep.ColdFloor} {
		require.Positive(t, s.Ops, name)
		require.Positive(t, s.P99, name)
		require.Zero(t, s.Errors, "%s: %s", name, progress.String())
	}
	require.Positive(t, rep.HotP99OverFloor)

	cfg.Reuse, cfg.Duration = true, 400*time.Millisecond
	m2, _ := runModeJSON(t, cfg, progress)
	require.True(t, m2.Injections.Reused)
	require.Equal(t, rep.Project, m2.Injections.Project)
	require.Equal(t, rep.Records, m2.Injections.Records)
}

func TestModeConfigErrors(t *testing.T) {
	t.Parallel()
	cfg := ownServer()
	cfg.URLs, cfg.AdminKey, cfg.Only, cfg.IngestItems, cfg.Records = []string{"http://x"}, "k", ModeIngest, MaxBatch+1, 10
	_, err := Run(t.Context(), cfg)
	require.Error(t, err)
	cfg.PutFloor = "both"
	_, err = Run(t.Context(), cfg)
	require.ErrorContains(t, err, "--put-floor")
	for _, want := range []string{"--database-url", "--ingest-items", "--records"} {
		require.Contains(t, err.Error(), want)
	}
}

// The paired ratio is the median of the rounds' own ratios: a slow moment
// that slows both sides of one round moves it less than the ratio of the
// medians, which pairs a fast round of one side with a slow one of the other.
func TestPairedRatio(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	require.Nil(t, pairedRatio(nil, nil))
	// Rounds' ratios (floor/contextd): 0.5, 0.8, 0.75: median 0.75.
	require.InDelta(t, 0.75, *pairedRatio(ms(4000, 5000, 8000), ms(2000, 4000, 6000)), 1e-9)
	// Even: 0.5, 0.6, 0.8, 0.9: median (0.6+0.8)/2.
	require.InDelta(t, 0.7, *pairedRatio(ms(1000, 1000, 1000, 1000), ms(500, 900, 600, 800)), 1e-9)
	// A fourth contextd round without its floor round is left out.
	require.InDelta(t, 0.75, *pairedRatio(ms(4000, 5000, 8000, 1), ms(2000, 4000, 6000)), 1e-9)
}

// TestOutcomesMode: both operations measured without errors, the answers
// attributed to entries of their packets, and the outcomes stored: those
// recorded before the load and one per measured write.
func TestOutcomesMode(t *testing.T) {
	t.Parallel()
	cfg, progress := modeConfig(t, ModeOutcomes)
	cfg.OutcomePackets = 16
	res, err := Run(t.Context(), cfg)
	require.NoError(t, err, progress.String())
	rep := res.Mode.Outcomes
	require.NotNil(t, rep)
	require.Equal(t, 16, rep.Packets)
	require.EqualValues(t, 8, rep.Recorded, "every other packet")
	require.EqualValues(t, 4, rep.Failed, "statuses in turn: per agent success, failure, partial, success")
	ops := map[string]OpStats{}
	for _, op := range rep.Ops {
		ops[op.Op] = op.OpStats
	}
	require.Len(t, ops, 4)
	for _, name := range []string{OpOutcomeWrite, OpSuspects, OpLedgerItem, OpLedgerPage} {
		require.Positive(t, ops[name].Ops, name)
		require.Positive(t, ops[name].P50, name)
		require.Zero(t, ops[name].Errors, "%s: %s", name, progress.String())
	}
	require.Positive(t, rep.UsedPerAnswer, "the answers quote their packets")

	var outcomes, answered, used int
	require.NoError(t, dbPool(t, cfg.DatabaseURL).QueryRow(t.Context(),
		`SELECT count(*), count(*) FILTER (WHERE octet_length(answer) = $1), count(*) FILTER (WHERE jsonb_array_length(used) > 0)
FROM packet_outcomes WHERE project LIKE 'bench-%'`, outcomeAnswerSize).Scan(&outcomes, &answered, &used))
	require.Equal(t, 8+ops[OpOutcomeWrite].Ops, outcomes)
	require.Equal(t, 6+ops[OpOutcomeWrite].Ops, answered, "three in four before the load, every write of the load")
	require.Equal(t, answered, used)

	var out, table bytes.Buffer
	require.NoError(t, res.WriteJSON(&out))
	var j map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &j), out.String())
	require.Equal(t, ModeOutcomes, j["mode"])
	jops := j["outcomes"].(map[string]any)["ops"].([]any)
	require.Equal(t, OpOutcomeWrite, jops[0].(map[string]any)["op"])
	require.Positive(t, jops[1].(map[string]any)["p99_ms"].(float64))
	res.WriteTable(&table)
	require.Contains(t, table.String(), "outcome write")
	require.Contains(t, table.String(), "suspects")
}

// TestAnswerOf: an answer quotes the rendered text's sentences among its
// own, is outcomeAnswerSize bytes, and stays UTF-8 where a quote's
// character would be cut.
func TestAnswerOf(t *testing.T) {
	t.Parallel()
	r := &runner{corpus: NewCorpus(1)}
	rendered := "# Packet\n- Déjà vu: the café opens at nine every day. Short one.\n- Ünïcödé ëvërÿwhérë ïn thïs öné sénténcé."
	quoted := 0
	for seed := range uint64(200) {
		a := r.answerOf(rendered, rand.New(rand.NewPCG(seed, 0)))
		require.True(t, utf8.ValidString(a), a)
		require.LessOrEqual(t, len(a), outcomeAnswerSize)
		require.Greater(t, len(a), outcomeAnswerSize-utf8.UTFMax)
		require.NotContains(t, a, "Short one", "fewer than five words")
		if strings.Contains(a, "the café opens at nine every day.") || strings.Contains(a, "Ünïcödé ëvërÿwhérë ïn thïs öné sénténcé.") {
			quoted++
		}
	}
	require.Equal(t, 200, quoted, "every answer quotes the packet")
}
