package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// What the planner knew about the corpus when the load began (Result's and
// ModeResult's statistics): a plan can differ by orders of magnitude with
// and without statistics, so every figure says which it was measured with.
const (
	// StatsAnalyzed: bench ran VACUUM (ANALYZE) on the database after
	// seeding, as an operator would after a bulk import.
	StatsAnalyzed = "analyzed"
	// StatsNone: not analysed (--no-analyze; the write modes never
	// analyse), and the corpus's tables have no statistics: the first
	// minute after an import into a new database.
	StatsNone = "none"
	// StatsPresent: not analysed by this run, but statistics of the
	// corpus's tables were there already (an earlier run's ANALYZE, autovacuum, or
	// contextd's own), so this is not the first minute.
	StatsPresent = "present"
	// StatsUnknown: no --database-url, so bench could neither analyse the
	// database nor look.
	StatsUnknown = "unknown"
)

// statsQuery asks whether any of the tables $1 has planner statistics,
// which tells a first-minute database from an analysed one.
const statsQuery = `SELECT EXISTS (SELECT 1 FROM pg_stats WHERE schemaname = current_schema() AND tablename = ANY($1))`

// corpusTables are the tables seeding bulk-loads and assembly reads.
var corpusTables = []string{"items", "item_versions", "item_terms"}

// settle prepares the database as cfg asks once seeding is done: VACUUM
// (ANALYZE) of the whole database (the visibility map and the statistics
// of every table seeding wrote, as after an operator's VACUUM ANALYZE), or
// with NoAnalyze nothing at all. r.stats then says what the planner knows.
func (r *runner) settle(ctx context.Context, pool *pgxpool.Pool) error {
	if r.cfg.NoAnalyze {
		return r.inspect(ctx, pool, corpusTables...)
	}
	r.logf("VACUUM (ANALYZE) the database (--no-analyze measures without)")
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		return fmt.Errorf("vacuum analyze: %w", err)
	}
	r.stats = StatsAnalyzed
	return nil
}

// inspect sets r.stats from the catalog's statistics of tables, for a run
// that analyses nothing.
func (r *runner) inspect(ctx context.Context, pool *pgxpool.Pool, tables ...string) error {
	var present bool
	if err := pool.QueryRow(ctx, statsQuery, tables).Scan(&present); err != nil {
		return fmt.Errorf("read the planner's statistics: %w", err)
	}
	r.stats = StatsNone
	if present {
		r.stats = StatsPresent
	}
	if !present && r.cfg.NoAnalyze {
		r.logf("--no-analyze: no VACUUM, no ANALYZE; the planner has no statistics of %s", strings.Join(tables, ", "))
	}
	if present && r.cfg.NoAnalyze {
		r.logf("--no-analyze, but %s had statistics from before this run: use a new database to measure the first minute", strings.Join(tables, ", "))
	}
	return nil
}

// statsText is the statistics line of the text output.
func statsText(stats string) string {
	switch stats {
	case StatsAnalyzed:
		return "analyzed (VACUUM ANALYZE after seeding)"
	case StatsNone:
		return "none (not analyzed: the first minute after an import)"
	case StatsPresent:
		return "present from before this run (not analyzed by it)"
	default:
		return "unknown (no --database-url)"
	}
}
