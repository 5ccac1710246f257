package mcp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestAblate: the ablate tool is POST …/ablations with its rules: the
// packet's own agent gets a counterfactual packet without the refund rule
// (ablation_of set, the rule's text gone), an entry the packet did not
// include is 422 at its pointer, and an agent of another role does not
// find the packet.
func TestAblate(t *testing.T) {
	t.Parallel()
	w := acme(t)
	cs := w.connect(w.agent("implementer", auth.ReadOnly, "acme"))
	p := okCall(t, cs, "assemble_packet", map[string]any{"project": "acme", "target_role": "implementer",
		"history": []any{map[string]any{"role": "user", "author": "person", "content": "The refund for order 7 failed."}}})
	id := p["packet_id"].(string)
	require.Contains(t, p["rendered"], "Refunds over 500 EUR need a manager.")

	a := okCall(t, cs, "ablate", map[string]any{"project": "acme", "id": id, "without": []any{map[string]any{"key": "refund.rules"}}})
	require.Equal(t, id, a["ablation_of"])
	require.NotContains(t, a["rendered"], "Refunds over 500 EUR need a manager.")

	e := errCall(t, cs, "ablate", map[string]any{"project": "acme", "id": id, "without": []any{map[string]any{"key": "nosuch"}}}, 422, "validation_failed")
	require.Equal(t, []string{"/without/0"}, pointers(e))

	critic := w.connect(w.agent("critic", auth.Edit, "acme"))
	errCall(t, critic, "ablate", map[string]any{"project": "acme", "id": id, "without": []any{map[string]any{"key": "refund.rules"}}}, 404, "not_found")
}
