package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContextPacketsPerTurn: a request's context_packets go into that
// packet only: ranked by priority among the items, rendered in Project
// Knowledge, budgeted and recorded (subject request, key
// context_packets[i]), answered by why and attribute, never written as
// items, and replayed to the same bytes.
func TestContextPacketsPerTurn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/rule", e.admin, map[string]any{"content": "Refunds need a receipt.", "priority": 3}).status)
	big := strings.Repeat("filler words go here ", 400)
	req := map[string]any{"target_role": "editor", "token_budget": 600, "context_packets": []any{
		map[string]any{"id": "sel", "source": "UserSelection", "title": "selection", "content": "func refund(order Order) error", "priority": 5},
		map[string]any{"source": "File", "title": "huge", "content": big, "priority": 9},
		map[string]any{"source": map[string]any{"Other": "custom tag"}, "content": "Low priority note.", "priority": 1},
	}}
	p := e.do("POST", "/v1/projects/acme/packets", e.admin, req)
	require.Equal(t, 201, p.status, p.text)
	text := p.json["rendered"].(string)
	require.Contains(t, text, "### Project Knowledge")
	require.Contains(t, text, "func refund(order Order) error")
	require.NotContains(t, text, "filler words", "over the budget: left out")
	require.Less(t, strings.Index(text, "func refund"), strings.Index(text, "Refunds need a receipt."), "priority 5 ranks before priority 3")
	require.Less(t, strings.Index(text, "Refunds need a receipt."), strings.Index(text, "Low priority note."))
	id := p.json["packet_id"].(string)

	recs := e.do("GET", "/v1/projects/acme/packets/"+id+"/records", e.admin, nil).list()
	byKey := map[string]map[string]any{}
	for _, r := range recs {
		byKey[r["key"].(string)] = r
	}
	sel := byKey["context_packets[0]"]
	require.NotNil(t, sel, "%v", recs)
	require.Equal(t, "request", sel["subject"])
	require.Equal(t, "included", sel["decision"])
	require.Equal(t, "context_packet", sel["rule"])
	require.Equal(t, "Project Knowledge", sel["section"])
	require.Nil(t, sel["version"])
	span := sel["span"].(map[string]any)
	require.Contains(t, text[int(span["start"].(float64)):int(span["end"].(float64))], "func refund(order Order) error")
	require.Equal(t, "excluded", byKey["context_packets[1]"]["decision"], "%v", recs)
	require.Equal(t, "budget", byKey["context_packets[1]"]["reason"])
	require.Greater(t, byKey["context_packets[1]"]["tokens"].(float64), 400.0, "its tokens are counted")
	require.Equal(t, "included", byKey["context_packets[2]"]["decision"])

	w := e.do("GET", "/v1/projects/acme/packets/"+id+"/why?context_packet=1", e.admin, nil)
	require.Equal(t, 200, w.status, w.text)
	require.Equal(t, "excluded", w.json["decision"])
	require.Equal(t, "budget", w.json["reason"])
	require.Equal(t, "huge", w.json["context_packet"].(map[string]any)["title"])
	w = e.do("GET", "/v1/projects/acme/packets/"+id+"/why?context_packet=0", e.admin, nil)
	require.Equal(t, "included", w.json["decision"])
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/packets/"+id+"/why?context_packet=7", e.admin, nil).status)
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/packets/"+id+"/why?context_packet=0&item=rule", e.admin, nil).status)

	at := e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", e.admin, map[string]any{"text": "FUNC refund(order Order) error"})
	require.Equal(t, 200, at.status, at.text)
	m := at.json["matches"].([]any)[0].(map[string]any)
	require.Equal(t, "context_packets[0]", m["records"].([]any)[0].(map[string]any)["key"])

	items := e.do("GET", "/v1/projects/acme/items", e.admin, nil).list()
	require.Len(t, items, 1, "context packets are never written as items")
	rp := e.do("POST", "/v1/projects/acme/packets/"+id+"/replay", e.admin, nil)
	require.Equal(t, true, rp.json["identical"], rp.text)

	// With format navi they are navi's block, with the items, by priority.
	req["format"], req["token_budget"] = "navi", 16000
	cps := req["context_packets"].([]any)
	req["context_packets"] = []any{cps[0], cps[2]}
	n := e.do("POST", "/v1/projects/acme/packets", e.admin, req)
	require.Equal(t, 201, n.status, n.text)
	require.Equal(t, "=== External Context Packets ===\n"+
		"- source: UserSelection; priority: 5; title: selection\nfunc refund(order Order) error\n\n"+
		"- source: Project; priority: 3; title: untitled\nRefunds need a receipt.\n\n"+
		"- source: Other(\"custom tag\"); priority: 1; title: untitled\nLow priority note.\n\n", n.json["rendered"])

	bad := e.do("POST", "/v1/projects/acme/packets", e.admin, map[string]any{"target_role": "editor", "context_packets": []any{
		map[string]any{"source": "Telepathy", "content": "x"}, map[string]any{"source": "File", "content": "y", "metadata": map[string]any{"api_key": "k"}}}})
	require.Equal(t, 422, bad.status, bad.text)
	require.ElementsMatch(t, []string{"/context_packets/0/source", "/context_packets/1/metadata/api_key"}, bad.pointers())
}
