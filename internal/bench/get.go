package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// getFloorTable is --only get's floor: the table LangGraph's PostgresStore
// keeps its items in (its `store`, under a name of the bench's own so that a
// real store is never touched), created, filled and dropped by the mode.
const getFloorTable = "bench_store_floor"

// getFloorQuery is what PostgresStore runs for a get of one key.
const getFloorQuery = `SELECT key, value, created_at, updated_at FROM bench_store_floor WHERE prefix = $1 AND key = $2`

// runGet seeds (or reuses) the corpus and loads item GETs by key, in
// alternating phases with the floor: PostgresStore's get on a table of as
// many rows of the same items, at the same concurrency.
func (r *runner) runGet(ctx context.Context) (*ModeResult, error) {
	r.setLayers()
	if err := r.seed(ctx); err != nil {
		return nil, err
	}
	pool, err := openPool(ctx, r.cfg.DatabaseURL, r.cfg.Concurrency, nil)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if err := r.settle(ctx, pool); err != nil {
		return nil, err
	}
	if err := r.createAgents(ctx); err != nil {
		return nil, err
	}
	rows, err := fillStoreFloor(ctx, pool, r.layers, !r.cfg.NoAnalyze)
	defer func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+getFloorTable)
	}()
	if err != nil {
		return nil, err
	}
	m, err := r.phasedMode(ctx, OpGet, func(ctx context.Context, system string, w int, deadline time.Time) {
		wk := r.workers[w]
		for ctx.Err() == nil && time.Now().Before(deadline) {
			wk.n++
			l := r.layers[wk.rng.IntN(r.cfg.Projects)]
			it := l.items[wk.rng.IntN(len(l.items))]
			for tries := 0; it.HiddenFrom(wk.role) && tries < 10; tries++ {
				it = l.items[wk.rng.IntN(len(l.items))]
			}
			if system == OpFloor {
				start := time.Now()
				err := getFloor(ctx, pool, l.project, it.Key)
				r.rec.add(floorOp(OpGet), time.Since(start), err)
				continue
			}
			start := time.Now()
			_, _, err := r.c.do(ctx, http.MethodGet, "/v1/projects/"+l.project+"/items/"+it.Key, wk.key, nil)
			r.rec.add(OpGet, time.Since(start), err)
		}
	})
	if err != nil {
		return nil, err
	}
	m.Note = fmt.Sprintf("floor: LangGraph PostgresStore's get (%s) on %s, %d rows: the corpus's items as JSON; dropped at the end",
		getFloorQuery, getFloorTable, rows)
	return m, nil
}

// fillStoreFloor (re)creates getFloorTable as PostgresStore creates its
// store and COPYs every item of the corpus into it (prefix the project,
// value the item's JSON), then analyses it if analyze (as contextd's tables
// were, or were not). It returns the rows.
func fillStoreFloor(ctx context.Context, pool *pgxpool.Pool, layers []layer, analyze bool) (int, error) {
	_, err := pool.Exec(ctx, `DROP TABLE IF EXISTS `+getFloorTable+`;
CREATE TABLE `+getFloorTable+` (
    prefix text NOT NULL,
    key text NOT NULL,
    value jsonb NOT NULL,
    created_at timestamptz DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamptz DEFAULT CURRENT_TIMESTAMP,
    expires_at timestamptz,
    ttl_minutes int,
    PRIMARY KEY (prefix, key)
)`)
	if err != nil {
		return 0, fmt.Errorf("floor: create %s: %w", getFloorTable, err)
	}
	var rows [][]any
	for _, l := range layers {
		for _, it := range l.items {
			v, _ := json.Marshal(it) // an Item always encodes
			rows = append(rows, []any{l.project, it.Key, string(v)})
		}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{getFloorTable}, []string{"prefix", "key", "value"}, pgx.CopyFromRows(rows)); err != nil {
		return 0, fmt.Errorf("floor: fill %s: %w", getFloorTable, err)
	}
	if !analyze {
		return len(rows), nil
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+getFloorTable); err != nil {
		return 0, fmt.Errorf("floor: analyze %s: %w", getFloorTable, err)
	}
	return len(rows), nil
}

// getFloor is one PostgresStore get: the row of (prefix, key), read whole.
func getFloor(ctx context.Context, pool *pgxpool.Pool, prefix, key string) error {
	var (
		k        string
		value    []byte
		cre, upd time.Time
	)
	return pool.QueryRow(ctx, getFloorQuery, prefix, key).Scan(&k, &value, &cre, &upd)
}
