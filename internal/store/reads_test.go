package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// Tx.Reads sends its reads' statements, with BEGIN, in one round trip;
// each read scans its own answer, whatever the order in which they were
// written; a read that sends nothing is no statement; and the
// transaction goes on after it.
func TestReadsGoInOneRoundTrip(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	got := make([]string, 20)
	before := st.RoundTrips()
	require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) error {
		var reads []func(store.DB) error
		for i := range got {
			reads = append(reads, func(db store.DB) (err error) {
				if i%5 == 4 {
					got[i] = "none"
					return nil // a read with nothing to read
				}
				got[i], err = store.DBQueryTextForTest(ctx, db, fmt.Sprintf("SELECT repeat('r', %d) || ' %d'", 1000*i, i))
				return err
			})
		}
		if err := tx.Reads(ctx, reads...); err != nil {
			return err
		}
		require.Equal(t, int64(1), st.RoundTrips()-before, "BEGIN and 16 reads")
		s, err := store.QueryTextForTest(ctx, tx, "SHOW transaction_isolation")
		require.Equal(t, "repeatable read", s, "the reads ran in the transaction")
		return err
	}))
	for i, s := range got {
		if i%5 == 4 {
			require.Equal(t, "none", s)
			continue
		}
		require.Equal(t, fmt.Sprintf("%s %d", strings.Repeat("r", 1000*i), i), s, "read %d has its own answer", i)
	}
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error { return tx.Reads(ctx) }), "no reads")
}

// The first failing read's error is Reads' error, the reads after it in
// the batch fail too (the transaction is aborted), and the reads before it
// keep their answers; a read that sends two statements is refused.
func TestReadsErrors(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	var first, third string
	var thirdErr error
	err := st.Snapshot(ctx, func(tx *store.Tx) error {
		return tx.Reads(ctx,
			func(db store.DB) (err error) {
				first, err = store.DBQueryTextForTest(ctx, db, "SELECT 'one'")
				return err
			},
			func(db store.DB) error { _, err := store.DBQueryTextForTest(ctx, db, "SELECT 1/0"); return err },
			func(db store.DB) error {
				third, thirdErr = store.DBQueryTextForTest(ctx, db, "SELECT 'three'")
				return thirdErr
			},
		)
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "division by zero")
	require.Equal(t, "one", first)
	require.Error(t, thirdErr, "the read after the failed one fails")
	require.Empty(t, third)

	err = st.Snapshot(ctx, func(tx *store.Tx) error {
		return tx.Reads(ctx, func(db store.DB) error { return store.DBTwoStatementsForTest(ctx, db) })
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "one statement")

	boom := errors.New("boom")
	err = st.Snapshot(ctx, func(tx *store.Tx) error {
		return tx.Reads(ctx, func(store.DB) error { return boom }, func(db store.DB) error {
			_, err := store.DBQueryTextForTest(ctx, db, "SELECT 'x'")
			return err
		})
	})
	require.ErrorIs(t, err, boom, "a read's own error, without a statement")
}

// Tx.GenericPlans turns generic plans on for the rest of the transaction
// (a packet's assembly, after its first reads), sent with the next
// statement in its round trip, and only for that transaction.
func TestGenericPlansGoWithTheNextStatement(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	show := func(tx *store.Tx) (string, error) {
		return store.QueryTextForTest(ctx, tx,
			"SELECT current_setting('transaction_isolation') || ',' || current_setting('transaction_read_only') || ',' || current_setting('plan_cache_mode')")
	}
	var before, after, next string
	trips := st.RoundTrips()
	require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) (err error) {
		if before, err = show(tx); err != nil {
			return err
		}
		tx.GenericPlans()
		after, err = show(tx)
		return err
	}))
	require.Equal(t, int64(3), st.RoundTrips()-trips, "BEGIN and a read; the setting and a read; COMMIT")
	require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) (err error) { next, err = show(tx); return err }))
	require.Equal(t, "repeatable read,on,auto", before)
	require.Equal(t, "repeatable read,on,force_generic_plan", after)
	require.Equal(t, "repeatable read,on,auto", next, "the setting was the transaction's alone")
}
