package mcp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestProposalTools: put_item with "proposal": true makes a proposal,
// list_proposals and get_proposal read it, its author may not promote it
// (self_promotion), another agent promotes it, and reject_proposal of a
// decided one is 409 with its state.
func TestProposalTools(t *testing.T) {
	t.Parallel()
	w := acme(t)
	author := w.connect(w.agent("implementer", auth.Edit, "acme"))
	lead := w.connect(w.agent("critic", auth.Edit, "acme"))

	p := okCall(t, author, "put_item", map[string]any{"project": "acme", "key": "deploy.window", "content": "Deploy on Tuesdays.",
		"kind": "instruction", "proposal": true})
	require.EqualValues(t, 1, p["proposal"])
	require.Equal(t, "pending", p["status"])
	l := okCall(t, lead, "list_proposals", map[string]any{"project": "acme", "status": "pending"})
	require.Len(t, l["data"], 1)
	il := okCall(t, lead, "list_item_proposals", map[string]any{"project": "acme", "key": "deploy.window"})
	require.Len(t, il["data"], 1)
	g := okCall(t, lead, "get_proposal", map[string]any{"project": "acme", "key": "deploy.window", "proposal": 1})
	require.Contains(t, g["may_promote"], "critic")

	errCall(t, author, "promote_proposal", map[string]any{"project": "acme", "key": "deploy.window", "proposal": 1}, 403, "self_promotion")
	pr := okCall(t, lead, "promote_proposal", map[string]any{"project": "acme", "key": "deploy.window", "proposal": 1, "reason": "ok"})
	require.EqualValues(t, 1, pr["item"].(map[string]any)["version"])
	e := errCall(t, lead, "reject_proposal", map[string]any{"project": "acme", "key": "deploy.window", "proposal": 1, "reason": "late"}, 409, "invalid_transition")
	require.Equal(t, "promoted", e["current_status"])
}
