package handoff

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/store"
)

func seqs(es []StreamEvent) []int64 {
	out := []int64{}
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// TestMergeEvents: a page of the stream takes handoff and proposal events
// in sequence order, and never passes the last event of a page that hit
// its limit, whose kind may have more events before the other's next.
func TestMergeEvents(t *testing.T) {
	t.Parallel()
	h := func(n ...int64) []StreamEvent {
		out := []StreamEvent{}
		for _, s := range n {
			out = append(out, StreamEvent{Event: Event{Seq: s}})
		}
		return out
	}
	p := func(n ...int64) []store.ProposalEvent {
		out := []store.ProposalEvent{}
		for _, s := range n {
			out = append(out, store.ProposalEvent{Seq: s, Event: "proposal_created"})
		}
		return out
	}
	require.Equal(t, []int64{1, 2, 3, 5}, seqs(mergeEvents(h(1, 3), false, p(2, 5), false, 10)))
	// Handoffs full at 3: proposal 5 waits for the next page (4 may be a handoff).
	require.Equal(t, []int64{1, 2, 3}, seqs(mergeEvents(h(1, 3), true, p(2, 5), false, 2+1)))
	require.Equal(t, []int64{1}, seqs(mergeEvents(h(1, 4), false, p(2), false, 1)), "limit")
	require.Equal(t, []int64{1, 2}, seqs(mergeEvents(h(1, 4), false, p(2), true, 10)))
	got := mergeEvents(nil, false, p(7), false, 10)
	require.Equal(t, "proposal_created", got[0].Event.Event)
	require.NotNil(t, got[0].Proposal)
	require.Empty(t, mergeEvents(nil, false, nil, false, 10))
}
