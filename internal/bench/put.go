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
	pf, err := newPutFloor(ctx, pool, project)
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

// putFloor inserts rows like contextd's versions into putFloorTable.
type putFloor struct {
	pool      *pgxpool.Pool
	sql       string
	keyCol    int
	templates [][]any
	indexes   int
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
		err = pool.QueryRow(ctx, "SELECT count(*) FROM pg_index WHERE indrelid = $1::regclass", t).Scan(&f.indexes)
	}
	if err != nil {
		f.drop(ctx)
		return nil, fmt.Errorf("floor: %w", err)
	}
	return f, nil
}

// insert writes template n (modulo) again under key, in a transaction of
// its own.
func (f *putFloor) insert(ctx context.Context, key string, n int) error {
	vals := slices.Clone(f.templates[n%len(f.templates)])
	vals[f.keyCol] = key
	_, err := f.pool.Exec(ctx, f.sql, vals...)
	return err
}

func (f *putFloor) drop(ctx context.Context) {
	_, _ = f.pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+pgx.Identifier{putFloorTable}.Sanitize())
}
