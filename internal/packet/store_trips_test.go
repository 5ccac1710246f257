package packet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
)

// Storing a packet is one round trip: BEGIN, the packet's row, its
// records, its audit entry and COMMIT go together. What it stored reads
// back as it was assembled, spans (and their absence) included.
func TestPacketStoreIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	ctx := t.Context()
	p, err := s.svc.Packets.Prepare(ctx, s.impl, "acme", &ctxtype.Request{TargetRole: "implementer", TokenBudget: 4000})
	require.NoError(t, err)
	require.NotEmpty(t, p.Records)
	before := s.st.RoundTrips()
	require.NoError(t, s.svc.Packets.StoreForTest(ctx, p))
	require.Equal(t, int64(1), s.st.RoundTrips()-before, "round trips to store a packet")

	got, err := s.svc.Packets.Get(ctx, s.admin, "acme", p.ID)
	require.NoError(t, err)
	require.Equal(t, p.Rendered, got.Rendered)
	require.Equal(t, len(p.Records), len(got.Records))
	spans := 0
	for i, r := range p.Records {
		g := got.Records[i]
		require.Equal(t, r.SubjectKey, g.SubjectKey)
		require.Equal(t, r.Decision, g.Decision)
		require.Equal(t, r.Reason, g.Reason)
		require.Equal(t, r.Span, g.Span, "record %d", i)
		if r.Span != nil {
			spans++
		}
	}
	require.Positive(t, spans, "some records have spans")
	require.Less(t, spans, len(p.Records), "some records have none")
}
