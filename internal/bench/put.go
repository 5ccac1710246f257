package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// putFloorTable is --only put's floor table: item_versions' columns,
// defaults, generated search vector, constraints and indexes (LIKE ...
// INCLUDING ALL), without its foreign key and triggers. The bench owns it:
// it is created at the start of the mode and dropped at its end.
const putFloorTable = "bench_put_floor"

// putWarmups is the number of unrecorded writes each worker makes before
// the load: they open the connections, and their rows are the ones the
// floor inserts again.
const putWarmups = 8

// runPut loads item PUTs of distinct keys into a fresh project, in
// alternating phases with the floor: one INSERT per row into a copy of
// item_versions' indexes, at the same concurrency.
func (r *runner) runPut(ctx context.Context) (*ModeResult, error) {
	pool, err := openPool(ctx, r.cfg.DatabaseURL, r.cfg.Concurrency, nil)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	// It writes into fresh projects and analyses nothing: say what the
	// planner knew of the tables it writes.
	if err := r.inspect(ctx, pool, corpusTables...); err != nil {
		return nil, err
	}
	project := "bench-put-" + r.runID
	if err := r.createProject(ctx, project, "contextd bench put"); err != nil {
		return nil, err
	}
	r.projects = []string{project}
	if err := r.createAgents(ctx); err != nil {
		return nil, err
	}
	items := r.corpus.Layer(project, 1000, r.cfg.Always)
	g, gctx := newGroup(ctx)
	for w, wk := range r.workers {
		g.Go(func() error {
			for i := range putWarmups {
				path := fmt.Sprintf("/v1/projects/%s/items/warm-%d-%d", project, w, i)
				if _, _, err := r.c.do(gctx, http.MethodPut, path, wk.key, r.putBody(wk, items)); err != nil {
					return fmt.Errorf("warm-up write: %w", err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	newFloor := newPutFloor
	if r.cfg.PutFloor == PutFloorWrite {
		newFloor = newPutWriteFloor
	}
	pf, err := newFloor(ctx, pool, project)
	if err != nil {
		return nil, err
	}
	defer pf.drop(ctx)
	m, err := r.phasedMode(ctx, OpPut, func(ctx context.Context, system string, w int, deadline time.Time) {
		wk := r.workers[w]
		for ctx.Err() == nil && time.Now().Before(deadline) {
			wk.n++
			key := fmt.Sprintf("put-%d-%d", w, wk.n)
			if system == OpFloor {
				start := time.Now()
				err := pf.insert(ctx, key, w+wk.n)
				r.rec.add(floorOp(OpPut), time.Since(start), err)
				continue
			}
			body := r.putBody(wk, items)
			start := time.Now()
			_, _, err := r.c.do(ctx, http.MethodPut, "/v1/projects/"+project+"/items/"+key, wk.key, body)
			r.rec.add(OpPut, time.Since(start), err)
		}
	})
	if err != nil {
		return nil, err
	}
	m.Note = fmt.Sprintf("floor: one INSERT per row (autocommit) into %s (LIKE item_versions INCLUDING ALL: %d indexes), rows of contextd's warm-up writes; dropped at the end",
		putFloorTable, pf.indexes)
	if pf.copies != nil {
		m.Note = fmt.Sprintf("floor (--put-floor write): per PUT, one transaction copying a warm-up item's rows (version, item row with its search vector, relevance and keyword term rows; not the chain's entry) into %s (LIKE ... INCLUDING ALL: %d indexes); dropped at the end",
			floorCopies(), pf.indexes)
	}
	return m, nil
}

// putBody is the encoded body of a PUT: an item of the corpus the worker's
// role may see, with new content of --ingest-size bytes (encoded before the
// clock starts, so the client's JSON is not in the figure).
func (r *runner) putBody(wk *worker, items []Item) []byte {
	it := items[wk.rng.IntN(len(items))]
	for tries := 0; it.HiddenFrom(wk.role) && tries < 10; tries++ {
		it = items[wk.rng.IntN(len(items))]
	}
	it.Key = ""
	it = r.corpus.sized(it, r.cfg.IngestSize, wk.rng)
	b, _ := json.Marshal(it) // an Item always encodes
	return b
}

// The floors of --only put (--put-floor). PutFloorInsert is the issue's:
// one INSERT of a version's row. PutFloorWrite is every row a PUT writes
// but the chain's entry, in one transaction: the version, the item row with
// its finished search vector, a relevance item's item_terms rows, a
// keyword item's item_keyword_terms rows and a restricted item's
// item_restricted rows, each into a copy of its table with the same
// indexes.
const (
	PutFloorInsert = "insert"
	PutFloorWrite  = "write"
)

// putFloorTables are the copies PutFloorWrite writes into, by the table
// they copy (LIKE ... INCLUDING ALL); putFloorTable is item_versions'. A
// PUT writes exactly one row of the tables marked one.
var putFloorTables = []struct {
	source, copy string
	one          bool
}{
	{"item_versions", putFloorTable, true},
	{"items", "bench_put_floor_items", true},
	{"item_terms", "bench_put_floor_terms", false},
	// A keyword item's terms (00038), which a trigger on items writes for
	// contextd; a copy made LIKE items has no trigger.
	{"item_keyword_terms", "bench_put_floor_keyword_terms", false},
	// A restricted always-on or tool item's row (00039), likewise.
	{"item_restricted", "bench_put_floor_restricted", false},
}

// putFloor inserts rows like contextd's versions into putFloorTable, or
// (PutFloorWrite) all of a PUT's rows into putFloorTables.
type putFloor struct {
	pool      *pgxpool.Pool
	sql       string
	keyCol    int
	templates [][]any
	indexes   int

	// PutFloorWrite: copies holds one INSERT ... SELECT per table of
	// putFloorTables, taking the rows of warm-up key $2 of project $1 under
	// key $3; keys are the warm-up keys of project.
	copies  []string
	keys    []string
	project string
}

// newPutFloor (re)creates putFloorTable and reads the rows contextd wrote
// for project as the templates of the floor's rows.
func newPutFloor(ctx context.Context, pool *pgxpool.Pool, project string) (*putFloor, error) {
	t := pgx.Identifier{putFloorTable}.Sanitize()
	if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+t+"; CREATE TABLE "+t+" (LIKE item_versions INCLUDING ALL)"); err != nil {
		return nil, fmt.Errorf("floor: create %s: %w", putFloorTable, err)
	}
	f := &putFloor{pool: pool}
	cols, err := copyColumns(ctx, pool, putFloorTable)
	if err != nil {
		f.drop(ctx)
		return nil, fmt.Errorf("floor: columns of %s: %w", putFloorTable, err)
	}
	f.keyCol = slices.Index(cols, "key")
	quoted, params := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		quoted[i], params[i] = pgx.Identifier{c}.Sanitize(), fmt.Sprintf("$%d", i+1)
	}
	f.sql = "INSERT INTO " + t + " (" + strings.Join(quoted, ", ") + ") VALUES (" + strings.Join(params, ", ") + ")"
	rows, err := pool.Query(ctx, "SELECT "+strings.Join(quoted, ", ")+" FROM item_versions WHERE project = $1 LIMIT 256", project)
	if err == nil {
		f.templates, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) { return row.Values() })
	}
	if err == nil && (len(f.templates) == 0 || f.keyCol < 0) {
		err = fmt.Errorf("no versions of %s to insert again", project)
	}
	if err == nil {
		f.indexes, err = countIndexes(ctx, pool, t)
	}
	if err != nil {
		f.drop(ctx)
		return nil, fmt.Errorf("floor: %w", err)
	}
	return f, nil
}

// newPutWriteFloor (re)creates putFloorTables and finds the warm-up keys
// whose rows it copies. Each write copies the rows with INSERT ... SELECT
// from the tables contextd wrote (an index probe each, the floor's only
// extra), so their values, search vectors included, are contextd's.
func newPutWriteFloor(ctx context.Context, pool *pgxpool.Pool, project string) (*putFloor, error) {
	f := &putFloor{pool: pool, project: project}
	for _, t := range putFloorTables {
		q := pgx.Identifier{t.copy}.Sanitize()
		if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+q+"; CREATE TABLE "+q+" (LIKE "+pgx.Identifier{t.source}.Sanitize()+" INCLUDING ALL)"); err != nil {
			f.drop(ctx)
			return nil, fmt.Errorf("floor: create %s: %w", t.copy, err)
		}
		cols, err := copyColumns(ctx, pool, t.copy)
		if err != nil {
			f.drop(ctx)
			return nil, fmt.Errorf("floor: columns of %s: %w", t.copy, err)
		}
		quoted, sel := make([]string, len(cols)), make([]string, len(cols))
		for i, c := range cols {
			quoted[i], sel[i] = pgx.Identifier{c}.Sanitize(), pgx.Identifier{c}.Sanitize()
			if c == "key" {
				sel[i] = "$3::text"
			}
		}
		f.copies = append(f.copies, "INSERT INTO "+q+" ("+strings.Join(quoted, ", ")+") SELECT "+strings.Join(sel, ", ")+
			" FROM "+pgx.Identifier{t.source}.Sanitize()+" WHERE project = $1 AND key = $2")
		n, err := countIndexes(ctx, pool, q)
		if err != nil {
			f.drop(ctx)
			return nil, fmt.Errorf("floor: %w", err)
		}
		f.indexes += n
	}
	rows, err := pool.Query(ctx, "SELECT key FROM items WHERE project = $1 AND key LIKE 'warm-%' ORDER BY key", project)
	if err == nil {
		f.keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err == nil && len(f.keys) == 0 {
		err = fmt.Errorf("no items of %s to write again", project)
	}
	if err != nil {
		f.drop(ctx)
		return nil, fmt.Errorf("floor: %w", err)
	}
	return f, nil
}

// countIndexes is the number of indexes of table (a quoted name).
func countIndexes(ctx context.Context, pool *pgxpool.Pool, table string) (int, error) {
	var n int
	err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_index WHERE indrelid = $1::regclass", table).Scan(&n)
	return n, err
}

// insert writes template n (modulo) again under key, in a transaction of
// its own: one row, or (PutFloorWrite) all of the warm-up item's rows in
// one pipeline, which runs as one implicit transaction.
func (f *putFloor) insert(ctx context.Context, key string, n int) error {
	if f.copies != nil {
		b := &pgx.Batch{}
		from := f.keys[n%len(f.keys)]
		for _, q := range f.copies {
			b.Queue(q, f.project, from, key)
		}
		br := f.pool.SendBatch(ctx, b)
		for _, t := range putFloorTables {
			tag, err := br.Exec()
			if err == nil && t.one && tag.RowsAffected() != 1 {
				err = fmt.Errorf("floor: %s of %s copied %d rows, not 1", t.copy, from, tag.RowsAffected())
			}
			if err != nil {
				_ = br.Close()
				return err
			}
		}
		return br.Close()
	}
	vals := slices.Clone(f.templates[n%len(f.templates)])
	vals[f.keyCol] = key
	_, err := f.pool.Exec(ctx, f.sql, vals...)
	return err
}

// floorCopies names putFloorTables' copies, for the mode's note.
func floorCopies() string {
	names := make([]string, len(putFloorTables))
	for i, t := range putFloorTables {
		names[i] = t.copy
	}
	return strings.Join(names, ", ")
}

func (f *putFloor) drop(ctx context.Context) {
	for _, t := range putFloorTables {
		_, _ = f.pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+pgx.Identifier{t.copy}.Sanitize())
	}
}
