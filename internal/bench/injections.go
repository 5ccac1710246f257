package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The shape of --only injections' records: each packet has injPerPacket
// records, the first including the hot item, then injIncluded-1 more
// inclusions and the rest exclusions of keys spread over a key space sized
// so that each key is included about injColdUses times. The hot item and
// injColdKeys cold ones exist as items (the endpoint reads the item first);
// the rest of the key space exists only in the records.
const (
	injPerPacket = 10
	injIncluded  = 7
	injColdKeys  = 100
	injColdUses  = 8
	injChunk     = 10000 // packets per seeding transaction
	injPage      = 100   // the endpoint's default page; contextd asks one more
)

// InjectionsReport is --only injections: the first page of the reverse
// lookup for the hot item and for cold ones, through the API and through
// the same query on pgx (the floor), with the records behind them.
type InjectionsReport struct {
	Project   string  `json:"project"`
	Records   int64   `json:"records"`
	Reused    bool    `json:"reused"`
	HotKey    string  `json:"hot_key"`
	HotUses   int64   `json:"hot_uses"`
	ColdKeys  int     `json:"cold_keys"`
	ColdUses  float64 `json:"cold_uses"` // mean over the cold keys asked about
	PageSize  int     `json:"page_size"`
	Hot       OpStats `json:"hot"`
	HotFloor  OpStats `json:"hot_floor"`
	Cold      OpStats `json:"cold"`
	ColdFloor OpStats `json:"cold_floor"`
	// P99 over the floor's: how many times the floor's p99 contextd's is.
	HotP99OverFloor  float64 `json:"hot_p99_over_floor"`
	ColdP99OverFloor float64 `json:"cold_p99_over_floor"`
}

// injectionsQuery is contextd's reverse lookup (queries/packet_records.sql,
// PacketRecordInjections) with its parameters in order; the floor runs it
// as contextd's store does, with no filters and no cursor.
const injectionsQuery = `SELECT r.packet_id, r.project, r.subject_version, r.section, r.rule, r.created_at,
       p.target_role, p.created_by
FROM packet_records r
JOIN packets p ON p.project = r.project AND p.id = r.packet_id
WHERE r.project = $1
  AND r.subject_project = $2
  AND r.subject_key = $3
  AND r.decision = 'included' AND r.subject_kind = 'item'
  AND ($4::integer IS NULL OR r.subject_version = $4)
  AND ($5::timestamptz IS NULL OR r.created_at >= $5)
  AND ($6::timestamptz IS NULL OR r.created_at < $6)
  AND ($7::text IS NULL OR p.target_role = $7)
  AND (NOT $8::boolean OR (r.created_at, r.packet_id) < ($9::timestamptz, $10::text))
ORDER BY r.created_at DESC, r.packet_id DESC
LIMIT $11`

func (cfg *Config) injMarker(done bool) string {
	state := "seeding"
	if done {
		state = "complete"
	}
	return fmt.Sprintf("contextd bench injections v1 (%s): records=%d", state, cfg.packets()*injPerPacket)
}

// packets is the number of packets of --records, rounded up.
func (cfg *Config) packets() int64 { return (cfg.Records + injPerPacket - 1) / injPerPacket }

// runInjections seeds (or reuses) the records and loads the reverse lookup
// of the hot item and of cold ones in turn, in alternating phases with the
// floor.
func (r *runner) runInjections(ctx context.Context) (*ModeResult, error) {
	pool, err := openPool(ctx, r.cfg.DatabaseURL, r.cfg.Concurrency, nil)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	rep := &InjectionsReport{HotKey: Key("", 0), ColdKeys: injColdKeys, PageSize: injPage}
	if rep.Project, rep.Reused, err = r.injectionsCorpus(ctx, pool); err != nil {
		return nil, err
	}
	if err := rep.count(ctx, pool); err != nil {
		return nil, err
	}
	r.projects = []string{rep.Project}
	if err := r.createAgents(ctx); err != nil {
		return nil, err
	}
	r.progressOps = []string{OpInjectionsHot, floorOp(OpInjectionsHot), OpInjectionsCold, floorOp(OpInjectionsCold)}
	phases, walls, _, err := r.phased(ctx, r.cfg.Phases, true, r.injectionsStep(pool, rep.Project))
	if err != nil {
		return nil, err
	}
	cw, fw := walls["contextd"], walls[OpFloor]
	rep.Hot, rep.HotFloor = r.rec.stats(OpInjectionsHot, cw), r.rec.stats(floorOp(OpInjectionsHot), fw)
	rep.Cold, rep.ColdFloor = r.rec.stats(OpInjectionsCold, cw), r.rec.stats(floorOp(OpInjectionsCold), fw)
	if rep.HotFloor.P99 > 0 {
		rep.HotP99OverFloor = round(rep.Hot.P99/rep.HotFloor.P99, 2)
	}
	if rep.ColdFloor.P99 > 0 {
		rep.ColdP99OverFloor = round(rep.Cold.P99/rep.ColdFloor.P99, 2)
	}
	return &ModeResult{Injections: rep, Phases: phases,
		Note: "hot and cold calls alternate in every phase; ops/s is each one's calls over the phases' wall time"}, nil
}

// injectionsStep asks for the first page of injections of the hot item and
// of a random cold one in turn, through the API or the floor's query.
func (r *runner) injectionsStep(pool *pgxpool.Pool, project string) stepFunc {
	return func(ctx context.Context, system string, w int, deadline time.Time) {
		wk := r.workers[w]
		for ctx.Err() == nil && time.Now().Before(deadline) {
			wk.n++
			op, key := OpInjectionsHot, Key("", 0)
			if wk.n%2 == 1 {
				op, key = OpInjectionsCold, Key("", 1+wk.rng.IntN(injColdKeys))
			}
			start := time.Now()
			if system == OpFloor {
				n, err := injectionsFloor(ctx, pool, project, key)
				if err == nil && n == 0 {
					err = fmt.Errorf("floor: no injections of %s", key)
				}
				r.rec.add(floorOp(op), time.Since(start), err)
				continue
			}
			raw, _, err := r.c.do(ctx, http.MethodGet, "/v1/projects/"+project+"/items/"+key+"/injections", wk.key, nil)
			took := time.Since(start)
			if err == nil && !bytes.Contains(raw, []byte(`"packet_id"`)) {
				err = fmt.Errorf("no injections of %s: %.200s", key, raw)
			}
			r.rec.add(op, took, err)
		}
	}
}

// injectionsFloor runs contextd's query for the first page and reads
// every row; it returns their number.
func injectionsFloor(ctx context.Context, pool *pgxpool.Pool, project, key string) (int, error) {
	rows, err := pool.Query(ctx, injectionsQuery, project, project, key, nil, nil, nil, nil, false, time.Time{}, "", injPage+1)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	var (
		id, proj, section, rule, role, by string
		version                           int32
		at                                time.Time
	)
	for rows.Next() {
		if err := rows.Scan(&id, &proj, &version, &section, &rule, &at, &role, &by); err != nil {
			return 0, err
		}
		n++
	}
	return n, rows.Err()
}

// injectionsCorpus finds a complete corpus of --records to reuse (with
// --reuse), or seeds one into a new project: packet_records is
// append-only, so an earlier corpus can be neither emptied nor resized.
// Either way the tables are analysed.
func (r *runner) injectionsCorpus(ctx context.Context, pool *pgxpool.Pool) (string, bool, error) {
	markers, err := r.existingMarkers(ctx)
	if err != nil {
		return "", false, fmt.Errorf("list projects: %w", err)
	}
	if r.cfg.Reuse {
		var names []string
		for p, d := range markers {
			if strings.HasPrefix(p, "bench-inj-") && d == r.cfg.injMarker(true) {
				names = append(names, p)
			}
		}
		if len(names) > 0 {
			slices.Sort(names)
			r.logf("reusing the records of %s (%s)", names[0], r.cfg.injMarker(true))
			return names[0], true, r.settleRecords(ctx, pool, "ANALYZE packets, packet_records")
		}
		r.logf("no complete records with these parameters to reuse; seeding")
	}
	project := "bench-inj-" + r.runID
	if err := r.createProject(ctx, project, r.cfg.injMarker(false)); err != nil {
		return "", false, err
	}
	items := r.corpus.Layer("bench-inj", 1+injColdKeys, 0)
	for i := range items {
		items[i].Roles = nil
	}
	if err := r.c.call(ctx, http.MethodPost, "/v1/projects/"+project+"/items", r.cfg.AdminKey, map[string]any{"items": items}, nil); err != nil {
		return "", false, fmt.Errorf("seed items of %s: %w", project, err)
	}
	if err := r.seedRecords(ctx, pool, project); err != nil {
		return "", false, err
	}
	if err := r.settleRecords(ctx, pool, "VACUUM (ANALYZE) packets, packet_records"); err != nil {
		return "", false, err
	}
	return project, false, r.createProject(ctx, project, r.cfg.injMarker(true))
}

// settleRecords runs sql (a VACUUM or ANALYZE of the records' tables)
// unless --no-analyze, and sets what the planner knows of them.
func (r *runner) settleRecords(ctx context.Context, pool *pgxpool.Pool, sql string) error {
	if r.cfg.NoAnalyze {
		return r.inspect(ctx, pool, "packets", "packet_records")
	}
	r.logf("%s", sql)
	if _, err := pool.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	r.stats = StatsAnalyzed
	return nil
}

// Seeding SQL: packets of injPerPacket records, shaped like contextd's
// rows (a small rendered text: a real one is toasted out of the heap row
// the lookup reads). $1 project, packets [$2, $3), $4 the first packet's
// time, one second apart; $5 the spread key space.
const (
	injSeedPackets = `INSERT INTO packets (project, id, created_at, created_by, target_role, task_id, request, format, tokenizer,
    rendered, rendered_sha256, token_budget, tokens_used, gaps, provenance_summary, snapshot)
SELECT $1, 'ctxpkt_bench' || lpad(p::text, 10, '0'), $4::timestamptz + p * interval '1 second', 'agt_bench',
    (ARRAY['implementer', 'critic', 'reviewer', 'planner'])[1 + p % 4], 'bench-task-' || (p / 50),
    '{"token_budget": 16000}', 'markdown', 'o200k_base',
    'Context packet ' || p, sha256(convert_to('Context packet ' || p, 'UTF8')), 16000, 12000, '[]', '{}', '1000:1000:'
FROM generate_series($2::bigint, $3::bigint - 1) AS p`
	injSeedRecords = `INSERT INTO packet_records (project, packet_id, ord, subject_kind, subject_project, subject_key, subject_version,
    decision, section, position, span_start, span_end, tokens, rank, rule, reason, layer, created_at)
SELECT $1, 'ctxpkt_bench' || lpad(p::text, 10, '0'), o, 'item', $1,
    CASE WHEN o = 0 THEN 'item-000000' ELSE 'item-' || lpad((1 + (p * 9 + o - 1) % $5)::text, 6, '0') END, 1,
    CASE WHEN o < 7 THEN 'included' ELSE 'excluded' END, 'Project Knowledge', o,
    CASE WHEN o < 7 THEN 100 * o END, CASE WHEN o < 7 THEN 100 * o + 90 END, 120, o + 1,
    CASE WHEN o = 0 THEN 'always' ELSE 'relevance' END, CASE WHEN o < 7 THEN '' ELSE 'budget' END, 'project',
    $4::timestamptz + p * interval '1 second'
FROM generate_series($2::bigint, $3::bigint - 1) AS p, generate_series(0, 9) AS o`
)

// seedRecords writes the packets and records with INSERT ... SELECT
// generate_series, injChunk packets a transaction, a few transactions at a
// time, with a progress bar.
func (r *runner) seedRecords(ctx context.Context, pool *pgxpool.Pool, project string) error {
	packets := r.cfg.packets()
	keys := max(injColdKeys, packets*(injIncluded-1)/injColdUses)
	first := time.Now().Add(-time.Duration(packets) * time.Second).UTC().Truncate(time.Second)
	bar := newBarOf(r.cfg.Progress, "seeding packet records", "records", int(packets*injPerPacket))
	var next, done atomic.Int64
	g, gctx := newGroup(ctx)
	for range min(4, r.cfg.Concurrency) {
		g.Go(func() error {
			for {
				lo := (next.Add(1) - 1) * injChunk
				if lo >= packets {
					return nil
				}
				hi := min(lo+injChunk, packets)
				err := pgx.BeginFunc(gctx, pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(gctx, injSeedPackets, project, lo, hi, first); err != nil {
						return err
					}
					_, err := tx.Exec(gctx, injSeedRecords, project, lo, hi, first, keys)
					return err
				})
				if err != nil {
					return fmt.Errorf("seed records of %s: %w", project, err)
				}
				bar.set(int(done.Add((hi - lo) * injPerPacket)))
			}
		})
	}
	err := g.Wait()
	bar.finish()
	return err
}

// count reads the records and the uses of the hot and the cold items.
func (rep *InjectionsReport) count(ctx context.Context, pool *pgxpool.Pool) error {
	const uses = `SELECT count(*) FROM packet_records
WHERE project = $1 AND subject_project = $1 AND subject_key = ANY($2) AND decision = 'included' AND subject_kind = 'item'`
	cold := make([]string, injColdKeys)
	for i := range cold {
		cold[i] = Key("", i+1)
	}
	var coldUses int64
	err := pool.QueryRow(ctx, "SELECT count(*) FROM packet_records WHERE project = $1", rep.Project).Scan(&rep.Records)
	if err == nil {
		err = pool.QueryRow(ctx, uses, rep.Project, []string{rep.HotKey}).Scan(&rep.HotUses)
	}
	if err == nil {
		err = pool.QueryRow(ctx, uses, rep.Project, cold).Scan(&coldUses)
	}
	if err != nil {
		return fmt.Errorf("count records: %w", err)
	}
	rep.ColdUses = round(float64(coldUses)/injColdKeys, 1)
	return nil
}

func (rep *InjectionsReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "injections     %d records in packet_records of %s (%d a packet%s); hot %s in %d packets, %d cold items in %.1f each; first page of %d\n",
		rep.Records, rep.Project, injPerPacket, map[bool]string{true: ", reused"}[rep.Reused], rep.HotKey, rep.HotUses, rep.ColdKeys, rep.ColdUses, rep.PageSize)
	fmt.Fprintf(w, "%-14s %8s %9s %9s %9s %9s %7s\n", "operation", "ops", "ops/s", "p50 ms", "p95 ms", "p99 ms", "errors")
	writeStatsRow(w, "hot", &rep.Hot)
	writeStatsRow(w, "hot floor", &rep.HotFloor)
	writeStatsRow(w, "cold", &rep.Cold)
	writeStatsRow(w, "cold floor", &rep.ColdFloor)
	fmt.Fprintf(w, "p99 / floor's  hot %.2f×, cold %.2f×\n", rep.HotP99OverFloor, rep.ColdP99OverFloor)
}
