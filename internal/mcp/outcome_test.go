package mcp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestRecordOutcome: record_outcome follows the API's rules: the packet's
// own read-only agent records an outcome whose answer used the refund
// rule, a bad status is 422 with its pointer, and an agent of another role
// does not find the packet.
func TestRecordOutcome(t *testing.T) {
	t.Parallel()
	w := acme(t)
	cs := w.connect(w.agent("implementer", auth.ReadOnly, "acme"))
	p := okCall(t, cs, "assemble_packet", map[string]any{"project": "acme", "target_role": "implementer",
		"history": []any{map[string]any{"role": "user", "author": "person", "content": "The refund for order 7 failed."}}})
	id := p["packet_id"].(string)
	require.Contains(t, p["rendered"], "Refunds over 500 EUR need a manager.")

	o := okCall(t, cs, "record_outcome", map[string]any{"project": "acme", "id": id, "status": "failure",
		"answer": "I checked the rules. Refunds over 500 EUR need a manager."})
	require.Equal(t, "failure", o["status"])
	require.Equal(t, "agent", o["source"])
	used := o["used"].([]any)
	require.Len(t, used, 1, o)
	require.Equal(t, "refund.rules", used[0].(map[string]any)["key"])

	e := errCall(t, cs, "record_outcome", map[string]any{"project": "acme", "id": id, "status": "meh"}, 422, "validation_failed")
	require.Equal(t, []string{"/status"}, pointers(e))

	critic := w.connect(w.agent("critic", auth.Edit, "acme"))
	errCall(t, critic, "record_outcome", map[string]any{"project": "acme", "id": id, "status": "failure"}, 404, "not_found")
}
