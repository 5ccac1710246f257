package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// TestRoundTrips holds the item paths to their round-trip budgets, counted
// by the store (a pipeline of statements is one round trip, a COPY two): a
// PUT is BEGIN with the lock read, its writes with the read of the result,
// the chain head's read its seal signs (a PUT that writes a version), and
// COMMIT; a GET is one read. Each is measured right after a warm-up
// request, so the caller's key and the project are in the caches.
func TestRoundTrips(t *testing.T) {
	e := setup(t)
	e.project("acme")
	writer := e.agent("planner", "edit", "acme")
	body := func(s string) map[string]any {
		return map[string]any{"content": s, "trigger": map[string]any{"always": true}}
	}
	trips := func(fn func()) int64 {
		before := e.app.Store.RoundTrips()
		fn()
		return e.app.Store.RoundTrips() - before
	}
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/warm", writer, body("warm")).status)
	for _, tc := range []struct {
		name  string
		key   string
		want  int
		trips int64
	}{{"create", "fresh", 201, 4}, {"update", "fresh", 201, 4}, {"unchanged", "fresh", 200, 3}} {
		content := "refunds take five days"
		if tc.name != "create" {
			content = "refunds take three days"
		}
		n := trips(func() {
			r := e.do("PUT", "/v1/projects/acme/items/"+tc.key, writer, body(content))
			require.Equal(t, tc.want, r.status, r.text) // 201: a new version; 200: unchanged
		})
		require.LessOrEqual(t, n, tc.trips, "PUT (%s) took %d round trips", tc.name, n)
		t.Logf("PUT %s: %d round trips", tc.name, n)
	}
	n := trips(func() {
		r := e.do("GET", "/v1/projects/acme/items/fresh", writer, nil)
		require.Equal(t, 200, r.status, r.text)
		require.Equal(t, "refunds take three days", r.json["content"])
	})
	require.Equal(t, int64(1), n, "GET took %d round trips", n)
}

// TestOutcomeWriteRoundTrips holds an outcome write with an answer to its
// budget, 9 (it was 12): the packet's reads as for its GET and all its
// records for the attribution, then one transaction of four round trips:
// BEGIN with the project's check, the packet's lock and the count; the
// outcome's row; the counters with the read of the chain head its seal
// signs; the entry and COMMIT. Measured after a warm-up write, so the
// caller's key and the project are in the caches.
func TestOutcomeWriteRoundTrips(t *testing.T) {
	w := newOutcomeWorld(t)
	body := api.RecordOutcomeJSONRequestBody{Status: "failure", Answer: ptr("As asked: " + refundSentence)}
	require.Equal(t, 201, w.record(w.support, body).status, "warm-up")
	before := w.app.Store.RoundTrips()
	r := w.record(w.support, body)
	n := w.app.Store.RoundTrips() - before
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, []string{"refund.policy"}, usedKeys(r.json))
	require.LessOrEqual(t, n, int64(9), "an outcome write took %d round trips", n)
	t.Logf("outcome write: %d round trips", n)
}
