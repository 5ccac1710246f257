package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A serialization failure runs the whole transaction again, and is counted.
func TestSerializationFailureIsRetried(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	attempts := 0
	err := st.InTx(ctx, func(tx *store.Tx) error {
		attempts++
		if attempts == 1 {
			return store.RaiseForTest(ctx, tx, "40001")
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, attempts)
	require.Equal(t, int64(1), st.Retries())
}

// A deadlock that keeps coming gives up after MaxRetries: unavailable, not
// an internal error.
func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	attempts := 0
	err := st.InTx(ctx, func(tx *store.Tx) error {
		attempts++
		return store.RaiseForTest(ctx, tx, "40P01")
	})
	require.ErrorIs(t, err, fault.ErrUnavailable)
	require.False(t, store.Retryable(err), "a retried-out error is not retried again by an outer layer")
	require.Equal(t, store.MaxRetries+1, attempts)
	require.Equal(t, int64(store.MaxRetries), st.Retries())
}

// A connection lost before COMMIT was sent (here the server terminates
// the backend under the transaction) runs the transaction again on a new
// connection.
func TestLostConnectionBeforeCommitIsRetried(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	attempts := 0
	err := st.InTx(ctx, func(tx *store.Tx) error {
		attempts++
		if attempts == 1 {
			return store.TerminateForTest(ctx, tx)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, attempts)
	require.Equal(t, int64(1), st.Retries())
}

// Other errors are not retried.
func TestOtherErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	attempts := 0
	boom := errors.New("boom")
	err := st.InTx(context.Background(), func(tx *store.Tx) error {
		attempts++
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, attempts)
	require.Zero(t, st.Retries())
}

// An exhausted pool answers unavailable within the acquire timeout
// instead of waiting forever.
func TestPoolExhaustedIsUnavailable(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	st := store.New(pool, 200*time.Millisecond)
	ctx := context.Background()
	// The connections are taken with the default acquire timeout (opening
	// them may take longer than 200 ms on a busy machine), and given back
	// before the pool closes even when an assertion fails.
	holder := store.New(pool, 0)
	var held []*store.Tx
	t.Cleanup(func() {
		for _, tx := range held {
			tx.Rollback(ctx)
		}
	})
	for range int(pool.Config().MaxConns) {
		tx, err := holder.Begin(ctx, store.TxOpts{})
		require.NoError(t, err)
		held = append(held, tx)
	}
	start := time.Now()
	_, err := st.ProjectGet(ctx, "anything")
	require.ErrorIs(t, err, fault.ErrUnavailable)
	require.Less(t, time.Since(start), 5*time.Second)
	for _, tx := range held {
		tx.Rollback(ctx)
	}
	held = nil
	_, err = st.ProjectGet(ctx, "anything")
	require.ErrorIs(t, err, fault.ErrNotFound, "the pool is usable again")
}

// A database whose schema is newer than the binary's migrations is refused:
// an older server would write derived rows the newer schema defines
// differently.
func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	url := pool.Config().ConnString()
	require.NoError(t, store.MigrateUp(ctx, url), "a current schema is fine")
	pending, err := store.MigrationsPending(ctx, url)
	require.NoError(t, err)
	require.False(t, pending)
	_, err = pool.Exec(ctx, "INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)")
	require.NoError(t, err)
	err = store.MigrateUp(ctx, url)
	require.ErrorContains(t, err, "newer than this contextd")
	_, err = store.MigrationsPending(ctx, url)
	require.ErrorContains(t, err, "newer than this contextd")
}

// Open turns JIT compilation off on its connections (a batch's row lock
// spent most of its time compiling), unless the URL sets jit itself.
func TestOpenTurnsJITOffUnlessTheURLSetsIt(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for _, c := range []struct{ url, want string }{{url, "off"}, {url + sep + "jit=on", "on"}} {
		st, err := store.Open(t.Context(), store.Config{URL: c.url, AcquireTimeout: pgtest.AcquireTimeout})
		require.NoError(t, err)
		tx, err := st.Begin(t.Context(), store.TxOpts{})
		require.NoError(t, err)
		got, err := store.QueryTextForTest(t.Context(), tx, "SHOW jit")
		tx.Rollback(t.Context())
		st.Close()
		require.NoError(t, err)
		require.Equal(t, c.want, got, c.url)
	}
}

// The bulk append (a transaction of BulkAppendMin entries or more) writes
// what contextd_audit_append writes for the same bodies: the same seqs,
// hashes and heads, a head made when the chain has none, and two chains of
// one transaction each linked on its own. The function's side appends the
// same entries in transactions too small for the bulk path.
func TestBulkAppendWritesWhatTheFunctionWrites(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := t.Context()
	n := store.BulkAppendMin + 44
	body := func(chain string, i int) []byte { return fmt.Appendf(nil, `{"chain":%q,"i":%d}`, chain, i) }
	write := func(prefix string, from, to int) int64 {
		t.Helper()
		before := st.RoundTrips()
		require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
			for i := from; i < to; i++ {
				for _, c := range []string{"b", "a"} { // interleaved, and out of chain order
					if err := store.EntryForTest(tx, prefix+c, "test", fmt.Sprintf("%s%d", c, i), body(c, i)); err != nil {
						return err
					}
				}
			}
			return nil
		}))
		return st.RoundTrips() - before
	}
	// 2n entries in one transaction: the bulk path, whose head reads and
	// COPYs take round trips of their own (the function's go with COMMIT).
	require.GreaterOrEqual(t, write("bulk-", 0, n), int64(5))
	for from := 0; from < n; from += store.BulkAppendMin / 4 {
		// 2 × BulkAppendMin/4 < BulkAppendMin: the function, with COMMIT
		require.Equal(t, int64(1), write("fn-", from, min(from+store.BulkAppendMin/4, n)))
	}
	for _, c := range []string{"a", "b"} {
		bulk, err := st.AuditEntries(ctx, "bulk-"+c, 0, 2*n)
		require.NoError(t, err)
		fn, err := st.AuditEntries(ctx, "fn-"+c, 0, 2*n)
		require.NoError(t, err)
		require.Len(t, bulk, n)
		require.Equal(t, fn, bulk, "chain %s", c)
		bseq, bhash, err := st.AuditHead(ctx, "bulk-"+c)
		require.NoError(t, err)
		fseq, fhash, err := st.AuditHead(ctx, "fn-"+c)
		require.NoError(t, err)
		require.Equal(t, int64(n), bseq)
		require.Equal(t, []any{fseq, fhash}, []any{bseq, bhash})
		require.Equal(t, bulk[n-1].ChainHash, bhash)
	}
}
