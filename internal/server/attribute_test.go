package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
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
	e.batch("acme", []api.BatchItem{
		{Key: "window", Content: "The refund window is 30 days for customers in the EU, and 14 days for customers anywhere else in the world.", Priority: ptr(int32(2))},
		{Key: "receipt", Content: "Refunds over 500 EUR need a manager and a receipt.", Priority: ptr(int32(1))},
	})
	p := e.do("POST", "/v1/projects/acme/packets", impl, api.AssemblePacketJSONRequestBody{TargetRole: "implementer"})
	require.Equal(t, 201, p.status, p.text)
	id := p.json["packet_id"].(string)
	at := func(text string) resp {
		return e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", impl, map[string]any{"text": text})
	}
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

// TestAttributeTask: a task's packets are searched for a text, each with
// its best match, best first; packets of other tasks, and of roles the
// caller may not open, are not.
func TestAttributeTask(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	impl := e.agent("implementer", auth.Edit, "acme")
	critic := e.agent("critic", auth.Edit, "acme")
	e.batch("acme", []api.BatchItem{{Key: "window", Content: "The refund window is 30 days for customers in the EU, and 14 days for customers anywhere else in the world."}})
	assemble := func(key, role, task, query string) string {
		r := e.do("POST", "/v1/projects/acme/packets", key, map[string]any{"target_role": role, "task": map[string]any{"task_id": task, "objective": query}})
		require.Equal(t, 201, r.status, r.text)
		return r.json["packet_id"].(string)
	}
	p1 := assemble(impl, "implementer", "T-a", "Fix rounding.")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/window", e.admin, api.PutItemJSONRequestBody{Content: "The refund window is 30 days for customers in the EU, and 21 days elsewhere."}).status)
	p2 := assemble(impl, "implementer", "T-a", "Fix rounding again.")
	assemble(impl, "implementer", "T-b", "Another task.")
	pc := assemble(critic, "critic", "T-a", "Review.")

	quote := "the refund window is 30 days for customers in the EU, and 14 days for customers anywhere else in the world"
	r := e.do("POST", "/v1/projects/acme/tasks/T-a/attribute", impl, map[string]any{"text": quote})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, "T-a", r.json["task_id"])
	ms := r.list2("matches")
	require.Len(t, ms, 2, "the implementer's two packets of T-a: not T-b's, not the critic's")
	require.Equal(t, p1, ms[0]["packet_id"], "the whole quote, word for word")
	require.Equal(t, "normalized", ms[0]["match"])
	require.Equal(t, 1.0, ms[0]["similarity"])
	require.Equal(t, "window", ms[0]["records"].([]any)[0].(map[string]any)["key"])
	require.Equal(t, p2, ms[1]["packet_id"])
	require.Equal(t, "passage", ms[1]["match"])
	require.Less(t, ms[1]["similarity"].(float64), 1.0)

	admin := e.do("POST", "/v1/projects/acme/tasks/T-a/attribute", e.admin, map[string]any{"text": quote})
	require.Len(t, admin.list2("matches"), 3, "an admin opens the critic's packet too")
	_ = pc
	none := e.do("POST", "/v1/projects/acme/tasks/T-none/attribute", impl, map[string]any{"text": quote})
	require.Equal(t, 200, none.status, none.text)
	require.Empty(t, none.list2("matches"))
}

// list2 is the objects of a list member of the answer.
func (r resp) list2(member string) []map[string]any {
	data, _ := r.json[member].([]any)
	out := make([]map[string]any, len(data))
	for i, d := range data {
		out[i] = d.(map[string]any)
	}
	return out
}
