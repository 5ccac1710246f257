package store_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// A read replica that cannot be reached at start does not stop the start:
// it is set aside, and every read goes to the primary at once, without
// trying it again per read (the probe does, in the background). The
// standby's own behaviour is tested with a real one (server's
// TestReadReplica).
func TestReplicaDownSendsReadsToThePrimary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "postgres://postgres@" + ln.Addr().String() + "/contextd?sslmode=disable"
	require.NoError(t, ln.Close()) // nothing listens there now

	st := pgtest.NewStore(t)
	_, ok := st.ReplicaStatus(ctx)
	require.False(t, ok, "no replica, no status")
	r, err := store.OpenReplica(ctx, store.ReplicaConfig{Store: store.Config{URL: dead}})
	require.NoError(t, err, "a replica down at start is no reason not to start")
	t.Cleanup(r.Close)
	st.UseReplica(r)

	for range 3 {
		runs := 0
		err = st.Read(ctx, func(db store.DB) error {
			runs++
			_, err := db.PacketGet(ctx, "nope", "ctxpkt_none")
			return err
		})
		require.ErrorIs(t, err, fault.ErrNotFound, "the primary's answer")
		require.Equal(t, 1, runs, "run once, on the primary: the replica set aside is not tried")
	}
	status, ok := st.ReplicaStatus(ctx)
	require.True(t, ok)
	require.False(t, status.InUse)
	require.Equal(t, "the read database cannot be reached", status.Error)
	require.NotContains(t, status.Error, ln.Addr().String(), "/readyz is public: no address, login or database name")
	require.Equal(t, int64(3), status.Fallbacks["down"])
	require.Zero(t, status.Reads)
	require.Equal(t, int64(-1), status.LagBytes, "unknown, not zero")
}

// RecordEnd: a position inside a page header is the end of the record
// before the page; any other position is itself.
func TestRecordEnd(t *testing.T) {
	const block, segment = 8192, 16 << 20
	for _, c := range []struct{ lsn, want int64 }{
		{3*segment + 40, 3 * segment},                   // after a segment switch: the long header
		{3*segment + 5*block + 24, 3*segment + 5*block}, // a record ended at a page's end
		{3*segment + 5*block + 32, 3*segment + 5*block + 32},
		{3*segment + 5*block - 8, 3*segment + 5*block - 8},
		{3*segment + 24, 3*segment + 24}, // a segment's first page has the long header, not the short
		{0, 0},
	} {
		require.Equal(t, c.want, store.RecordEnd(c.lsn, block, segment), "%d", c.lsn)
	}
}
