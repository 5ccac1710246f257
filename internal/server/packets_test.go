package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// packetWorld is a project with one item of every interesting kind.
func packetWorld(t *testing.T) *env {
	e := setup(t)
	e.project("acme")
	items := []any{
		map[string]any{"key": "always.rule", "content": "Always cite the ticket.", "title": "Citations"},
		map[string]any{"key": "refund.rules", "content": "Refunds over 500 EUR need a manager.", "trigger": map[string]any{"keywords": []string{"refund"}}, "priority": 3},
		map[string]any{"key": "deploy.notes", "content": "Deploys freeze on Fridays.", "trigger": map[string]any{"keywords": []string{"deploy"}}},
		map[string]any{"key": "tool.transcribe", "content": "Transcribe a video.", "title": "transcribe_video", "slot": "tools", "kind": "tool", "trigger": map[string]any{"tool": "transcribe_video"}},
		map[string]any{"key": "greet", "content": "Hello {{customer}}, this is {{project}}.", "template": true},
		map[string]any{"key": "hole", "content": "Your order {{order_id}} shipped.", "template": true},
		map[string]any{"key": "critic.rubric", "content": "Reject patches without tests.", "roles": map[string]any{"visible_to": []string{"critic"}}},
		map[string]any{"key": "window.policy", "content": "Refund window is 30 days.", "state_key": "refund.window", "authority": "policy", "source": "human"},
		map[string]any{"key": "window.old", "content": "Refund window is 14 days.", "state_key": "refund.window", "authority": "hypothesis"},
		map[string]any{"key": "tone", "content": "Be friendly.", "trigger": map[string]any{"pinned_only": true}},
		map[string]any{"key": "search.ledger", "content": "The ledger reconciles nightly at 02:00.", "trigger": map[string]any{"relevance": true}},
		map[string]any{"key": "search.other", "content": "Cats sleep a lot.", "trigger": map[string]any{"relevance": true}},
		map[string]any{"key": "future", "content": "Next year's rule.", "valid_from": "2100-01-01T00:00:00Z"},
	}
	r := e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": items})
	require.Equal(t, 200, r.status, r.text)
	r = e.do("POST", "/v1/projects/_shared/items", e.admin, map[string]any{"items": []any{
		map[string]any{"key": "tone", "content": "Be formal."},
		map[string]any{"key": "house.style", "content": "Use British spelling."},
	}})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/gone", e.admin, map[string]any{"content": "Deleted fact."}).status)
	require.Equal(t, 200, e.do("DELETE", "/v1/projects/acme/items/gone", e.admin, nil).status)
	return e
}

func packetRequest(role string) map[string]any {
	return map[string]any{
		"target_role":         role,
		"task":                map[string]any{"task_id": "T-1", "step_id": "implement", "step_attempt": 1, "objective": "Fix the refund bug.", "allowed_outcomes": []string{"patch"}, "permission_ceiling": "edit"},
		"acceptance_criteria": []any{map[string]any{"id": "AC1", "description": "Tests pass", "verification_kind": "gate", "required": true}},
		"history": []any{
			map[string]any{"role": "user", "author": "person", "content": "The refund for order 7 failed."},
			map[string]any{"role": "user", "author": "library", "content": "Summary: talked about the deploy."},
		},
		"tool_results":  []any{map[string]any{"tool": "transcribe_video", "status": "ok", "content": "..."}},
		"query":         "when does the ledger reconcile",
		"variables":     map[string]any{"customer": "Ada"},
		"agent_context": map[string]any{"mediaAssets": []any{}, "activeSceneId": "s1"},
	}
}

func records(r resp) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, rec := range r.list() {
		key := rec["key"].(string)
		if p, ok := rec["project"].(string); ok && p == "_shared" {
			key = "_shared/" + key
		}
		out[key] = rec
	}
	return out
}

func TestAssemblePacketEndToEnd(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	implementer := e.agent("implementer", auth.ReadOnly, "acme")
	r, id := assembleAndCheck(t, e, implementer)
	checkStoredRecordsWhy(t, e, implementer, r, id)
	checkAttributeInjections(t, e, implementer, id)
	checkReplayListing(t, e, implementer, r, id)
}

// assembleAndCheck assembles the world's packet and checks its answer.
func assembleAndCheck(t *testing.T, e *env, implementer string) (resp, string) {
	r := e.do("POST", "/v1/projects/acme/packets", implementer, packetRequest("implementer"))
	require.Equal(t, 201, r.status, r.text)
	id := r.json["packet_id"].(string)
	require.True(t, strings.HasPrefix(id, "ctxpkt_"))
	rendered := r.json["rendered"].(string)
	for _, want := range []string{
		"## 1. Objective\nFix the refund bug.\n",
		"- Citations: Always cite the ticket.\n",
		"- Refunds over 500 EUR need a manager.\n",
		"- Hello Ada, this is acme.\n",
		"- transcribe_video: Transcribe a video.\n",
		"- Refund window is 30 days.\n",
		"- The ledger reconciles nightly at 02:00.\n",
		"- Use British spelling.\n",
		"No media assets loaded.\n",
		"activeSceneId: s1\n",
	} {
		require.Contains(t, rendered, want)
	}
	for _, absent := range []string{"Deploys freeze", "order_id", "Reject patches", "Be formal", "Be friendly", "Cats sleep", "Next year", "Deleted fact"} {
		require.NotContains(t, rendered, absent)
	}
	// The loser of a contradiction is no entry: its content is only
	// quoted in its contradiction line, which names both facts.
	require.NotContains(t, rendered, "- Refund window is 14 days.")
	require.Equal(t, 1, strings.Count(rendered, "14 days"))
	require.Contains(t, rendered, `kept: "Refund window is 30 days." (policy) over "Refund window is 14 days." (hypothesis)`)
	budget := r.json["budget"].(map[string]any)
	require.Equal(t, 16000.0, budget["allocated"])
	require.Equal(t, budget["allocated"].(float64)-budget["used"].(float64), budget["headroom"])
	excluded := r.json["excluded"].(map[string]any)
	require.Equal(t, map[string]any{"template_unresolved": 1.0, "contradicted": 1.0, "overridden": 1.0}, excluded, "no hidden count for a non-admin")
	require.NotContains(t, r.text, "critic.rubric")
	require.Equal(t, 64, len(r.json["rendered_sha256"].(string)))
	prov := r.json["provenance_summary"].(map[string]any)
	require.Equal(t, 1.0, prov["by_kind"].(map[string]any)["tool"])

	// Sections: names and entries with spans into rendered. An item entry
	// names its project only when it is not the packet's (_shared).
	var sawKnowledge, sawShared bool
	for _, s := range r.json["sections"].([]any) {
		sec := s.(map[string]any)
		for _, en := range sec["entries"].([]any) {
			entry := en.(map[string]any)
			span := entry["span"].(map[string]any)
			text := rendered[int(span["start"].(float64)):int(span["end"].(float64))]
			if entry["subject"] == "item" {
				if text == "- Use British spelling.\n" {
					sawShared = true
					require.Equal(t, "_shared", entry["project"], "%v", entry)
				} else {
					require.NotContains(t, entry, "project", "the packet's own item %v", entry)
				}
			}
			if entry["key"] == "refund.rules" {
				sawKnowledge = true
				require.Equal(t, "Project Knowledge", sec["name"])
				require.Equal(t, "- Refunds over 500 EUR need a manager.\n", text)
				require.Equal(t, `keyword:"refund"@history[0]`, entry["rule"])
				require.Equal(t, 1.0, entry["version"])
			}
			if entry["key"] == "objective" {
				require.Equal(t, "request", entry["subject"])
				require.Equal(t, "Fix the refund bug.\n", text)
			}
		}
	}
	require.True(t, sawKnowledge)
	require.True(t, sawShared)

	return r, id
}

// checkStoredRecordsWhy: the stored packet, its records and why.
func checkStoredRecordsWhy(t *testing.T, e *env, implementer string, r resp, id string) {
	// The stored packet answers the same.
	g := e.do("GET", "/v1/projects/acme/packets/"+id, implementer, nil)
	require.Equal(t, 200, g.status)
	require.Equal(t, r.json, g.json)

	// Records: the implementer does not learn that a hidden item exists.
	recs := records(e.do("GET", "/v1/projects/acme/packets/"+id+"/records", implementer, nil))
	require.NotContains(t, recs, "critic.rubric")
	require.Equal(t, "tool:transcribe_video", recs["tool.transcribe"]["rule"])
	require.Equal(t, "relevance", strings.Split(recs["search.ledger"]["rule"].(string), ":")[0])
	require.Equal(t, "overridden", recs["_shared/tone"]["reason"])
	require.Equal(t, "contradicted", recs["window.old"]["reason"])
	require.Equal(t, "template_unresolved", recs["hole"]["reason"])
	require.NotContains(t, recs, "deploy.notes", "did not fire (only the library said deploy): not recorded")
	inc := e.do("GET", "/v1/projects/acme/packets/"+id+"/records?decision=excluded", implementer, nil)
	for _, rec := range inc.list() {
		require.Equal(t, "excluded", rec["decision"])
	}
	// The admin sees the hidden one.
	adminRecs := records(e.do("GET", "/v1/projects/acme/packets/"+id+"/records", e.admin, nil))
	require.Equal(t, "hidden", adminRecs["critic.rubric"]["reason"])
	g = e.do("GET", "/v1/projects/acme/packets/"+id, e.admin, nil)
	require.Equal(t, 1.0, g.json["excluded"].(map[string]any)["hidden"])

	// Why.
	w := e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=refund.rules", implementer, nil)
	require.Equal(t, 200, w.status, w.text)
	require.Equal(t, "included", w.json["decision"])
	require.Equal(t, `keyword:"refund"@history[0]`, w.json["rule"])
	require.Equal(t, "Refunds over 500 EUR need a manager.", w.json["item"].(map[string]any)["content"])
	require.NotNil(t, w.json["span"])
	w = e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=deploy.notes", implementer, nil)
	require.Equal(t, "not_candidate", w.json["decision"])
	require.Equal(t, "not_triggered", w.json["reason"])
	require.Contains(t, w.json["detail"], "person")
	w = e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=window.old", implementer, nil)
	require.Equal(t, "excluded", w.json["decision"])
	require.Equal(t, "contradicted", w.json["reason"])
	require.Contains(t, w.json["detail"], "window.policy")
	require.Equal(t, "tombstoned", e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=gone", implementer, nil).json["reason"])
	require.Equal(t, "not_valid", e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=future", implementer, nil).json["reason"])
	require.Equal(t, "did_not_exist", e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=never.was", implementer, nil).json["reason"])
	// A hidden item is answered as a key that never existed (issue 11).
	hid := e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=critic.rubric", implementer, nil)
	require.Equal(t, 200, hid.status, hid.text)
	require.Equal(t, "did_not_exist", hid.json["reason"])
	require.Equal(t, "hidden", e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=critic.rubric", e.admin, nil).json["reason"])

}

// checkAttributeInjections: attribute and the reverse lookup.
func checkAttributeInjections(t *testing.T, e *env, implementer, id string) {
	// Attribute.
	a := e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", implementer, map[string]any{"text": "500 EUR need a manager"})
	require.Equal(t, 200, a.status, a.text)
	matches := a.json["matches"].([]any)
	require.Len(t, matches, 1)
	m := matches[0].(map[string]any)
	require.Equal(t, "refund.rules", m["records"].([]any)[0].(map[string]any)["key"])
	require.Empty(t, m["scaffolding"])
	a = e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", implementer, map[string]any{"text": "## 1. Objective\nFix"})
	m = a.json["matches"].([]any)[0].(map[string]any)
	require.Equal(t, "objective", m["records"].([]any)[0].(map[string]any)["key"])
	require.Len(t, m["scaffolding"], 1)
	require.Equal(t, 404, e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", implementer, map[string]any{"text": "not in the packet"}).status)
	a = e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", implementer, map[string]any{"start": 0, "end": 10})
	require.Equal(t, 200, a.status, a.text)
	require.Equal(t, "# Context ", a.json["matches"].([]any)[0].(map[string]any)["text"])
	require.Equal(t, 422, e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", implementer, map[string]any{"start": 5, "end": 1}).status)
	require.Equal(t, 422, e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", implementer, map[string]any{}).status)

	// Injections: every packet that included the item.
	inj := e.do("GET", "/v1/projects/acme/items/refund.rules/injections", implementer, nil)
	require.Equal(t, 200, inj.status, inj.text)
	require.Len(t, inj.list(), 1)
	require.Equal(t, id, inj.list()[0]["packet_id"])
	require.Equal(t, "implementer", inj.list()[0]["target_role"])
	sharedInj := e.do("GET", "/v1/projects/_shared/items/house.style/injections", implementer, nil)
	require.Equal(t, 200, sharedInj.status, sharedInj.text)
	require.Len(t, sharedInj.list(), 1)
	require.Equal(t, "acme", sharedInj.list()[0]["project"])
	require.Empty(t, e.do("GET", "/v1/projects/acme/items/refund.rules/injections?version=2", implementer, nil).list())

}

// checkReplayListing: replay after changes, then listings.
func checkReplayListing(t *testing.T, e *env, implementer string, r resp, id string) {
	// Replay after the items changed: byte-identical.
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/refund.rules", e.admin, map[string]any{"content": "Changed later.", "trigger": map[string]any{"keywords": []string{"refund"}}}).status)
	require.Equal(t, 200, e.do("DELETE", "/v1/projects/acme/items/always.rule", e.admin, nil).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/new.always", e.admin, map[string]any{"content": "Brand new."}).status)
	rp := e.do("POST", "/v1/projects/acme/packets/"+id+"/replay", implementer, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, true, rp.json["identical"], rp.text)
	require.Equal(t, r.json["rendered_sha256"], rp.json["rendered_sha256_now"])
	require.Empty(t, rp.json["differences"])
	// A new packet sees the changes.
	r2 := e.do("POST", "/v1/projects/acme/packets", implementer, packetRequest("implementer"))
	require.Contains(t, r2.json["rendered"], "Changed later.")
	require.NotContains(t, r2.json["rendered"], "Always cite")

	// Listing.
	l := e.do("GET", "/v1/projects/acme/packets?task_id=T-1", implementer, nil)
	require.Len(t, l.list(), 2)
	require.Equal(t, r2.json["packet_id"], l.list()[0]["packet_id"], "newest first")
	l = e.do("GET", "/v1/projects/acme/packets?limit=1", implementer, nil)
	require.Len(t, l.list(), 1)
	l = e.do("GET", "/v1/projects/acme/packets?limit=1&cursor="+l.json["next_cursor"].(string), implementer, nil)
	require.Equal(t, id, l.list()[0]["packet_id"])
	require.Empty(t, e.do("GET", "/v1/projects/acme/packets?task_id=nope", implementer, nil).list())
}

func TestAssembleAccessAndValidation(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	implementer := e.agent("implementer", auth.Edit, "acme")
	critic := e.agent("critic", auth.ReadOnly, "acme")
	outsider := e.agent("implementer", auth.Edit, "globex")

	r := e.do("POST", "/v1/projects/acme/packets", implementer, map[string]any{"target_role": "critic"})
	require.Equal(t, 403, r.status, "only admins assemble for another role")
	require.Equal(t, 404, e.do("POST", "/v1/projects/acme/packets", outsider, map[string]any{"target_role": "implementer"}).status)
	r = e.do("POST", "/v1/projects/acme/packets", critic, map[string]any{"target_role": "critic"})
	require.Equal(t, 201, r.status, "read-only agents assemble for their own role")
	require.Contains(t, r.json["rendered"], "Reject patches without tests.")
	criticPacket := r.json["packet_id"].(string)
	// Another role's packet does not exist for an implementer.
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/packets/"+criticPacket, implementer, nil).status)
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/packets/"+criticPacket, e.admin, nil).status)
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/packets/ctxpkt_nothing", e.admin, nil).status)

	for _, tc := range []struct {
		body    map[string]any
		status  int
		pointer string
	}{
		{map[string]any{}, 422, "/target_role"},
		{map[string]any{"target_role": "implementer", "token_budget": 200001}, 422, "/token_budget"},
		{map[string]any{"target_role": "implementer", "token_budget": -1}, 422, "/token_budget"},
		{map[string]any{"target_role": "implementer", "predecessors": []string{"hnd_unknown"}}, 422, "/predecessors/0"},
		{map[string]any{"target_role": "implementer", "history": []any{map[string]any{"role": "user", "content": "hi"}}}, 422, "/history/0/author"},
		{map[string]any{"target_role": "implementer", "history": []any{map[string]any{"role": "boss", "author": "person"}}}, 422, "/history/0/role"},
		{map[string]any{"target_role": "implementer", "format": "html"}, 422, "/format"},
		{map[string]any{"target_role": "implementer", "tokenizer": "p50k"}, 422, "/tokenizer"},
		{map[string]any{"target_role": "implementer", "acceptance_criteria": []any{map[string]any{"id": "a", "verification_kind": "vibes"}}}, 422, "/acceptance_criteria/0/verification_kind"},
		{map[string]any{"target_role": "implementer", "agent_context": []any{1}}, 400, "/agent_context"},
		{map[string]any{"target_role": "implementer", "variables": "x"}, 400, "/variables"},
		{map[string]any{"target_role": "implementer", "pins": []string{"bad key"}}, 422, "/pins/0"},
		{map[string]any{"target_role": "implementer", "colour": "red"}, 400, "/colour"},
		{map[string]any{"target_role": "implementer", "token_budget": "lots"}, 400, "/token_budget"},
	} {
		r := e.do("POST", "/v1/projects/acme/packets", implementer, tc.body)
		require.Equal(t, tc.status, r.status, "%v: %s", tc.body, r.text)
		require.Contains(t, r.pointers(), tc.pointer, r.text)
	}
	// Nothing was stored by the refused requests.
	require.Len(t, e.do("GET", "/v1/projects/acme/packets", e.admin, nil).list(), 1)
}

func TestPacketsAreAppendOnly(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	require.Equal(t, 201, e.do("POST", "/v1/projects/acme/packets", e.admin, map[string]any{"target_role": "implementer"}).status)
	ctx := context.Background()
	for _, q := range []string{"UPDATE packets SET rendered = 'x'", "DELETE FROM packets", "UPDATE packet_records SET rule = 'x'", "DELETE FROM packet_records"} {
		_, err := e.pool.Exec(ctx, q)
		require.ErrorContains(t, err, "append-only", q)
	}
}

// TestReplayUnderConcurrentWrites assembles while writers commit, then
// replays every packet: each must be byte-identical, because it replays
// against its own snapshot.
func TestReplayUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				e.do("PUT", fmt.Sprintf("/v1/projects/acme/items/w%d.%d", w, i%7), e.admin, map[string]any{"content": fmt.Sprintf("writer %d wrote %d", w, i)})
			}
		}()
	}
	var ids []string
	for range 12 {
		r := e.do("POST", "/v1/projects/acme/packets", e.admin, map[string]any{"target_role": "implementer"})
		require.Equal(t, 201, r.status, r.text)
		ids = append(ids, r.json["packet_id"].(string))
	}
	close(stop)
	wg.Wait()
	for _, id := range ids {
		rp := e.do("POST", "/v1/projects/acme/packets/"+id+"/replay", e.admin, nil)
		require.Equal(t, true, rp.json["identical"], rp.text)
	}
}
