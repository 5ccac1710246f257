package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// archiveWorld is acme with an item, a packet and two pending handoffs,
// made before anything is archived.
type archiveWorld struct {
	*env
	writer, critic, packet string
	pending                []string
}

func newArchiveWorld(t *testing.T) archiveWorld {
	e := setup(t)
	e.project("acme")
	w := archiveWorld{env: e, writer: e.agent("implementer", "edit", "acme"), critic: e.agent("critic", "edit", "acme")}
	r := e.do("PUT", "/v1/projects/acme/items/refunds", w.writer, map[string]any{"content": "Refunds take five days.", "trigger": map[string]any{"always": true}})
	require.Equal(t, 201, r.status, r.text)
	p := e.do("POST", "/v1/projects/acme/packets", w.writer, map[string]any{"target_role": "implementer", "task": map[string]any{"task_id": "T-1"}})
	require.Equal(t, 201, p.status, p.text)
	w.packet = p.json["packet_id"].(string)
	for _, task := range []string{"T-1", "T-2"} {
		w.pending = append(w.pending, e.handoff(w.writer, manifest(task, "critic")))
	}
	return w
}

// requireGone: the answer is 410 problem+json with code gone.
func requireGone(t *testing.T, r resp, what string) {
	t.Helper()
	require.Equal(t, 410, r.status, "%s: %s", what, r.text)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), what)
	require.Equal(t, "gone", r.json["code"], what)
}

// TestArchivedProjectRefusesWritesAndKeepsHistory: DELETE archives a
// project: it leaves the list, every write and packet in it is 410 gone
// (with an Idempotency-Key too), its history stays readable, a second
// archive is 410 and restore brings it back; the chain, with an entry for
// each, verifies and is sealed.
func TestArchivedProjectRefusesWritesAndKeepsHistory(t *testing.T) {
	t.Parallel()
	w := newArchiveWorld(t)
	e := w.env
	g := e.do("GET", "/v1/projects/acme", w.writer, nil)
	require.Equal(t, 200, g.status, g.text)
	require.NotContains(t, g.json, "archived_at")

	a := e.do("DELETE", "/v1/projects/acme", e.admin, nil)
	require.Equal(t, 200, a.status, a.text)
	require.NotEmpty(t, a.json["archived_at"])
	require.NotEmpty(t, a.json["archived_by"])
	requireGone(t, e.do("DELETE", "/v1/projects/acme", e.admin, nil), "archive again")

	list := e.do("GET", "/v1/projects", e.admin, nil)
	require.Equal(t, 200, list.status)
	require.NotContains(t, list.text, `"acme"`, "an archived project leaves the list")
	archived := e.do("GET", "/v1/projects?archived=true", e.admin, nil)
	require.Equal(t, 1, len(archived.list()), archived.text)
	require.Equal(t, "acme", archived.list()[0]["project"])
	g = e.do("GET", "/v1/projects/acme", w.writer, nil)
	require.Equal(t, 200, g.status, "an archived project is still there to read")
	require.Equal(t, a.json["archived_at"], g.json["archived_at"])

	item := map[string]any{"content": "Refunds take three days."}
	requireGone(t, e.do("PUT", "/v1/projects/acme/items/refunds", w.writer, item), "put")
	requireGone(t, e.do("PUT", "/v1/projects/acme/items/refunds", w.writer, item, "Idempotency-Key", "k-1"), "put in a unit")
	requireGone(t, e.do("PUT", "/v1/projects/acme/items/new", e.admin, item), "put of a new key")
	requireGone(t, e.do("DELETE", "/v1/projects/acme/items/refunds", w.writer, nil), "delete")
	requireGone(t, e.do("POST", "/v1/projects/acme/items", w.writer, map[string]any{"items": []map[string]any{{"key": "b", "content": "x"}}}), "batch")
	requireGone(t, e.do("POST", "/v1/projects/acme/items:import", e.admin, map[string]any{"format": "kxm", "items": kxmHistory()[:1]}), "import")
	requireGone(t, e.do("POST", "/v1/projects/acme/items/refunds/versions/1/redact", e.admin, map[string]any{"reason": "leaked"}), "redact")
	requireGone(t, e.do("POST", "/v1/projects/acme/packets", w.writer, api.AssemblePacketJSONRequestBody{TargetRole: "implementer"}), "packet")
	requireGone(t, e.do("POST", "/v1/projects/acme/packets", w.writer, api.AssemblePacketJSONRequestBody{TargetRole: "implementer"}, "Idempotency-Key", "k-2"), "packet in a unit")
	requireGone(t, e.do("POST", "/v1/projects/acme/handoffs", w.writer, manifest("T-3", "critic")), "handoff")
	requireGone(t, e.do("POST", "/v1/projects/acme/handoffs/"+w.pending[0]+"/accept", w.critic, nil), "accept")
	requireGone(t, e.do("POST", "/v1/projects/acme/handoffs/"+w.pending[0]+"/reject", w.critic, map[string]any{"reason": "no"}), "reject")
	requireGone(t, e.do("POST", "/v1/projects/acme/handoffs/"+w.pending[1]+"/withdraw", w.writer, map[string]any{"reason": "no"}), "withdraw")
	requireGone(t, e.do("PUT", "/v1/projects/acme", e.admin, api.PutProjectJSONRequestBody{Description: ptr("x")}), "project put")

	// History stays readable.
	pk := "/v1/projects/acme/packets/" + w.packet
	for _, rq := range []struct{ method, path string }{
		{"GET", pk}, {"GET", pk + "/records"}, {"GET", pk + "/why?item=refunds"}, {"POST", pk + "/replay"},
		{"GET", "/v1/projects/acme/items/refunds"}, {"GET", "/v1/projects/acme/items"}, {"GET", "/v1/projects/acme/packets"},
		{"GET", "/v1/projects/acme/tasks/T-1/history"}, {"GET", "/v1/projects/acme/handoffs/" + w.pending[0]},
		{"GET", "/v1/projects/acme/audit/entries"}, {"GET", "/v1/projects/acme/audit/verify"},
	} {
		r := e.do(rq.method, rq.path, e.admin, nil)
		require.Equal(t, 200, r.status, "%s %s: %s", rq.method, rq.path, r.text)
	}
	at := e.do("POST", pk+"/attribute", w.writer, map[string]any{"text": "Refunds take five days."})
	require.Equal(t, 200, at.status, at.text)
	replay := e.do("POST", pk+"/replay", w.writer, nil)
	require.Equal(t, true, replay.json["identical"], replay.text)

	require.Equal(t, 403, e.do("POST", "/v1/projects/acme/restore", w.writer, nil).status, "an editor may not restore")
	rs := e.do("POST", "/v1/projects/acme/restore", e.admin, nil, "Idempotency-Key", "restore-1")
	require.Equal(t, 200, rs.status, rs.text)
	require.NotContains(t, rs.json, "archived_at")
	again := e.do("POST", "/v1/projects/acme/restore", e.admin, nil, "Idempotency-Key", "restore-1")
	require.Equal(t, 200, again.status, "the same key replays the answer: %s", again.text)
	c := e.do("POST", "/v1/projects/acme/restore", e.admin, nil)
	require.Equal(t, 409, c.status, c.text)
	require.Equal(t, "conflict", c.json["code"])

	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/refunds", w.writer, item).status, "writable again")
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+w.pending[0]+"/accept", w.critic, nil).status)
	list = e.do("GET", "/v1/projects", e.admin, nil)
	require.Contains(t, list.text, `"acme"`)

	v := e.verify()
	require.Equal(t, true, v.json["ok"], v.text)
	require.Equal(t, true, v.json["sealed"], v.text)
	ents := e.do("GET", "/v1/projects/acme/audit/entries?limit=1000", e.admin, nil)
	var kinds []string
	for _, en := range ents.list() {
		if en["kind"] == "project" {
			kinds = append(kinds, en["kind"].(string))
		}
	}
	require.Len(t, kinds, 3, "created, archived, restored")
}

// TestArchiveWhoMay: archiving is for an admin of the project; a project
// the caller may not see is 404 like a missing one; _shared cannot be
// archived; GET of a project out of scope is 404.
func TestArchiveWhoMay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	e.project("beta")
	editor := e.agent("planner", "edit", "acme")
	betaAdmin := e.agent("lead", "admin", "beta")
	acmeAdmin := e.agent("lead", "admin", "acme")

	require.Equal(t, 403, e.do("DELETE", "/v1/projects/acme", editor, nil).status)
	for _, path := range []string{"/v1/projects/acme", "/v1/projects/nope"} {
		for _, m := range []string{"GET", "DELETE"} {
			r := e.do(m, path, betaAdmin, nil)
			require.Equal(t, 404, r.status, "%s %s: %s", m, path, r.text)
		}
		require.Equal(t, 404, e.do("POST", path+"/restore", betaAdmin, nil).status, path)
	}
	sh := e.do("DELETE", "/v1/projects/_shared", e.admin, nil)
	require.Equal(t, 422, sh.status, sh.text)
	require.Equal(t, "reserved", sh.json["errors"].([]any)[0].(map[string]any)["code"])
	require.Equal(t, 403, e.do("DELETE", "/v1/projects/_shared", acmeAdmin, nil).status, "not an admin of _shared")

	r := e.do("DELETE", "/v1/projects/acme", acmeAdmin, nil)
	require.Equal(t, 200, r.status, r.text)
	// The editor still reads it, but it is not in its list.
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme", editor, nil).status)
	require.False(t, strings.Contains(e.do("GET", "/v1/projects", editor, nil).text, `"acme"`))
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme", betaAdmin, nil).status)
}
