package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// A transaction sends BEGIN with its first statement, and one that runs
// none sends nothing at all.
func TestBeginGoesWithTheFirstStatement(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	before := st.RoundTrips()
	require.NoError(t, st.InTx(ctx, func(*store.Tx) error { return nil }))
	require.Equal(t, before, st.RoundTrips(), "an empty transaction")
	before = st.RoundTrips()
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		s, err := store.QueryTextForTest(ctx, tx, "SELECT 'x'")
		require.Equal(t, "x", s)
		return err
	}))
	require.Equal(t, before+2, st.RoundTrips(), "BEGIN with the read, then COMMIT")
	require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) error {
		iso, err := store.QueryTextForTest(ctx, tx, "SHOW transaction_isolation")
		require.Equal(t, "repeatable read", iso)
		ro, _ := store.QueryTextForTest(ctx, tx, "SHOW transaction_read_only")
		require.Equal(t, "on", ro)
		return err
	}))
}

// In a pipeline, writes wait for the next read; the error of one that
// fails is the read's, and the transaction keeps nothing.
func TestPipelineErrorsAndOrder(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	var readErr error
	err := st.InTx(ctx, func(tx *store.Tx) error {
		return tx.Pipeline(ctx, func() error {
			require.NoError(t, store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('pipe-a')"))
			require.NoError(t, store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('pipe-a')"), "waits: no error yet")
			_, readErr = store.QueryTextForTest(ctx, tx, "SELECT 'after'")
			return readErr
		})
	})
	require.ErrorIs(t, readErr, fault.ErrConflict, "the duplicate's error is reported by the read that sent it")
	require.ErrorIs(t, err, fault.ErrConflict)
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		n, err := store.QueryTextForTest(ctx, tx, "SELECT count(*)::text FROM projects WHERE project = 'pipe-a'")
		require.Equal(t, "0", n, "nothing of the failed transaction is kept")
		return err
	}))
	// In order: the second statement sees the first.
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		return tx.Pipeline(ctx, func() error {
			require.NoError(t, store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('pipe-b')"))
			n, err := store.QueryTextForTest(ctx, tx, "SELECT count(*)::text FROM projects WHERE project = 'pipe-b'")
			require.Equal(t, "1", n)
			return err
		})
	}))
}

// What waits for COMMIT is undone with a savepoint that rolls back, and
// sent with COMMIT otherwise.
func TestAtCommitFollowsSavepoints(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	refused := errors.New("refused")
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		err := tx.Savepoint(ctx, func(tx *store.Tx) error {
			require.NoError(t, store.AtCommitForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('undone')"))
			return refused
		})
		require.ErrorIs(t, err, refused)
		require.NoError(t, tx.Savepoint(ctx, func(tx *store.Tx) error {
			return store.AtCommitForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('kept')")
		}))
		return nil
	}))
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		got, err := store.QueryTextForTest(ctx, tx, "SELECT string_agg(project, ',' ORDER BY project) FROM projects WHERE project IN ('undone', 'kept')")
		require.Equal(t, "kept", got)
		return err
	}))
}

// A savepoint taken inside a pipeline keeps what the pipeline queued
// before it when fn fails, and rolls back only fn's statements.
func TestSavepointInsidePipeline(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	refused := errors.New("refused")
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		return tx.Pipeline(ctx, func() error {
			require.NoError(t, store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('before-sp')"))
			err := tx.Savepoint(ctx, func(tx *store.Tx) error {
				require.NoError(t, store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('in-sp')"))
				return refused
			})
			require.ErrorIs(t, err, refused)
			return store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('after-sp')")
		})
	}))
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		got, err := store.QueryTextForTest(ctx, tx, "SELECT string_agg(project, ',' ORDER BY project) FROM projects WHERE project IN ('before-sp', 'in-sp', 'after-sp')")
		require.Equal(t, "after-sp,before-sp", got)
		return err
	}))
}

// A pipeline sent unread is answered by the next call: its error is that
// call's, whatever the call (a read, a COPY, COMMIT), the transaction
// keeps nothing, and the connection goes back to the pool usable.
func TestPipelineUnread(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	dup := func(tx *store.Tx, project string) error {
		return store.PipelineUnreadForTest(ctx, tx, func() error {
			require.NoError(t, store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('"+project+"')"))
			require.NoError(t, store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('"+project+"')"))
			return nil
		})
	}
	var readErr error
	err := st.InTx(ctx, func(tx *store.Tx) error {
		require.NoError(t, dup(tx, "unread-a"), "sent, not yet answered")
		_, readErr = store.QueryTextForTest(ctx, tx, "SELECT 'after'")
		return readErr
	})
	require.ErrorIs(t, readErr, fault.ErrConflict, "the next read reports the duplicate")
	require.ErrorIs(t, err, fault.ErrConflict)
	err = st.InTx(ctx, func(tx *store.Tx) error { return dup(tx, "unread-b") })
	require.ErrorIs(t, err, fault.ErrConflict, "COMMIT reports it when nothing else follows")
	refused := errors.New("refused")
	err = st.InTx(ctx, func(tx *store.Tx) error {
		require.NoError(t, dup(tx, "unread-c"))
		return refused
	})
	require.ErrorIs(t, err, refused, "a transaction refused by its caller rolls back with its answers unread")
	for range 3 { // the pool's connections still work, and nothing was kept
		require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
			n, err := store.QueryTextForTest(ctx, tx, "SELECT count(*)::text FROM projects WHERE project LIKE 'unread-%'")
			require.Equal(t, "0", n)
			return err
		}))
	}
	// Answered in order, and committed when all is well.
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		require.NoError(t, store.PipelineUnreadForTest(ctx, tx, func() error {
			return store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('unread-d')")
		}))
		n, err := store.QueryTextForTest(ctx, tx, "SELECT count(*)::text FROM projects WHERE project = 'unread-d'")
		require.Equal(t, "1", n)
		return err
	}))
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		return store.PipelineUnreadForTest(ctx, tx, func() error {
			return store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('unread-e')")
		})
	}))
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		n, err := store.QueryTextForTest(ctx, tx, "SELECT count(*)::text FROM projects WHERE project = 'unread-e'")
		require.Equal(t, "1", n, "COMMIT read the answers and committed")
		return err
	}))
}

// A transaction with GenericPlans runs its statements with their generic
// plans, set with BEGIN (no round trip of its own) and for it alone.
func TestGenericPlansTransaction(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	before := st.RoundTrips()
	require.NoError(t, st.InTxOpts(ctx, store.TxOpts{GenericPlans: true}, func(tx *store.Tx) error {
		mode, err := store.QueryTextForTest(ctx, tx, "SHOW plan_cache_mode")
		require.Equal(t, "force_generic_plan", mode)
		return err
	}))
	require.Equal(t, before+2, st.RoundTrips(), "BEGIN and the setting with the read, then COMMIT")
	for range 3 { // every pooled connection is back to the server's default
		require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
			mode, err := store.QueryTextForTest(ctx, tx, "SHOW plan_cache_mode")
			require.Equal(t, "auto", mode)
			return err
		}))
	}
}

// In a savepoint, an error that a pipeline sent unread reports at its end
// undoes the savepoint alone: the transaction goes on and commits.
func TestPipelineUnreadInSavepoint(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	var spErr error
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		require.NoError(t, store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('sp-kept')"))
		spErr = tx.Savepoint(ctx, func(tx *store.Tx) error {
			return store.PipelineUnreadForTest(ctx, tx, func() error {
				require.NoError(t, store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('sp-undone')"))
				return store.ExecForTest(ctx, tx, "INSERT INTO projects (project) VALUES ('sp-undone')")
			})
		})
		return nil
	}))
	require.ErrorIs(t, spErr, fault.ErrConflict, "the duplicate is the savepoint's error")
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		n, err := store.QueryTextForTest(ctx, tx, "SELECT string_agg(project, ',' ORDER BY project) FROM projects WHERE project LIKE 'sp-%'")
		require.Equal(t, "sp-kept", n, "the savepoint's rows are undone, the transaction's kept")
		return err
	}))
}
