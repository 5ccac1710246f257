package mcp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestSuspectsTool: suspects answers as the API does: empty before a
// failure, the refund rule with its contrast after it; an agent of another
// role does not find the packet.
func TestSuspectsTool(t *testing.T) {
	t.Parallel()
	w := acme(t)
	cs := w.connect(w.agent("implementer", auth.ReadOnly, "acme"))
	p := okCall(t, cs, "assemble_packet", map[string]any{"project": "acme", "target_role": "implementer",
		"history": []any{map[string]any{"role": "user", "author": "person", "content": "The refund for order 7 failed."}}})
	id := p["packet_id"].(string)
	s := okCall(t, cs, "suspects", map[string]any{"project": "acme", "id": id})
	require.Equal(t, id, s["packet_id"])
	require.Empty(t, s["suspects"])

	okCall(t, cs, "record_outcome", map[string]any{"project": "acme", "id": id, "status": "failure"})
	s = okCall(t, cs, "suspects", map[string]any{"project": "acme", "id": id})
	keys := map[string]map[string]any{}
	for _, x := range s["suspects"].([]any) {
		keys[x.(map[string]any)["key"].(string)] = x.(map[string]any)
	}
	rule := keys["refund.rules"]
	require.NotNil(t, rule, "%v", s)
	require.Equal(t, "correlational", rule["confidence"])

	critic := w.connect(w.agent("critic", auth.Edit, "acme"))
	errCall(t, critic, "suspects", map[string]any{"project": "acme", "id": id}, 404, "not_found")
}
