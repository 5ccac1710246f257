package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// TestIdempotentAssembliesDoNotStarveThePool: an idempotent request holds a
// connection for its transaction; packet assembly must read through it, not
// take a second one, or enough concurrent requests deadlock the pool.
func TestIdempotentAssembliesDoNotStarveThePool(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	const n = 24
	var wg sync.WaitGroup
	statuses := make([]int, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/projects/acme/packets", strings.NewReader(`{"target_role":"implementer"}`))
			req.Header.Set("Authorization", "Bearer "+e.admin)
			req.Header.Set("Idempotency-Key", fmt.Sprintf("pk-%d", i))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			res.Body.Close()
			statuses[i] = res.StatusCode
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		require.Equal(t, 201, s, "request %d", i)
	}
	// And the replayed answer of one of them is the packet it made.
	r1 := e.do("POST", "/v1/projects/acme/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "implementer"}, "Idempotency-Key", "pk-0")
	require.Equal(t, 201, r1.status)
	require.Equal(t, "true", r1.header.Get("Idempotent-Replayed"))
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/packets/"+r1.json["packet_id"].(string), e.admin, nil).status)
}

func TestNotTextIsAClearError(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	for _, path := range []string{
		"/v1/projects/%00/items", "/v1/projects/acme/packets/%FF", "/v1/projects/acme/handoffs/%00",
		"/v1/projects/acme/tasks/%FF/history", "/v1/projects/acme/items?q=%00", "/v1/projects/acme/items?kind=%FF",
	} {
		r := e.do("GET", path, e.admin, nil)
		require.Equal(t, 400, r.status, path)
		require.Equal(t, "malformed", r.json["code"])
	}
	r := e.do("PUT", "/v1/projects/acme/items/k", e.admin, api.PutItemJSONRequestBody{Content: "c"}, "Idempotency-Key", "bad\xff")
	require.Equal(t, 422, r.status)
	for _, tc := range []struct {
		path    string
		body    map[string]any
		pointer string
	}{
		{"/v1/projects/acme/handoffs", manifest("T\x00", "critic", "summary", "s"), "/task_id"},
		{"/v1/projects/acme/handoffs", manifest("T-1", "critic", "summary", "a\x00b"), "/summary"},
		{"/v1/projects/acme/items/k", map[string]any{"content": "c", "roles": map[string]any{"visible_to": []string{"x\x00"}}}, "/roles/visible_to/0"},
		{"/v1/agents", map[string]any{"name": "n\x00", "role": "r", "permission": "edit", "projects": []string{"acme"}}, "/name"},
	} {
		method := "POST"
		if strings.Contains(tc.path, "/items/") {
			method = "PUT"
		}
		r := e.do(method, tc.path, e.admin, tc.body)
		require.Equal(t, 422, r.status, r.text)
		require.Equal(t, []string{tc.pointer}, r.pointers())
	}
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/items?limit=99999999999", e.admin, nil).status)
	_ = a
}

func TestEmptyAgentContextIsNoAgentContext(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	for _, f := range []string{"markdown", "blocks", "json"} {
		r := e.do("POST", "/v1/projects/acme/packets", e.admin, map[string]any{"target_role": "implementer", "agent_context": map[string]any{}, "format": f})
		require.Equal(t, 201, r.status, r.text)
		require.NotContains(t, r.json["rendered"], "agent context")
		require.NotContains(t, r.json["rendered"], "agent_context")
		rp := e.do("POST", "/v1/projects/acme/packets/"+r.json["packet_id"].(string)+"/replay", e.admin, nil)
		require.Equal(t, true, rp.json["identical"], rp.text)
	}
}

func TestWhyHonoursVisibilityNow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	impl := e.agent("implementer", auth.Edit, "acme")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/sec", e.admin, api.PutItemJSONRequestBody{Content: "Secret later."}).status)
	p := e.do("POST", "/v1/projects/acme/packets", impl, api.AssemblePacketJSONRequestBody{TargetRole: "implementer"})
	id := p.json["packet_id"].(string)
	require.Equal(t, "included", e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=sec", impl, nil).json["decision"])
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/sec", e.admin, map[string]any{"content": "Secret later.", "roles": map[string]any{"hidden_from": []string{"implementer"}}}).status)
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/sec", impl, nil).status)
	hid := e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=sec", impl, nil)
	require.Equal(t, 200, hid.status, hid.text)
	require.Equal(t, "did_not_exist", hid.json["reason"], "hidden now: as a key that never existed")
	require.Equal(t, "included", e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=sec", e.admin, nil).json["decision"])
}

func TestWithdrawBelongsToTheSourceAgent(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	implID := func() string {
		r := e.do("GET", "/v1/agents", e.admin, nil)
		for _, ag := range r.list() {
			if ag["role"] == "implementer" {
				return ag["id"].(string)
			}
		}
		return ""
	}()
	// An admin files it on the implementer's behalf; the implementer may take it back.
	id := e.handoff(e.admin, manifest("T-1", "critic", "source", map[string]any{"role": "implementer", "agent_id": implID}))
	require.Equal(t, 403, e.do("POST", "/v1/projects/acme/handoffs/"+id+"/withdraw", a.planner, map[string]any{"reason": "x"}).status)
	r := e.do("POST", "/v1/projects/acme/handoffs/"+id+"/withdraw", a.implementer, map[string]any{"reason": "not ready"})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, "withdrawn", r.json["status"])
	// A non-admin cannot claim to be another agent.
	r = e.do("POST", "/v1/projects/acme/handoffs", a.planner, manifest("T-2", "critic", "source", map[string]any{"agent_id": implID}))
	require.Equal(t, 403, r.status)
}

func TestKeywordRuleIsReadable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/rd", e.admin, map[string]any{"content": "R&D budget rules.", "trigger": map[string]any{"keywords": []string{"R&D"}}}).status)
	p := e.do("POST", "/v1/projects/acme/packets", e.admin, map[string]any{"target_role": "implementer",
		"history": []any{map[string]any{"role": "user", "author": "person", "content": "what about r&d?"}}})
	w := e.do("GET", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/why?item=rd", e.admin, nil)
	require.Equal(t, `keyword:"R&D"@history[0]`, w.json["rule"])
}

func TestInjectionsListEveryPacketOfTheProject(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	impl := e.agent("implementer", auth.ReadOnly, "acme")
	critic := e.agent("critic", auth.ReadOnly, "acme")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/fact", e.admin, api.PutItemJSONRequestBody{Content: "A shared fact."}).status)
	require.Equal(t, 201, e.do("POST", "/v1/projects/acme/packets", impl, api.AssemblePacketJSONRequestBody{TargetRole: "implementer"}).status)
	require.Equal(t, 201, e.do("POST", "/v1/projects/acme/packets", critic, api.AssemblePacketJSONRequestBody{TargetRole: "critic"}).status)
	r := e.do("GET", "/v1/projects/acme/items/fact/injections", impl, nil)
	require.Len(t, r.list(), 2)
	require.Equal(t, "critic", r.list()[0]["target_role"], "newest first")
}

func TestAgentKeyIsNotKeptForReplays(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	body := map[string]any{"name": "a", "role": "r", "permission": "edit", "projects": []string{"acme"}}
	r1 := e.do("POST", "/v1/agents", e.admin, body, "Idempotency-Key", "ag-1")
	require.Equal(t, 201, r1.status)
	key := r1.json["key"].(string)
	r2 := e.do("POST", "/v1/agents", e.admin, body, "Idempotency-Key", "ag-1")
	require.Equal(t, 201, r2.status)
	require.Equal(t, r1.json["id"], r2.json["id"], "the same agent, not a second one")
	require.Nil(t, r2.json["key"], "a key is shown once")
	var stored int
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_keys WHERE position($1::bytea in body) > 0", []byte(key)).Scan(&stored))
	require.Zero(t, stored, "the key is nowhere in the database but as its hash")
}

func TestScopedAdmin(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	e.project("other")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/other/items/secret", e.admin, api.PutItemJSONRequestBody{Content: "Other's secret."}).status)
	admin := e.agent("ops", auth.Admin, "acme")
	require.Equal(t, 404, e.do("GET", "/v1/projects/other/items/secret", admin, nil).status)
	require.Equal(t, 404, e.do("PUT", "/v1/projects/other", admin, api.PutProjectJSONRequestBody{Description: ptr("hijack")}).status)
	require.Equal(t, 200, e.do("PUT", "/v1/projects/acme", admin, api.PutProjectJSONRequestBody{Description: ptr("mine")}).status)
	names := []string{}
	for _, p := range e.do("GET", "/v1/projects", admin, nil).list() {
		names = append(names, p["project"].(string))
	}
	require.Equal(t, []string{"_shared", "acme"}, names)
	require.Equal(t, 403, e.do("POST", "/v1/agents", admin, map[string]any{"name": "x", "role": "x", "permission": "admin", "projects": []string{"*"}}).status)
	require.Equal(t, 201, e.do("POST", "/v1/agents", admin, map[string]any{"name": "x", "role": "x", "permission": "edit", "projects": []string{"acme"}}).status)
	require.Equal(t, 422, e.do("POST", "/v1/agents", e.admin, map[string]any{"name": "x", "role": "x", "permission": "edit", "projects": []string{"bad name!"}}).status)
	// It sees and revokes only agents within its scope.
	listed := e.do("GET", "/v1/agents", admin, nil).list()
	for _, a := range listed {
		require.NotContains(t, a["projects"], "*")
	}
	root := ""
	for _, a := range e.do("GET", "/v1/agents", e.admin, nil).list() {
		if a["name"] == "admin" {
			root = a["id"].(string)
		}
	}
	require.Equal(t, 403, e.do("DELETE", "/v1/agents/"+root, admin, nil).status)
}

func TestNoPacketsInShared(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("shop")
	support := e.agent("support", auth.Edit, "shop")
	r := e.do("POST", "/v1/projects/_shared/packets", support, map[string]any{"target_role": "support", "task": map[string]any{"task_id": "SECRET"}})
	require.Equal(t, 403, r.status, r.text)
	require.Equal(t, 403, e.do("POST", "/v1/projects/_shared/handoffs", support, manifest("T", "critic")).status)
}

func TestBudgetValuesAndFilters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	r := e.do("POST", "/v1/projects/acme/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "x", TokenBudget: ptr(0)})
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"/token_budget"}, r.pointers())
	require.Equal(t, 201, e.do("POST", "/v1/projects/acme/packets", e.admin, map[string]any{"target_role": "x", "token_budget": nil}).status)
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/items?kind=bogus", e.admin, nil).status)
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/items?source=internet", e.admin, nil).status)
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items?source=other:jira", e.admin, nil).status)
	r = e.do("PUT", "/v1/projects/acme/items/k", e.admin, map[string]any{"content": "c", "trigger": map[string]any{"keywords": []string{"!!!"}}})
	require.Equal(t, 422, r.status)
	require.Equal(t, []string{"/trigger/keywords/0"}, r.pointers())
}

func TestPredecessorPositions(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	h1 := e.handoff(a.implementer, manifest("T-1", "critic"))
	h2 := e.handoff(a.implementer, manifest("T-2", "critic"))
	p := e.do("POST", "/v1/projects/acme/packets", a.critic, map[string]any{"target_role": "critic", "predecessors": []string{h1, h2}})
	require.Equal(t, 201, p.status, p.text)
	recs := records(e.do("GET", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/records", a.critic, nil))
	require.Equal(t, 0.0, recs[h1]["position"])
	require.Equal(t, 1.0, recs[h2]["position"])
	r := e.do("POST", "/v1/projects/acme/packets", a.critic, map[string]any{"target_role": "critic", "predecessors": []string{h1, h1}})
	require.Equal(t, 422, r.status)
}

func TestIfMatchSemantics(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	path := "/v1/projects/acme/items/y"
	require.Equal(t, 412, e.do("PUT", path, e.admin, map[string]any{"content": "a"}, "If-Match", "*").status, "* needs an existing item")
	require.Equal(t, 201, e.do("PUT", path, e.admin, map[string]any{"content": "a"}).status)
	require.Equal(t, 412, e.do("PUT", path, e.admin, map[string]any{"content": "b"}, "If-Match", `W/"1"`).status, "weak tags never match")
	require.Equal(t, 201, e.do("PUT", path, e.admin, map[string]any{"content": "b"}, "If-Match", `"7", "1"`).status, "any tag of a list")
	require.Equal(t, 201, e.do("PUT", path, e.admin, map[string]any{"content": "c"}, "If-Match", "*").status)
	require.Equal(t, 422, e.do("PUT", path, e.admin, map[string]any{"content": "d"}, "If-Match", "3").status, "tags are quoted")
	require.Equal(t, 412, e.do("DELETE", path, e.admin, nil, "If-Match", `"1"`).status)
	require.Equal(t, 200, e.do("DELETE", path, e.admin, nil, "If-Match", `"3"`).status)
}

func TestAttributeEveryOccurrence(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/a", e.admin, api.PutItemJSONRequestBody{Content: "日本 aaa"}).status)
	p := e.do("POST", "/v1/projects/acme/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "x"})
	id := p.json["packet_id"].(string)
	rendered := p.json["rendered"].(string)
	a := e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", e.admin, map[string]any{"text": "aa"})
	require.Len(t, a.json["matches"], 2, "overlapping occurrences count")
	at := strings.Index(rendered, "日本")
	r := e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", e.admin, map[string]any{"start": at + 1, "end": at + 4})
	require.Equal(t, 422, r.status, "a range may not cut a character")
	r = e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", e.admin, map[string]any{"start": at, "end": at + 6})
	require.Equal(t, "日本", r.json["matches"].([]any)[0].(map[string]any)["text"])
}

func TestWhyHandoffAsThePacketSawIt(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	h := e.handoff(a.implementer, manifest("T-1", "critic"))
	p := e.do("POST", "/v1/projects/acme/packets", a.critic, map[string]any{"target_role": "critic", "predecessors": []string{h}})
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+h+"/accept", a.critic, map[string]any{"reason": "fine"}).status)
	w := e.do("GET", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/why?handoff="+h, a.critic, nil)
	require.Equal(t, "pending", w.json["handoff"].(map[string]any)["status"])
	require.Nil(t, w.json["handoff"].(map[string]any)["status_reason"])
	require.Equal(t, "accepted", e.do("GET", "/v1/projects/acme/handoffs/"+h, a.critic, nil).json["status"])
}

func TestPacketListingsArePerRole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	impl := e.agent("implementer", auth.ReadOnly, "acme")
	critic := e.agent("critic", auth.ReadOnly, "acme")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/rubric", e.admin, map[string]any{"content": "Critics only.", "roles": map[string]any{"visible_to": []string{"critic"}}}).status)
	cp := e.do("POST", "/v1/projects/acme/packets", critic, map[string]any{"target_role": "critic", "task": map[string]any{"task_id": "T"}})
	require.Equal(t, 201, cp.status)
	// A packet summary counts what its role saw, so it is listed for that
	// role (and admins) only; opening it likewise.
	require.Empty(t, e.do("GET", "/v1/projects/acme/packets", impl, nil).list())
	require.Empty(t, e.do("GET", "/v1/projects/acme/packets?target_role=critic", impl, nil).list())
	require.Len(t, e.do("GET", "/v1/projects/acme/packets", critic, nil).list(), 1)
	require.Len(t, e.do("GET", "/v1/projects/acme/packets", e.admin, nil).list(), 1)
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/packets/"+cp.json["packet_id"].(string), impl, nil).status)
}

func TestHiddenVersionsStayHidden(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	reviewer := e.agent("reviewer", auth.ReadOnly, "acme")
	path := "/v1/projects/acme/items/flip"
	v1 := e.do("PUT", path, e.admin, map[string]any{"content": "hidden v1", "roles": map[string]any{"hidden_from": []string{"reviewer"}}})
	require.Equal(t, 201, v1.status)
	time.Sleep(5 * time.Millisecond)
	require.Equal(t, 201, e.do("PUT", path, e.admin, map[string]any{"content": "public v2"}).status)
	require.Equal(t, "public v2", e.do("GET", path, reviewer, nil).json["content"])
	vs := e.do("GET", path+"/versions", reviewer, nil)
	require.Len(t, vs.list(), 1)
	require.Equal(t, 2.0, vs.list()[0]["version"])
	require.NotContains(t, vs.text, "hidden v1")
	require.Equal(t, 404, e.do("GET", path+"/versions/1", reviewer, nil).status)
	require.Equal(t, 404, e.do("GET", path+"?as_of="+v1.json["created_at"].(string), reviewer, nil).status)
	require.Len(t, e.do("GET", path+"/versions", e.admin, nil).list(), 2)
}

func TestBatchShapeProblemsAllAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	r := e.do("POST", "/v1/projects/acme/items", e.admin, `{"items":[{"key":"a","content":5},{"key":"b","content":"x","zzz":1},{"key":"c","content":"x","metadata":"s"}]}`)
	require.Equal(t, 400, r.status, r.text)
	// The third item is in shape, but its metadata is no object: named too.
	require.ElementsMatch(t, []string{"/items/0/content", "/items/1/zzz", "/items/2/metadata"}, r.pointers())
	// Shape problems and value problems of other items, in one answer.
	r = e.do("POST", "/v1/projects/acme/items", e.admin, `{"items":[{"key":"mx1","content":"a","bogus":1},{"key":"bad key","content":"a"},{"key":"mx3","content":""},{"key":"ok","content":"fine"}]}`)
	require.Equal(t, 400, r.status, r.text)
	require.ElementsMatch(t, []string{"/items/0/bogus", "/items/1/key", "/items/2/content"}, r.pointers())
	r = e.do("POST", "/v1/projects/acme/items", e.admin, `{"items":[{"key":"k1","content":5},{"key":"k1","content":"dup"},{"key":"k2","content":"x","kind":"nope"}]}`)
	require.Equal(t, 400, r.status, r.text)
	require.ElementsMatch(t, []string{"/items/0/content", "/items/2/kind"}, r.pointers(), "the shape-broken item is left out of the value checks (no duplicate with it)")
	// A value out of range beside a metadata that is no object: malformed,
	// as the metadata alone would be.
	r = e.do("POST", "/v1/projects/acme/items", e.admin, `{"items":[{"key":"r1","content":"x","priority":99999999999},{"key":"r2","content":"x","metadata":"s"}]}`)
	require.Equal(t, 400, r.status, r.text)
	require.ElementsMatch(t, []string{"/items/0/priority", "/items/1/metadata"}, r.pointers())
	// No shape problem: a metadata that is no object and another item's bad key.
	r = e.do("POST", "/v1/projects/acme/items", e.admin, `{"items":[{"key":"m1","content":"x","metadata":"s"},{"key":"bad key","content":"x"}]}`)
	require.Equal(t, 400, r.status, r.text)
	require.ElementsMatch(t, []string{"/items/0/metadata", "/items/1/key"}, r.pointers())
	r = e.do("POST", "/v1/projects/acme/items", e.admin, `{"items":[{"key":"c","content":"x","metadata":"s"},{"key":"d","content":"x","metadata":[1]}]}`)
	require.Equal(t, 400, r.status, r.text)
	require.Equal(t, []string{"/items/0/metadata", "/items/1/metadata"}, r.pointers())
	require.Empty(t, e.do("GET", "/v1/projects/acme/items", e.admin, nil).list())
}

func TestIfMatchOnMissingOrHiddenIs412(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	impl := e.agent("implementer", auth.Edit, "acme")
	require.Equal(t, 412, e.do("DELETE", "/v1/projects/acme/items/never", e.admin, nil, "If-Match", `"1"`).status)
	require.Equal(t, 404, e.do("DELETE", "/v1/projects/acme/items/never", e.admin, nil).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/gone", e.admin, api.PutItemJSONRequestBody{Content: "x"}).status)
	require.Equal(t, 200, e.do("DELETE", "/v1/projects/acme/items/gone", e.admin, nil).status)
	require.Equal(t, 412, e.do("DELETE", "/v1/projects/acme/items/gone", e.admin, nil, "If-Match", `"2"`).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/hid", e.admin, map[string]any{"content": "x", "roles": map[string]any{"hidden_from": []string{"implementer"}}}).status)
	// For the implementer the hidden item answers exactly as a missing one.
	require.Equal(t, 412, e.do("PUT", "/v1/projects/acme/items/hid", impl, api.PutItemJSONRequestBody{Content: "y"}, "If-Match", `"1"`).status)
	require.Equal(t, 412, e.do("PUT", "/v1/projects/acme/items/never", impl, api.PutItemJSONRequestBody{Content: "y"}, "If-Match", `"1"`).status)
	require.Equal(t, 412, e.do("DELETE", "/v1/projects/acme/items/hid", impl, nil, "If-Match", `"1"`).status)
}

func TestQA4Edges(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	// Hidden now: gone from every packet endpoint for that role, not only why.
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/vis", e.admin, api.PutItemJSONRequestBody{Content: "Visibility probe."}).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/_shared/items/tone", e.admin, api.PutItemJSONRequestBody{Content: "Be formal."}).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/tone", e.admin, api.PutItemJSONRequestBody{Content: "Be friendly."}).status)
	p := e.do("POST", "/v1/projects/acme/packets", a.critic, map[string]any{"target_role": "critic", "query": "weather forecast"})
	id := p.json["packet_id"].(string)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/vis", e.admin, map[string]any{"content": "Visibility probe.", "roles": map[string]any{"hidden_from": []string{"critic"}}}).status)
	require.NotContains(t, records(e.do("GET", "/v1/projects/acme/packets/"+id+"/records", a.critic, nil)), "vis")
	require.NotContains(t, e.do("GET", "/v1/projects/acme/packets/"+id, a.critic, nil).text, `"vis"`)
	require.Equal(t, true, e.do("POST", "/v1/projects/acme/packets/"+id+"/replay", a.critic, nil).json["identical"])
	// The overridden _shared record is reachable through why with layer=shared.
	w := e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=tone&layer=shared", a.critic, nil)
	require.Equal(t, "overridden", w.json["reason"], w.text)
	require.Equal(t, "included", e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=tone", a.critic, nil).json["decision"])
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item=tone&layer=both", a.critic, nil).status)
	// Relevance: what the request lacked is said precisely.
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/rel.doc", e.admin, map[string]any{"content": "The ledger reconciles nightly.", "trigger": map[string]any{"relevance": true}}).status)
	p = e.do("POST", "/v1/projects/acme/packets", a.critic, map[string]any{"target_role": "critic", "query": "weather forecast"})
	w = e.do("GET", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/why?item=rel.doc", a.critic, nil)
	require.Contains(t, w.json["detail"], "shares no word")
	// No handoffs in _shared; a Last-Event-ID from the future starts from now.
	require.Equal(t, 422, e.do("POST", "/v1/projects/_shared/handoffs", e.admin, manifest("T", "critic")).status)
	ch, stop := openStream(t, e.url, a.criticRO, "", "5000000")
	defer stop()
	time.Sleep(200 * time.Millisecond)
	h := e.handoff(a.implementer, manifest("T-future", "critic"))
	require.Contains(t, next(t, ch).data, h)
	// Predecessors count in the provenance summary.
	pk := e.do("POST", "/v1/projects/acme/packets", a.critic, map[string]any{"target_role": "critic", "predecessors": []string{h}})
	require.Equal(t, 1.0, pk.json["provenance_summary"].(map[string]any)["by_kind"].(map[string]any)["handoff"])
}

// A parameter the binder cannot read is named, with what it must be, and
// none of Go's own wording.
func TestParameterFormatProblems(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/k", e.admin, api.PutItemJSONRequestBody{Content: "x"}).status)
	for _, c := range []struct {
		path, param, code, field string
		status                   int
	}{
		{"/v1/projects/acme/items?limit=abc", "limit", "malformed", "type", 400},
		{"/v1/projects/acme/items/k/versions/x1", "version", "malformed", "type", 400},
		{"/v1/projects/acme/items/k/versions/99999999999", "version", "validation_failed", "range", 422},
		{"/v1/projects/acme/items?limit=1&limit=2", "limit", "malformed", "type", 400},
	} {
		r := e.do("GET", c.path, e.admin, nil)
		require.Equal(t, c.status, r.status, "%s: %s", c.path, r.text)
		require.Equal(t, c.code, r.json["code"], c.path)
		require.NotContains(t, r.text, "strconv", c.path)
		require.NotContains(t, r.text, "overflows", c.path)
		require.Contains(t, r.json["detail"], "parameter "+c.param, c.path)
		errs := r.json["errors"].([]any)
		require.Len(t, errs, 1, c.path)
		require.Equal(t, c.param, errs[0].(map[string]any)["parameter"], c.path)
		require.Equal(t, c.field, errs[0].(map[string]any)["code"], c.path)
	}
	r := e.do("GET", "/v1/projects/acme/items?limit=1&limit=2", e.admin, nil)
	require.Contains(t, r.json["detail"], "must be given once")
}
