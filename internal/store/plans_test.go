package store_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// The write path's statements find their rows by key, one index probe each,
// whatever the planner's statistics: with statistics taken while the tables
// were nearly empty (autovacuum off, or not yet run) and generic plans (a
// pooled connection's cached statements), an item write in a project of
// 2,000 items reads a handful of index entries, not the project's.
func TestItemWritesProbeByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	a, admin := withAcme(t, st)
	relevance := func(i int, s string) item.Input {
		return item.Input{Key: fmt.Sprintf("k%04d", i), Content: "refund rule " + s + " " + strconv.Itoa(i),
			Trigger: &ctxtype.Trigger{Relevance: true}}
	}
	_, err := a.Items.Batch(ctx, admin, "acme", []item.Input{relevance(0, "a"), relevance(1, "a")})
	require.NoError(t, err)
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		return store.ExecForTest(ctx, tx, "ANALYZE items, item_versions, item_terms") // nearly empty
	}))
	var ins []item.Input
	for i := range 2000 {
		ins = append(ins, relevance(i, "b"))
	}
	_, err = a.Items.Batch(ctx, admin, "acme", ins)
	require.NoError(t, err)

	// pg_stat_xact_user_tables holds what the backend has not yet reported,
	// which may include earlier transactions': the write's own reads are
	// the difference across it.
	const counts = `SELECT relname, seq_scan, coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables
		WHERE relname IN ('items', 'item_versions', 'item_terms')`
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		// Read inside the transaction, checked after it: a failed check
		// inside would leave the connection taken.
		var before, after map[string][2]int64
		require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
			if err := store.ExecForTest(ctx, tx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
				return err
			}
			if before, err = store.TableCountsForTest(ctx, tx, counts); err != nil {
				return err
			}
			if _, err := a.Items.PutTx(ctx, tx, admin, "acme", relevance(7, "c "+mode), item.PutOpts{}); err != nil {
				return err
			}
			after, err = store.TableCountsForTest(ctx, tx, counts)
			return err
		}))
		for _, name := range []string{"items", "item_versions", "item_terms"} {
			seq, fetched := after[name][0]-before[name][0], after[name][1]-before[name][1]
			t.Logf("%s: %s: %d sequential scans, %d rows fetched by index", mode, name, seq, fetched)
			require.Zero(t, seq, "%s: %s scanned whole", mode, name)
			require.Less(t, fetched, int64(50), "%s: %s: rows fetched by index for one write", mode, name)
		}
	}
}
