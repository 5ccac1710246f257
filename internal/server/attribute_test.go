package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestAttributeAsPeopleQuote: attribute finds a text as a person copies it
// (case, white space, list markers and emphasis aside), and a quote with a
// few words changed by its longest shared passages; a text that shares
// nothing is 404 text_not_found, which says the text, not the packet, is
// missing.
func TestAttributeAsPeopleQuote(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	impl := e.agent("implementer", auth.Edit, "acme")
	e.batch("acme", []map[string]any{
		{"key": "window", "content": "The refund window is 30 days for customers in the EU, and 14 days for customers anywhere else in the world.", "priority": 2},
		{"key": "receipt", "content": "Refunds over 500 EUR need a manager and a receipt.", "priority": 1},
	})
	p := e.do("POST", "/v1/projects/acme/packets", impl, map[string]any{"target_role": "implementer"})
	require.Equal(t, 201, p.status, p.text)
	id := p.json["packet_id"].(string)
	at := func(text string) resp { return e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", impl, map[string]any{"text": text}) }
	keyOf := func(m map[string]any) string { return m["records"].([]any)[0].(map[string]any)["key"].(string) }

	r := at("Refunds over 500 EUR need a manager")
	m := r.json["matches"].([]any)[0].(map[string]any)
	require.Equal(t, "exact", m["match"])
	require.Equal(t, 1.0, m["similarity"])

	r = at("- refunds OVER 500 eur\n  need a *manager*")
	require.Equal(t, 200, r.status, r.text)
	m = r.json["matches"].([]any)[0].(map[string]any)
	require.Equal(t, "normalized", m["match"])
	require.Equal(t, "receipt", keyOf(m))
	require.Equal(t, "Refunds over 500 EUR need a manager", m["text"])

	r = at("The refund window is 30 days for customers in the EU, and 21 days for customers anywhere else.")
	require.Equal(t, 200, r.status, r.text)
	ms := r.json["matches"].([]any)
	require.Len(t, ms, 1, r.text)
	m = ms[0].(map[string]any)
	require.Equal(t, "passage", m["match"])
	require.Equal(t, "window", keyOf(m))
	require.Equal(t, "The refund window is 30 days for customers in the EU, and", m["text"])
	require.InDelta(t, 12.0/18.0, m["similarity"], 0.001) // 12 of its 18 words

	r = at("Nothing in this sentence was ever said by anyone in that prompt.")
	require.Equal(t, 404, r.status, r.text)
	require.Equal(t, "not_found", r.json["code"])
	require.Equal(t, "text_not_found", r.json["reason"])
	require.Contains(t, r.json["detail"], "the text was not found in packet "+id)
	require.Equal(t, 404, e.do("POST", "/v1/projects/acme/packets/ctxpkt_nope/attribute", impl, map[string]any{"text": "x"}).status)
}
