package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"

	"github.com/stretchr/testify/require"
)

// kxmHistory is a KXM item history as KXM writes it: a fact, the fact
// that superseded it, a proposal and a rejected claim.
func kxmHistory() []any {
	prov := func(src, ref string) map[string]any {
		p := map[string]any{"sourceType": src}
		if ref != "" {
			p["sourceRef"] = ref
		}
		return p
	}
	return []any{
		map[string]any{"id": "ctx-refund-v1", "kind": "state", "project": "kxm-app", "summary": "Refunds are allowed within 14 days.",
			"provenance": prov("human", "slack://c/1"), "authority": "policy", "confidence": "verified",
			"stateKey": "refund.window", "status": "superseded", "observedAt": "2026-01-01T09:00:00Z"},
		map[string]any{"id": "ctx-refund-v2", "kind": "state", "project": "kxm-app", "summary": "Refunds are allowed within 30 days.",
			"provenance": prov("human", ""), "authority": "policy", "confidence": "verified",
			"stateKey": "refund.window", "status": "current", "supersedes": []any{"ctx-refund-v1"},
			"evidenceRefs": []any{"ticket-42"}, "validFrom": "2026-02-01T00:00:00Z"},
		map[string]any{"id": "ctx-idea", "kind": "knowledge", "project": "kxm-app", "summary": "Maybe offer store credit instead.",
			"provenance": map[string]any{"sourceType": "peer", "derivedFrom": []any{"ctx-refund-v2"}}, "authority": "hypothesis",
			"confidence": "uncertain", "status": "proposed"},
		map[string]any{"id": "notes/rejected claim", "kind": "evidence", "project": "kxm-app", "summary": "Refunds take 90 days.",
			"provenance": prov("tool", ""), "authority": "evidence", "confidence": "uncertain", "status": "rejected",
			"reviewNote": "contradicted by policy"},
	}
}

// TestImportKXMItems: items:import with format kxm writes KXM's items as
// docs/formats.md maps them, and importing the same items again changes nothing.
func TestImportKXMItems(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("app")
	body := map[string]any{"format": "kxm", "items": kxmHistory()}
	r := e.do("POST", "/v1/projects/app/items:import", e.admin, body)
	require.Equal(t, 200, r.status, r.text)
	require.EqualValues(t, 3, r.json["created"])
	require.EqualValues(t, 1, r.json["proposed"], "status proposed: a proposal, not an item")
	items := r.json["items"].([]any)
	require.Equal(t, map[string]any{"key": "ctx-idea", "version": 0.0, "status": "proposed", "proposal": 1.0}, items[2])
	require.Equal(t, "ctx-refund-v1", items[0].(map[string]any)["key"])
	require.Equal(t, true, items[0].(map[string]any)["tombstoned"], "superseded: written, then tombstoned")
	require.EqualValues(t, 2, items[0].(map[string]any)["version"], "the tombstone follows the imported version")
	require.NotContains(t, items[1].(map[string]any), "tombstoned")
	rejKey := items[3].(map[string]any)["key"].(string)
	require.Regexp(t, `^notes_rejected_claim_[0-9a-f]{16}$`, rejKey, "an id outside the key alphabet is mapped")
	require.Equal(t, true, items[3].(map[string]any)["tombstoned"])

	again := e.do("POST", "/v1/projects/app/items:import", e.admin, body)
	require.Equal(t, 200, again.status, again.text)
	require.EqualValues(t, 4, again.json["unchanged"], again.text)
	require.EqualValues(t, 0, again.json["created"])
	require.EqualValues(t, 0, again.json["updated"])

	// The superseded fact stays in the history.
	require.Equal(t, 404, e.do("GET", "/v1/projects/app/items/ctx-refund-v1", e.admin, nil).status)
	v1 := e.do("GET", "/v1/projects/app/items/ctx-refund-v1/versions/1", e.admin, nil)
	require.Equal(t, 200, v1.status, v1.text)
	require.Equal(t, "Refunds are allowed within 14 days.", v1.json["content"])
	require.Equal(t, "slack://c/1", v1.json["provenance"].(map[string]any)["source_ref"])
	require.Equal(t, map[string]any{"kxm": map[string]any{"project": "kxm-app", "status": "superseded", "observedAt": "2026-01-01T09:00:00Z"}}, v1.json["metadata"])

	cur := e.do("GET", "/v1/projects/app/items/ctx-refund-v2", e.admin, nil)
	require.Equal(t, "state", cur.json["kind"])
	require.Equal(t, "human", cur.json["source"])
	require.Equal(t, "refund.window", cur.json["state_key"])
	require.Equal(t, "policy", cur.json["authority"])
	require.Equal(t, "Refunds are allowed within 30 days.", cur.json["content"])

	require.Equal(t, 404, e.do("GET", "/v1/projects/app/items/ctx-idea", e.admin, nil).status, "proposed: never current")
	idea := e.do("GET", "/v1/projects/app/items/ctx-idea/proposals", e.admin, nil)
	require.Equal(t, 200, idea.status, idea.text)
	require.Len(t, idea.list(), 1)
	prop := idea.list()[0]
	require.Equal(t, "pending", prop["status"])
	require.Equal(t, "import", prop["cause"])
	require.Equal(t, "hypothesis", prop["authority"])
	require.Equal(t, "Maybe offer store credit instead.", prop["content"])
	require.Equal(t, map[string]any{"always": true}, prop["trigger"])
	require.Equal(t, []any{"ctx-refund-v2"}, prop["provenance"].(map[string]any)["derived_from"])

	rej := e.do("GET", "/v1/projects/app/items/"+rejKey+"/versions/1", e.admin, nil)
	require.Equal(t, "contradicted by policy", rej.json["metadata"].(map[string]any)["kxm"].(map[string]any)["reviewNote"], "a member without a home is kept")
	require.Equal(t, "notes/rejected claim", rej.json["metadata"].(map[string]any)["kxm"].(map[string]any)["id"])

	// Exported back, the current fact is the item KXM wrote.
	x := e.do("GET", "/v1/projects/app/items/ctx-refund-v2?format=kxm", e.admin, nil)
	require.Equal(t, 200, x.status, x.text)
	want := kxmHistory()[1].(map[string]any)
	want["provenance"] = map[string]any{"sourceType": "human", "sourceRef": "contextd:app/ctx-refund-v2@v1"}
	require.Equal(t, roundTrip(t, want), x.json)

	// A packet holds the current fact, not the proposal nor the retired ones.
	p := e.do("POST", "/v1/projects/app/packets", e.admin, map[string]any{"target_role": "planner", "query": "refunds"})
	require.Equal(t, 201, p.status, p.text)
	require.Contains(t, p.json["rendered"], "within 30 days")
	require.NotContains(t, p.json["rendered"], "within 14 days")
	require.NotContains(t, p.json["rendered"], "store credit")
	require.NotContains(t, p.json["rendered"], "90 days")
}

// TestImportRefusals: an import is all or nothing, and every problem of
// every item is named by its pointer.
func TestImportRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("app")
	items := kxmHistory()
	delete(items[1].(map[string]any), "summary")
	items[2].(map[string]any)["status"] = "maybe"
	items[3].(map[string]any)["permissions"] = []any{"write"}
	r := e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "kxm", "items": items})
	require.Equal(t, 422, r.status, r.text)
	require.ElementsMatch(t, []string{"/items/1/summary", "/items/2/status", "/items/3/permissions"}, r.pointers())
	require.Equal(t, 404, e.do("GET", "/v1/projects/app/items/ctx-refund-v2", e.admin, nil).status, "nothing was written")

	over := kxmHistory()
	over[0].(map[string]any)["authority"] = "policy"
	over[0].(map[string]any)["provenance"] = map[string]any{"sourceType": "tool"}
	r = e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "kxm", "items": over})
	require.Equal(t, 403, r.status, r.text)
	require.Equal(t, "authority_exceeds_grant", r.json["code"])

	c := e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "contextd", "items": []any{
		map[string]any{"key": "a", "content": "x"}, map[string]any{"key": "b", "content": "y", "colour": "red"}}})
	require.Equal(t, 400, c.status, c.text)
	require.Equal(t, []string{"/items/1/colour"}, c.pointers())
	ok := e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "contextd", "items": []any{
		map[string]any{"key": "a", "content": "x"}}})
	require.Equal(t, 200, ok.status, ok.text)
	require.EqualValues(t, 1, ok.json["created"])

	require.Equal(t, 422, e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "yaml", "items": []any{}}).status)
	ro := e.agent("reader", auth.ReadOnly, "app")
	require.Equal(t, 403, e.do("POST", "/v1/projects/app/items:import", ro, map[string]any{"format": "kxm", "items": kxmHistory()}).status)
}

// roundTrip is v as JSON decodes it (numbers as float64), to compare with
// an answer.
func roundTrip(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// TestImportedRetiredItemWhy: why names a KXM item imported as superseded
// as deleted, not as never written.
func TestImportedRetiredItemWhy(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("app")
	require.Equal(t, 200, e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "kxm", "items": kxmHistory()}).status)
	p := e.do("POST", "/v1/projects/app/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "planner"})
	require.Equal(t, 201, p.status, p.text)
	w := e.do("GET", "/v1/projects/app/packets/"+p.json["packet_id"].(string)+"/why?item=ctx-refund-v1", e.admin, nil)
	require.Equal(t, 200, w.status, w.text)
	require.Equal(t, "not_candidate", w.json["decision"])
	require.Equal(t, "tombstoned", w.json["reason"])
	require.Equal(t, "version 2, current then, is a tombstone: an import retired it (KXM status superseded)", w.json["detail"])
}

// naviPackets is a navi ContextPacket list as an editor sends it.
func naviPackets() []any {
	return []any{
		map[string]any{"id": "sel-1", "source": "UserSelection", "title": "selection", "content": "func refund() {}", "priority": 5, "metadata": map[string]any{"file": "pay.go"}},
		map[string]any{"source": map[string]any{"Other": "custom-tag"}, "title": nil, "content": "  Custom context.  ", "priority": 1},
		map[string]any{"id": "canvas/node 7", "source": "CanvasNode", "content": "A node on the canvas.", "priority": 9},
	}
}

// TestImportNaviPackets: items:import with format navi takes navi's
// ContextPackets as navi writes them; the items are always-on, keyed by
// id (mapped into the key alphabet, or derived when absent).
func TestImportNaviPackets(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("app")
	body := map[string]any{"format": "navi", "items": naviPackets()}
	r := e.do("POST", "/v1/projects/app/items:import", e.admin, body)
	require.Equal(t, 200, r.status, r.text)
	require.EqualValues(t, 3, r.json["created"])
	items := r.json["items"].([]any)
	require.Equal(t, "sel-1", items[0].(map[string]any)["key"])
	derived := items[1].(map[string]any)["key"].(string)
	require.Regexp(t, `^navi:[0-9a-f]{24}$`, derived, "no id: a key from source, title and content")
	require.Regexp(t, `^canvas_node_7_[0-9a-f]{16}$`, items[2].(map[string]any)["key"])
	require.EqualValues(t, 3, e.do("POST", "/v1/projects/app/items:import", e.admin, body).json["unchanged"], "re-importing changes nothing")

	sel := e.do("GET", "/v1/projects/app/items/sel-1", e.admin, nil)
	require.Equal(t, "user_selection", sel.json["source"])
	require.EqualValues(t, 5, sel.json["priority"])
	require.Equal(t, map[string]any{"always": true}, sel.json["trigger"])
	require.Equal(t, "func refund() {}", sel.json["content"])
	other := e.do("GET", "/v1/projects/app/items/"+derived, e.admin, nil)
	require.Equal(t, "other:custom-tag", other.json["source"])

	p := e.do("POST", "/v1/projects/app/packets", e.admin, map[string]any{"target_role": "editor", "format": "navi"})
	require.Equal(t, 201, p.status, p.text)
	require.Equal(t, "=== External Context Packets ===\n"+
		"- source: CanvasNode; priority: 9; title: untitled\nA node on the canvas.\n\n"+
		"- source: UserSelection; priority: 5; title: selection\nfunc refund() {}\n\n"+
		"- source: Other(\"custom-tag\"); priority: 1; title: untitled\nCustom context.\n\n", p.json["rendered"])

	// navi's own spelling comes back in its block: an empty title is
	// Some(""), an Other tag outside contextd's alphabet is as sent.
	e.project("odd")
	odd := e.do("POST", "/v1/projects/odd/items:import", e.admin, map[string]any{"format": "navi", "items": []any{
		map[string]any{"id": "t", "source": map[string]any{"Other": "tag with space/ü\"q"}, "title": "", "content": "Odd.", "priority": 2}}})
	require.Equal(t, 200, odd.status, odd.text)
	op := e.do("POST", "/v1/projects/odd/packets", e.admin, map[string]any{"target_role": "editor", "format": "navi"})
	require.Equal(t, "=== External Context Packets ===\n- source: Other(\"tag with space/ü\\\"q\"); priority: 2; title: \nOdd.\n\n", op.json["rendered"])

	bad := naviPackets()
	bad[0].(map[string]any)["source"] = "Telepathy"
	bad[2].(map[string]any)["priority"] = 1 << 40
	bad[1].(map[string]any)["metadata"] = map[string]any{"password": "x"}
	r = e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "navi", "items": bad})
	require.Equal(t, 422, r.status, r.text)
	require.ElementsMatch(t, []string{"/items/0/source", "/items/2/priority"}, r.pointers())
	bad = naviPackets()
	bad[1].(map[string]any)["metadata"] = map[string]any{"password": "x"}
	r = e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "navi", "items": bad})
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"/items/1/metadata/password"}, r.pointers(), "pointers name the packet as sent")
}

// TestKXMExportReimportChangesNothing: an item exported as a KXM
// ContextItem and imported again is unchanged, whatever the export could
// not say (the title, a contextd kind or source, the source reference,
// metadata KXM has no member for); changed in KXM, it changes what KXM
// says and keeps the rest.
func TestKXMExportReimportChangesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("app")
	first := kxmHistory()[1].(map[string]any)
	first["provenance"] = map[string]any{"sourceType": "git", "sourceRef": "git:abc123", "lane": "main"}
	first["authority"], first["reviewNote"] = "instruction", "checked"
	require.Equal(t, 200, e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "kxm", "items": []any{first}}).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/app/items/native", e.admin, map[string]any{
		"content": "Always answer in English.", "title": "Language", "kind": "instruction", "source": "steering", "authority": "policy",
		"roles": map[string]any{"hidden_from": []string{"intern"}}}).status)
	var exported []any
	for _, k := range []string{"ctx-refund-v2", "native"} {
		x := e.do("GET", "/v1/projects/app/items/"+k+"?format=kxm", e.admin, nil)
		require.Equal(t, 200, x.status, x.text)
		exported = append(exported, x.json)
	}
	again := e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "kxm", "items": exported})
	require.Equal(t, 200, again.status, again.text)
	require.EqualValues(t, 2, again.json["unchanged"], again.text)

	// Changed in KXM: the summary moves, the rest stays.
	changed := exported[1].(map[string]any)
	changed["summary"] = "Always answer in British English."
	r := e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "kxm", "items": []any{changed}})
	require.Equal(t, 200, r.status, r.text)
	require.EqualValues(t, 1, r.json["updated"])
	v := e.do("GET", "/v1/projects/app/items/native", e.admin, nil)
	require.Equal(t, "Always answer in British English.", v.json["content"])
	require.Equal(t, "Language", v.json["title"], "what KXM cannot say stays")
	require.Equal(t, "instruction", v.json["kind"])
	require.Equal(t, []any{"intern"}, v.json["roles"].(map[string]any)["hidden_from"])
	src := e.do("GET", "/v1/projects/app/items/ctx-refund-v2", e.admin, nil)
	require.Equal(t, "git:abc123", src.json["provenance"].(map[string]any)["source_ref"])
	require.Equal(t, "checked", src.json["metadata"].(map[string]any)["kxm"].(map[string]any)["reviewNote"])
}

// TestKXMImportFollowsKXMsParser: an import refuses what KXM's own parser
// refuses, says every problem at once, and points into the items as sent.
func TestKXMImportFollowsKXMsParser(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("app")
	base := func(kv ...any) map[string]any {
		m := map[string]any{"id": "x", "kind": "knowledge", "project": "app", "summary": "A fact.",
			"provenance": map[string]any{"sourceType": "human"}, "authority": "evidence", "confidence": "probable"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	items := []any{
		base("id", "a", "status", "maybe"),
		base("id", "b", "confidence", "sure"),
		base("id", "c", "validFrom", "next tuesday"),
		base("id", "d", "summary", "   "),
		base("id", "   "),
		base("id", "f", "kind", "instruction"),
		base("id", "g", "provenance", map[string]any{"sourceType": "rag"}),
		base("id", "h", "kind", "state", "status", "current"),
		base("id", "i", "provenance", map[string]any{"sourceType": "human", "password": "x"}),
		base("id", "j", "supersedes", []any{"j"}),
	}
	r := e.do("POST", "/v1/projects/app/items:import", e.admin, map[string]any{"format": "kxm", "items": items})
	require.Equal(t, 422, r.status, r.text)
	require.ElementsMatch(t, []string{"/items/0/status", "/items/1/confidence", "/items/2/validFrom", "/items/3/summary", "/items/4/id",
		"/items/5/kind", "/items/6/provenance/sourceType", "/items/7/stateKey", "/items/8/provenance/password", "/items/9/supersedes"}, r.pointers())
	require.Equal(t, 404, e.do("GET", "/v1/projects/app/items/b", e.admin, nil).status, "nothing was written")
}

// TestKXMExportIsWhatKXMReads: an export fits KXM's limits, counted as
// KXM counts them.
func TestKXMExportIsWhatKXMReads(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("app")
	long := strings.Repeat("k", 200)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/app/items/"+long, e.admin, map[string]any{"content": strings.Repeat("😀", 4100), "kind": "state"}).status)
	x := e.do("GET", "/v1/projects/app/items/"+long+"?format=kxm", e.admin, nil)
	require.Equal(t, 200, x.status, x.text)
	summary := x.json["summary"].(string)
	require.Equal(t, 2000, utf8.RuneCountInString(summary), "4,000 UTF-16 units: 2,000 characters outside the BMP")
	id := x.json["id"].(string)
	require.Len(t, id, 128)
	require.True(t, strings.HasPrefix(id, strings.Repeat("k", 111)+"_"))
	require.Equal(t, id, x.json["stateKey"], "a state item names its key")
}
