package packet_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
)

// TestAssemblyReadsInFewRoundTrips: the reads a packet starts with (the
// relevance lists, every lane's first page in both layers, the counters)
// go in one round trip, what those pages need (state groups, texts,
// shadows) in one each, and the cutoff's counts in one, so a packet with
// every lane, a query, a cutoff and contradictions costs a handful of
// round trips whatever its number of lanes; and it replays byte for byte,
// which compares it with the same pipeline read call by call.
func TestAssemblyReadsInFewRoundTrips(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("trips")
	for _, layer := range []string{"trips", ctxtype.SharedProject} {
		var items []spec
		for i := range 150 {
			it := spec{Key: fmt.Sprintf("%s.%03d", layer, i), Content: fmt.Sprintf("refund ledger fact %d of %s", i, layer), Priority: int32(i % 7)}
			switch i % 6 {
			case 1:
				it.Trigger = keywords("refund")
			case 2:
				it.Trigger = tool("lookup")
			case 3:
				it.Trigger = tool("search")
			case 4:
				it.Trigger = relevance()
			}
			if i%10 == 0 {
				it.StateKey = fmt.Sprintf("state.%d", i%3)
			}
			if i%25 == 0 {
				it.Template = true
				it.Content = "For {{customer}}: refund fact " + fmt.Sprint(i)
			}
			if i%17 == 0 {
				it.Roles = hiddenFrom("support")
			}
			items = append(items, it)
		}
		w.batch(layer, items)
	}
	req := ctxtype.Request{TargetRole: "support", TokenBudget: 1500, Query: "refund ledger",
		History:     []ctxtype.Message{{Role: "user", Author: "person", Content: "my refund is late"}},
		ToolResults: []ctxtype.ToolResult{{Tool: "lookup", Status: "ok"}, {Tool: "search", Status: "ok"}},
		Pins:        []string{"trips.005"}, Variables: map[string]any{"customer": "Ada"}}
	for _, format := range []ctxtype.Format{"markdown", "json"} {
		req.Format = format
		w.assemble("trips", w.admin, req) // the process's text cache holds what it read
		before := w.st.RoundTrips()
		p := w.assemble("trips", w.admin, req)
		trips := w.st.RoundTrips() - before
		require.NotNil(t, p.Cutoff, "%s: the budget cuts", format)
		// BEGIN with the read point; the first reads; the relevance
		// winners of both layers; the keyword lanes' first pages; the
		// state groups and the shadows the pages need (their texts are
		// in the cache); the cutoff's counts; the packet stored. Read call
		// by call, it was 20 here (27 in contextd bench's packets).
		require.LessOrEqual(t, trips, int64(9), "%s: round trips of one packet", format)
		t.Logf("%s: %d round trips, %d records", format, trips, len(p.Records))
		rep := w.replay("trips", w.admin, p.ID)
		require.True(t, rep.Identical, "%s: %+v", format, rep.Differences)
	}
}
