package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// A packet's row and records wait to go with the transaction's next
// statement (one round trip for a packet stored alone). Inside a savepoint
// (an Idempotency-Key's unit) their error is the savepoint's: it is
// reported by Savepoint, what fn wrote is undone, and the transaction goes
// on, so that the unit can store the refusal it answers.
func TestAWaitingWriteFailsItsSavepoint(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := pgtest.NewStore(t)
	err := st.InTx(ctx, func(tx *store.Tx) error {
		serr := tx.Savepoint(ctx, func(tx *store.Tx) error {
			return tx.PacketInsert(ctx, store.Packet{Project: "no-such-project", ID: "pkt_0000000000000000000000", CreatedAt: time.Now(),
				CreatedBy: "nobody", TargetRole: "r", Request: []byte(`{}`), Predecessors: []byte(`[]`), Format: "markdown",
				Tokenizer: "o200k_base", Gaps: []byte(`[]`), ProvenanceSummary: []byte(`{}`), Snapshot: "1:1:", Pipeline: 2}, nil)
		})
		require.ErrorIs(t, serr, fault.ErrInvalid, "the packet's foreign key, reported by the savepoint")
		_, _, perr := tx.ProjectUpsert(ctx, "after", "the transaction goes on", nil)
		return perr
	})
	require.NoError(t, err, "the savepoint was rolled back, not the transaction")
	_, err = st.DB.ProjectGet(ctx, "after")
	require.NoError(t, err)
}
