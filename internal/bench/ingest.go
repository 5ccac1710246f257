package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MaxBatch is the most items one batch request may hold (the contract's
// limit for POST /v1/projects/{project}/items).
const MaxBatch = 10000

// IngestReport is --only ingest: rounds of one batch of Items items of
// ItemBytes bytes of content, each into a fresh project, through the API
// and, after each, the floor's COPY of exactly the rows that batch wrote.
type IngestReport struct {
	Items     int        `json:"items_per_round"`
	ItemBytes int        `json:"item_bytes"`
	Rounds    int        `json:"rounds"`
	Contextd  IngestSide `json:"contextd"`
	Floor     IngestSide `json:"floor"`
	// Tables are the rows the floor copied in one round, in COPY order
	// (parents before children): what the batch wrote.
	Tables []TableRows `json:"tables"`
	// FloorRowsKept: the floor committed its rows and could not delete them
	// afterwards (append-only tables), so its projects stay, like
	// contextd's.
	FloorRowsKept bool `json:"floor_rows_kept"`
	// PairedRatio is the median over rounds of contextd's rate over the
	// floor's in the round that followed it: the machine's drift during a
	// run (its checkpoints, its neighbours) moves both sides of a pair
	// alike, where the ratio of the two medians (ModeResult.Ratio) may take
	// them from different moments.
	PairedRatio *float64 `json:"paired_ratio,omitempty"`
}

// IngestSide is one system's rounds: the median rate, the median round and
// every round's rate.
type IngestSide struct {
	VersionsPerS float64   `json:"versions_per_s"`
	RoundMS      float64   `json:"round_ms"`
	Rounds       []float64 `json:"rounds_versions_per_s"`
}

// TableRows is one table the floor copied: its rows and the columns it
// sent (generated columns are left to PostgreSQL, as for contextd).
type TableRows struct {
	Table   string  `json:"table"`
	Rows    int     `json:"rows"`
	Columns int     `json:"columns"`
	CopyMS  float64 `json:"copy_ms"` // this table's COPY in the round's transaction
}

// ingestProject is the project of round i of system s ("c" contextd, "f"
// the floor): the same length for both, so the copied rows are as wide.
func ingestProject(runID, s string, i int) string {
	return fmt.Sprintf("bench-ingest-%s-%s%d", runID, s, i)
}

// ingestItems is one round's batch: corpus items (the usual mix of
// triggers, roles and templates) with content of exactly IngestSize bytes.
func (r *runner) ingestItems() []Item {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 0x696e67657374)) // "ingest"
	items := r.corpus.Layer("bench-ingest", r.cfg.IngestItems, r.cfg.Always)
	for i := range items {
		items[i] = r.corpus.sized(items[i], r.cfg.IngestSize, rng)
	}
	return items
}

// runIngest runs rounds for --duration, at least 3: a contextd batch into a
// fresh project, then the floor copying the same rows into another.
func (r *runner) runIngest(ctx context.Context) (*ModeResult, error) {
	pool, err := openPool(ctx, r.cfg.DatabaseURL, 2, nil)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	// It writes into fresh projects and analyses nothing: say what the
	// planner knew of the tables it writes.
	if err := r.inspect(ctx, pool, corpusTables...); err != nil {
		return nil, err
	}
	items := r.ingestItems()
	body, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		return nil, err
	}
	if err := r.ingestWarmup(ctx, pool, items); err != nil {
		return nil, err
	}
	if r.cfg.CPUProfile != nil {
		if err := pprof.StartCPUProfile(r.cfg.CPUProfile); err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep := &IngestReport{Items: r.cfg.IngestItems, ItemBytes: r.cfg.IngestSize}
	m := &ModeResult{Ingest: rep}
	var cw, fw []time.Duration
	start := time.Now()
	for i := 0; i < 3 || time.Since(start) < r.cfg.Duration; i++ {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ingest interrupted: %w", ctx.Err())
		}
		cp, fp := ingestProject(r.runID, "c", i), ingestProject(r.runID, "f", i)
		for _, p := range []string{cp, fp} {
			if err := r.createProject(ctx, p, "contextd bench ingest round"); err != nil {
				return nil, err
			}
		}
		t0 := time.Since(start)
		took, err := r.ingestRound(ctx, cp, body)
		if err != nil {
			return nil, err
		}
		m.Phases = append(m.Phases, Phase{System: "contextd", StartS: round(t0.Seconds(), 3), EndS: round((t0 + took).Seconds(), 3), Ops: rep.Items})
		fl, err := copyFloor(ctx, pool, cp, fp, !rep.FloorRowsKept)
		if err != nil {
			return nil, err
		}
		r.rec.add(floorOp(OpIngest), fl.took, nil)
		t1 := fl.start.Sub(start)
		m.Phases = append(m.Phases, Phase{System: OpFloor, StartS: round(t1.Seconds(), 3), EndS: round((t1 + fl.took).Seconds(), 3), Ops: rep.Items})
		rep.Tables, rep.FloorRowsKept = fl.tables, rep.FloorRowsKept || fl.kept != ""
		if fl.kept != "" && m.Note == "" {
			m.Note = fmt.Sprintf("the floor COMMITs its rows; they stay in bench-ingest-%s-f* as contextd's stay in -c* (cleaning up was refused: %s)", r.runID, fl.kept)
		}
		cw, fw = append(cw, took), append(fw, fl.took)
		r.logf("round %d: contextd %d versions in %.0f ms (%.0f/s), floor %.0f ms (%.0f/s)", i+1, rep.Items,
			ms(took), perS(rep.Items, took), ms(fl.took), perS(rep.Items, fl.took))
	}
	rep.Rounds = len(cw)
	rep.Contextd, rep.Floor = ingestSide(rep.Items, cw), ingestSide(rep.Items, fw)
	if rep.Contextd.VersionsPerS > 0 && rep.Floor.VersionsPerS > 0 {
		ratio := round(rep.Contextd.VersionsPerS/rep.Floor.VersionsPerS, 3)
		m.Ratio = &ratio
	}
	rep.PairedRatio = pairedRatio(cw, fw)
	return m, nil
}

// pairedRatio is the median of the rounds' floor time over contextd's
// time (contextd's rate over the floor's, round by round); nil without
// rounds.
func pairedRatio(contextd, floor []time.Duration) *float64 {
	var rs []float64
	for i := range min(len(contextd), len(floor)) {
		if contextd[i] > 0 {
			rs = append(rs, float64(floor[i])/float64(contextd[i]))
		}
	}
	if len(rs) == 0 {
		return nil
	}
	slices.Sort(rs)
	med := rs[len(rs)/2]
	if len(rs)%2 == 0 {
		med = (rs[len(rs)/2-1] + med) / 2
	}
	med = round(med, 3)
	return &med
}

// ingestWarmup writes a small batch both ways, unrecorded, so that the
// first round pays neither for connections nor for preparing statements.
func (r *runner) ingestWarmup(ctx context.Context, pool *pgxpool.Pool, items []Item) error {
	cp, fp := ingestProject(r.runID, "w", 0), ingestProject(r.runID, "v", 0)
	for _, p := range []string{cp, fp} {
		if err := r.createProject(ctx, p, "contextd bench ingest warm-up"); err != nil {
			return err
		}
	}
	batch := map[string]any{"items": items[:min(100, len(items))]}
	if err := r.c.call(ctx, http.MethodPost, "/v1/projects/"+cp+"/items", r.cfg.AdminKey, batch, nil); err != nil {
		return fmt.Errorf("ingest warm-up: %w", err)
	}
	_, err := copyFloor(ctx, pool, cp, fp, false)
	return err
}

// ingestRound is one contextd round: the batch into project, timed from
// the request to the answer, which must say every item was created.
func (r *runner) ingestRound(ctx context.Context, project string, body []byte) (time.Duration, error) {
	start := time.Now()
	raw, _, err := r.c.do(ctx, http.MethodPost, "/v1/projects/"+project+"/items", r.cfg.AdminKey, body)
	took := time.Since(start)
	if err == nil {
		var out struct {
			Created int `json:"created"`
		}
		if err = json.Unmarshal(raw, &out); err == nil && out.Created != r.cfg.IngestItems {
			err = fmt.Errorf("batch into %s created %d items, not %d", project, out.Created, r.cfg.IngestItems)
		}
	}
	r.rec.add(OpIngest, took, err)
	if err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	return took, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func perS(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ingestSide is the median round (and its rate) of one system's rounds.
func ingestSide(items int, rounds []time.Duration) IngestSide {
	var s IngestSide
	for _, d := range rounds {
		s.Rounds = append(s.Rounds, round(perS(items, d), 1))
	}
	sorted := slices.Clone(rounds)
	slices.Sort(sorted)
	if len(sorted) == 0 {
		return s
	}
	med := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		med = (sorted[len(sorted)/2-1] + med) / 2
	}
	s.VersionsPerS, s.RoundMS = round(perS(items, med), 1), round(ms(med), 1)
	return s
}

// tableCopy is one table's rows of a project, read back to be copied.
type tableCopy struct {
	name string
	cols []string
	rows [][]any
	// replace: the target project has rows here already (written when
	// the API created it, like project_counters' head), which the batch
	// updated for contextd; the floor deletes and copies them.
	replace bool
}

// floorRound is one floor round: when its transaction began, how long it
// took to COMMIT, what it copied, and why its rows were kept ("" when
// they were deleted).
type floorRound struct {
	start  time.Time
	took   time.Duration
	tables []TableRows
	kept   string
}

// copyFloor is the floor of a batch: it reads every row the batch wrote
// for project from, in every table that has a project column (but
// projects, whose row both projects got from the API), rewrites the
// project to to and, timed, COPYs them in one transaction: BEGIN; COPY
// each table, parents first; COMMIT. The tables and their columns come
// from the catalog at run time, generated columns left out, so the floor
// writes what the schema of the day makes contextd write, search vectors
// and indexes included. (Values that embed the project name elsewhere,
// like items.trigger_terms, keep from's name: the same size, which is all
// the floor needs.) With cleanup it then tries to delete its rows.
func copyFloor(ctx context.Context, pool *pgxpool.Pool, from, to string, cleanup bool) (floorRound, error) {
	tables, err := readProjectRows(ctx, pool, from, to)
	if err != nil {
		return floorRound{}, fmt.Errorf("floor: read %s: %w", from, err)
	}
	fr := floorRound{start: time.Now()}
	took := make([]time.Duration, len(tables))
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i, t := range tables {
			start := time.Now()
			if t.replace {
				if _, err := tx.Exec(ctx, "DELETE FROM "+pgx.Identifier{t.name}.Sanitize()+" WHERE "+projectColumn(t.name)+" = $1", to); err != nil {
					return fmt.Errorf("replace %s: %w", t.name, err)
				}
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
			took[i] = time.Since(start)
		}
		return nil
	})
	fr.took = time.Since(fr.start)
	if err != nil {
		return floorRound{}, fmt.Errorf("floor: %w", err)
	}
	for i, t := range tables {
		fr.tables = append(fr.tables, TableRows{Table: t.name, Rows: len(t.rows), Columns: len(t.cols), CopyMS: round(ms(took[i]), 1)})
	}
	if !cleanup {
		fr.kept = "append-only"
		return fr, nil
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i := len(tables) - 1; i >= 0; i-- {
			if _, err := tx.Exec(ctx, "DELETE FROM "+pgx.Identifier{tables[i].name}.Sanitize()+" WHERE "+projectColumn(tables[i].name)+" = $1", to); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "DELETE FROM projects WHERE project = $1", to)
		return err
	})
	if err != nil {
		fr.kept = strings.SplitN(err.Error(), "\n", 2)[0]
	}
	return fr, nil
}

// readProjectRows reads from's rows of every table that has any, parents
// before children, with the project column set to to.
func readProjectRows(ctx context.Context, pool *pgxpool.Pool, from, to string) ([]tableCopy, error) {
	names, err := projectTables(ctx, pool, from)
	if err != nil {
		return nil, err
	}
	var out []tableCopy
	for _, name := range names {
		t := tableCopy{name: name}
		if t.replace, err = hasRows(ctx, pool, name, to); err != nil {
			return nil, err
		}
		if t.cols, err = copyColumns(ctx, pool, name); err != nil {
			return nil, err
		}
		pc := slices.Index(t.cols, projectColumn(name))
		// The chain and its seals are append-only: their rows go after the
		// target's own (its project's entry and that entry's seal),
		// renumbered past the target's last entry, instead of replacing them.
		var seqCols []int
		seqBase := int64(0)
		if (name == "audit_entries" || name == "audit_seals") && t.replace {
			t.replace = false
			for _, c := range []string{"seq", "first_seq"} {
				if i := slices.Index(t.cols, c); i >= 0 {
					seqCols = append(seqCols, i)
				}
			}
			if err := pool.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM audit_entries WHERE chain = $1", to).Scan(&seqBase); err != nil {
				return nil, err
			}
		}
		quoted := make([]string, len(t.cols))
		for i, c := range t.cols {
			quoted[i] = pgx.Identifier{c}.Sanitize()
		}
		rows, err := pool.Query(ctx, "SELECT "+strings.Join(quoted, ", ")+" FROM "+pgx.Identifier{name}.Sanitize()+" WHERE "+projectColumn(name)+" = $1", from)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return nil, err
			}
			vals[pc] = to
			for _, c := range seqCols {
				vals[c] = vals[c].(int64) + seqBase
			}
			t.rows = append(t.rows, vals)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// triggerKept are the tables a trigger on another table writes: the floor's
// COPY of that table fires it, and so writes their rows as contextd's
// write does (item_keyword_terms, 00038, and item_restricted, 00039, from
// items).
var triggerKept = []string{"item_keyword_terms", "item_restricted"}

// projectTables is the tables of the current schema (partitions aside)
// that have a project column and rows of project, projects itself and
// the triggerKept tables left out, ordered so that a table comes after
// those its foreign keys name.
func projectTables(ctx context.Context, pool *pgxpool.Pool, project string) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT c.relname::text FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND (a.attname = 'project' OR c.relname LIKE 'audit\_%' AND a.attname = 'chain') AND NOT a.attisdropped
WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND c.relname <> 'projects' AND c.relname <> ALL ($1)
ORDER BY 1`, triggerKept)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var with []string
	for _, t := range all {
		has, err := hasRows(ctx, pool, t, project)
		if err != nil {
			return nil, err
		}
		if has {
			with = append(with, t)
		}
	}
	rows, err = pool.Query(ctx, `SELECT ch.relname::text, pa.relname::text FROM pg_constraint k
JOIN pg_class ch ON ch.oid = k.conrelid JOIN pg_class pa ON pa.oid = k.confrelid
WHERE k.contype = 'f' AND ch.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND pa.relnamespace = ch.relnamespace
  AND ch.relname = ANY($1) AND pa.relname = ANY($1) AND ch.oid <> pa.oid`, with)
	if err != nil {
		return nil, err
	}
	var edges [][2]string
	var e [2]string
	_, err = pgx.ForEachRow(rows, []any{&e[0], &e[1]}, func() error { edges = append(edges, e); return nil })
	if err != nil {
		return nil, err
	}
	return parentsFirst(with, edges), nil
}

// projectColumn is the column that names a row's project: the audit
// chain's tables name it chain (the project, or "" for the global chain).
func projectColumn(table string) string {
	if strings.HasPrefix(table, "audit_") {
		return "chain"
	}
	return "project"
}

// hasRows reports whether table has rows of project.
func hasRows(ctx context.Context, pool *pgxpool.Pool, table, project string) (bool, error) {
	var has bool
	err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+pgx.Identifier{table}.Sanitize()+" WHERE "+projectColumn(table)+" = $1)", project).Scan(&has)
	return has, err
}

// parentsFirst orders tables so that each comes after the tables it
// references (edges are child, parent), by name among equals.
func parentsFirst(tables []string, edges [][2]string) []string {
	var out []string
	done := map[string]bool{}
	for len(out) < len(tables) {
		progress := false
		for _, t := range tables {
			if done[t] {
				continue
			}
			ready := true
			for _, e := range edges {
				ready = ready && (e[0] != t || done[e[1]])
			}
			if ready {
				out, done[t], progress = append(out, t), true, true
			}
		}
		if !progress { // a cycle: the rest in name order, COPY will say
			for _, t := range tables {
				if !done[t] {
					out, done[t] = append(out, t), true
				}
			}
		}
	}
	return out
}

// copyColumns is the columns a COPY into table sends: all but the
// generated ones (PostgreSQL computes those, for contextd as for the floor)
// and identity columns that refuse values.
func copyColumns(ctx context.Context, pool *pgxpool.Pool, table string) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT attname::text FROM pg_attribute
WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '' AND attidentity <> 'a'
ORDER BY attnum`, pgx.Identifier{table}.Sanitize())
	if err != nil {
		return nil, err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err == nil && !slices.Contains(cols, projectColumn(table)) {
		err = errors.New(table + " has no project column to rewrite")
	}
	return cols, err
}

func (rep *IngestReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "ingest         %d rounds of one batch of %d items of %d bytes, each into a fresh project\n", rep.Rounds, rep.Items, rep.ItemBytes)
	fmt.Fprintf(w, "%-14s %14s %12s  %s\n", "system", "versions/s", "round ms", "each round's versions/s")
	for _, s := range []struct {
		name string
		side IngestSide
	}{{"contextd", rep.Contextd}, {"floor", rep.Floor}} {
		rounds := make([]string, len(s.side.Rounds))
		for i, v := range s.side.Rounds {
			rounds[i] = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(w, "%-14s %14.1f %12.1f  %s\n", s.name, s.side.VersionsPerS, s.side.RoundMS, strings.Join(rounds, " "))
	}
	parts := make([]string, len(rep.Tables))
	for i, t := range rep.Tables {
		parts[i] = fmt.Sprintf("%s %d rows × %d cols in %.0f ms", t.Table, t.Rows, t.Columns, t.CopyMS)
	}
	fmt.Fprintf(w, "floor copies   %s (the last round; BEGIN; COPY each; COMMIT)\n", strings.Join(parts, ", "))
	if rep.PairedRatio != nil {
		fmt.Fprintf(w, "paired ratio   %.3f  (the median over rounds of contextd's versions/s / the floor's in the round after)\n", *rep.PairedRatio)
	}
}
