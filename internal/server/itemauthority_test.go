package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestDefaultAuthorityOfAWrite: an item written without an authority gets
// the highest its kind, its source and its writer's grant allow
// (docs/authority.md), in a PUT and in a batch: an admin's instruction is
// an instruction, its knowledge evidence; a rag-sourced instruction
// evidence; an agent granted hypothesis writes hypothesis instead of being
// refused. An authority the write names is kept, and checked as before.
func TestDefaultAuthorityOfAWrite(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	_, guesser, err := e.agents.CreateLocal(context.Background(), auth.CreateParams{Name: "guesser", Role: "support",
		Permission: auth.Edit, Projects: []string{"acme"}, MaxAuthority: auth.Hypothesis})
	require.NoError(t, err)
	put := func(key, who string, body map[string]any) string {
		t.Helper()
		body["content"] = "text of " + key
		r := e.do("PUT", "/v1/projects/acme/items/"+key, who, body)
		require.Contains(t, []int{200, 201}, r.status, r.text)
		return e.do("GET", "/v1/projects/acme/items/"+key, e.admin, nil).json["authority"].(string)
	}
	require.Equal(t, "instruction", put("refunds", e.admin, map[string]any{"kind": "instruction"}))
	require.Equal(t, "instruction", put("refunds.human", e.admin, map[string]any{"kind": "instruction", "source": "human"}))
	require.Equal(t, "evidence", put("refunds.rag", e.admin, map[string]any{"kind": "instruction", "source": "rag"}))
	require.Equal(t, "evidence", put("facts", e.admin, map[string]any{}))
	require.Equal(t, "hypothesis", put("guess", guesser, map[string]any{"kind": "instruction"}))
	require.Equal(t, "policy", put("rule", e.admin, map[string]any{"kind": "instruction", "source": "human", "authority": "policy"}))
	r := e.do("PUT", "/v1/projects/acme/items/too-strong", guesser, map[string]any{"content": "x", "authority": "evidence"})
	require.Equal(t, 403, r.status, r.text)
	require.Equal(t, "authority_exceeds_grant", r.json["code"])

	r = e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": []map[string]any{
		{"key": "b.decision", "kind": "decision", "content": "We ship on Fridays."},
		{"key": "b.state", "kind": "state", "content": "Staging is frozen."}}})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, "instruction", e.do("GET", "/v1/projects/acme/items/b.decision", e.admin, nil).json["authority"])
	require.Equal(t, "evidence", e.do("GET", "/v1/projects/acme/items/b.state", e.admin, nil).json["authority"])
}
