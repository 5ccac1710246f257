package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// nested is a JSON object n levels deep: {"a":{"a":...{"a":1}}}.
func nested(n int) map[string]any {
	var v any = 1
	for range n - 1 {
		v = map[string]any{"a": v}
	}
	return map[string]any{"a": v}
}

// TestRestrictedItemsAtTheLimits: an always-on item and a tool item,
// its tool at its limit, with every role list at its limit are written
// (index entries hold at most 2,704 bytes: 00041; before, a 500).
func TestRestrictedItemsAtTheLimits(t *testing.T) {
	t.Parallel()
	e, _ := handoffWorld(t)
	roles := make([]string, 1000)
	for i := range roles {
		roles[i] = fmt.Sprintf("%064d", i)
	}
	for key, trigger := range map[string]map[string]any{"always": {"always": true}, "tool": {"tool": strings.Repeat("é", 200)}} {
		r := e.do("PUT", "/v1/projects/acme/items/"+key, e.admin, map[string]any{
			"content": "x", "trigger": trigger, "roles": map[string]any{"visible_to": roles, "hidden_from": roles},
		})
		require.Equal(t, 201, r.status, "%s: %.300s", key, r.text)
	}
}

// TestInputLimits: every input has a limit (package limits, defaults
// after KXM's); over it is 422 validation_failed with the pointer, or the
// parameter's name, and nothing is written.
func TestInputLimits(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	assemble := func(body map[string]any) resp {
		body["target_role"] = "implementer"
		return e.do("POST", "/v1/projects/acme/packets", a.implementer, body)
	}
	cases := []struct {
		name    string
		r       resp
		pointer string
		code    string
	}{
		{"query", assemble(map[string]any{"query": long(4001)}), "/query", "too_long"},
		{"objective", assemble(map[string]any{"task": map[string]any{"objective": long(4001)}}), "/task/objective", "too_long"},
		{"task_id", assemble(map[string]any{"task": map[string]any{"task_id": long(129)}}), "/task/task_id", "too_long"},
		{"step_id", assemble(map[string]any{"task": map[string]any{"step_id": long(65)}}), "/task/step_id", "too_long"},
		{"pins", assemble(map[string]any{"pins": strings.Split(strings.Repeat("k,", 1001)[:2001], ",")}), "/pins", "too_many"},
		{"history", assemble(map[string]any{"history": func() []any {
			out := make([]any, 1001)
			for i := range out {
				out[i] = map[string]any{"role": "user", "author": "person", "content": "hi"}
			}
			return out
		}()}), "/history", "too_many"},
		{"message", assemble(map[string]any{"history": []any{map[string]any{"role": "user", "author": "person", "content": long(100<<10 + 1)}}}), "/history/0/content", "too_long"},
		{"tool result", assemble(map[string]any{"tool_results": []any{map[string]any{"tool": "t", "content": long(100<<10 + 1)}}}), "/tool_results/0/content", "too_long"},
		{"agent_context key", assemble(map[string]any{"agent_context": map[string]any{"a": map[string]any{"accessToken": "s3cr3t"}}}), "/agent_context/a/accessToken", "forbidden_key"},
		{"agent_context in a list", assemble(map[string]any{"agent_context": map[string]any{"l": []any{map[string]any{"api_key": "k"}}}}), "/agent_context/l/0/api_key", "forbidden_key"},
		{"variables key", assemble(map[string]any{"variables": map[string]any{"password": "hunter2"}}), "/variables/password", "forbidden_key"},
		{"agent_context depth", assemble(map[string]any{"agent_context": nested(17)}), "/agent_context", "too_deep"},
		{"agent_context very deep", assemble(map[string]any{"agent_context": nested(5000)}), "/agent_context", "too_deep"},
		{"agent_context size", assemble(map[string]any{"agent_context": map[string]any{"notes": long(256 << 10)}}), "/agent_context", "too_long"},
		{"variables", assemble(map[string]any{"variables": func() map[string]any {
			m := map[string]any{}
			for i := range 1001 {
				m[fmt.Sprint("v", i)] = "x"
			}
			return m
		}()}), "/variables", "too_many"},
		{"content", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": long(1<<20 + 1)}), "/content", "too_long"},
		{"summary", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "summary": long(4001)}), "/summary", "too_long"},
		{"keywords", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "trigger": map[string]any{"keywords": strings.Split(strings.Repeat("k,", 65)[:129], ",")}}), "/trigger/keywords", "too_many"},
		{"keyword", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "trigger": map[string]any{"keywords": []string{long(101)}}}), "/trigger/keywords/0", "too_long"},
		{"title", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "title": strings.Repeat("é", 1001)}), "/title", "too_long"},
		{"state_key", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "state_key": long(201)}), "/state_key", "too_long"},
		{"tool", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "trigger": map[string]any{"tool": long(201)}}), "/trigger/tool", "too_long"},
		{"source_ref", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "provenance": map[string]any{"source_ref": long(4001)}}), "/provenance/source_ref", "too_long"},
		{"derived_from", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "provenance": map[string]any{"derived_from": strings.Split(strings.Repeat("d,", 1001)[:2001], ",")}}), "/provenance/derived_from", "too_many"},
		{"derived_from entry", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "provenance": map[string]any{"derived_from": []string{"a", long(4001)}}}), "/provenance/derived_from/1", "too_long"},
		{"metadata", e.do("PUT", "/v1/projects/acme/items/big", e.admin, map[string]any{"content": "x", "metadata": map[string]any{"notes": long(64 << 10)}}), "/metadata", "too_long"},
		{"batch item", e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": []any{map[string]any{"key": "k", "content": "x", "summary": long(4001)}}}), "/items/0/summary", "too_long"},
		{"agent name", e.do("POST", "/v1/agents", e.admin, map[string]any{"name": long(129), "role": "r", "permission": "edit", "projects": []string{"acme"}}), "/name", "too_long"},
		{"agent role", e.do("POST", "/v1/agents", e.admin, map[string]any{"name": "n", "role": long(65), "permission": "edit", "projects": []string{"acme"}}), "/role", "too_long"},
		{"description", e.do("PUT", "/v1/projects/acme", e.admin, map[string]any{"description": long(2001)}), "/description", "too_long"},
		{"handoff summary", e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest("T-1", "critic", "summary", long(4001))), "/summary", "too_long"},
		{"handoff task_id", e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest(long(129), "critic")), "/task_id", "too_long"},
	}
	for _, c := range cases {
		require.Equal(t, 422, c.r.status, "%s: %.300s", c.name, c.r.text)
		require.Equal(t, "validation_failed", c.r.json["code"], c.name)
		require.Contains(t, c.r.pointers(), c.pointer, "%s: %.300s", c.name, c.r.text)
		found := false
		for _, f := range c.r.json["errors"].([]any) {
			if f.(map[string]any)["pointer"] == c.pointer && f.(map[string]any)["code"] == c.code {
				found = true
			}
		}
		require.True(t, found, "%s: want code %s at %s: %.300s", c.name, c.code, c.pointer, c.r.text)
	}
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/big", e.admin, nil).status, "nothing written")

	// At the limit is fine.
	require.Equal(t, 201, assemble(map[string]any{"query": long(4000), "agent_context": nested(16)}).status)
	r0 := e.do("PUT", "/v1/projects/acme/items/at-limit", e.admin, map[string]any{
		"content": "x", "title": strings.Repeat("é", 1000), "state_key": strings.Repeat("é", 200),
		"provenance": map[string]any{"source_ref": long(4000), "derived_from": strings.Split(strings.Repeat("d,", 1000)[:1999], ",")},
		"metadata":   map[string]any{"notes": long(64<<10 - 20)},
	})
	require.Equal(t, 201, r0.status, "%.300s", r0.text)
	id := e.handoff(a.implementer, manifest("T-2", "critic"))
	r := e.do("POST", "/v1/projects/acme/handoffs/"+id+"/reject", a.critic, map[string]any{"reason": long(2001)})
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"/reason"}, r.pointers())

	// Parameters: named, not pointed at.
	for _, path := range []string{"/v1/projects/acme/items?q=" + strings.Repeat("word+", 3000), "/v1/projects/acme/tasks/" + long(129) + "/history"} {
		r := e.do("GET", path, a.implementer, nil)
		require.Equal(t, 422, r.status, "%.200s: %.300s", path, r.text)
		errs := r.json["errors"].([]any)
		require.NotEmpty(t, errs[0].(map[string]any)["parameter"], r.text)
	}
}

// TestMetadataLimitIsOnWhatIsStored: the metadata limit is on what is
// stored and read back, so what a read answers can always be written back:
// 20,000 "<" are sent as 20 KB but stored (and read) as \u003c, 120 KB, and
// are refused at once; metadata just under the limit once stored goes
// round the trip.
func TestMetadataLimitIsOnWhatIsStored(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	r := e.do("PUT", "/v1/projects/acme/items/escaped", e.admin, map[string]any{"content": "x", "metadata": map[string]any{"n": strings.Repeat("<", 20000)}})
	require.Equal(t, 422, r.status, "%.300s", r.text)
	require.Equal(t, []string{"/metadata"}, r.pointers())
	require.Contains(t, r.text, "too_long")
	r = e.do("PUT", "/v1/projects/acme/items/escaped", e.admin, map[string]any{"content": "x", "metadata": map[string]any{"n": strings.Repeat("<&>", (64<<10-16)/18)}})
	require.Equal(t, 201, r.status, "%.300s", r.text)
	read := e.do("GET", "/v1/projects/acme/items/escaped", e.admin, nil)
	require.Equal(t, 200, read.status)
	raw := fmt.Sprintf(`{"content":"x","metadata":%s}`, metadataOf(t, read.text))
	require.Greater(t, len(raw), 64<<10-100, "the metadata read back is near the limit")
	r = e.do("PUT", "/v1/projects/acme/items/escaped", e.admin, raw)
	require.Equal(t, 200, r.status, "written back as read: unchanged, %.300s", r.text)
	require.Equal(t, `"1"`, r.header.Get("ETag"))

	// Numbers are measured as jsonb prints them: 1e2 is read as 100, so
	// writing 100 back is no change; 1e131071, 9 bytes sent, would be
	// 131,072 stored; 1e200000 and 1e-20000 jsonb cannot hold at all (they
	// were a 500). Each is refused at its pointer, nothing written.
	r = e.do("PUT", "/v1/projects/acme/items/numbers", e.admin, `{"content":"x","metadata":{"a":1e2,"b":1.5e-3,"c":[1.50]}}`)
	require.Equal(t, 201, r.status, r.text)
	read = e.do("GET", "/v1/projects/acme/items/numbers", e.admin, nil)
	require.JSONEq(t, `{"a":100,"b":0.0015,"c":[1.50]}`, metadataOf(t, read.text))
	require.Contains(t, read.text, `[1.50]`, "the scale is kept")
	r = e.do("PUT", "/v1/projects/acme/items/numbers", e.admin, `{"content":"x","metadata":{"a":100,"b":0.0015,"c":[1.50]}}`)
	require.Equal(t, 200, r.status, "the same numbers: unchanged, %s", r.text)
	for _, n := range []string{"1e131071", "1e200000", "1e-20000", "-1e99999999999999999999"} {
		r = e.do("PUT", "/v1/projects/acme/items/numbers", e.admin, `{"content":"x","metadata":{"n":[0,`+n+`]}}`)
		require.Equal(t, 422, r.status, "%s: %s", n, r.text)
		require.Equal(t, []string{"/metadata/n/1"}, r.pointers(), n)
	}
	require.Equal(t, `"1"`, e.do("GET", "/v1/projects/acme/items/numbers", e.admin, nil).header.Get("ETag"))
}

// metadataOf is the metadata member of an item's JSON, byte for byte.
func metadataOf(t *testing.T, body string) string {
	t.Helper()
	var v struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	return string(v.Metadata)
}

// TestListPagesAreCappedByBytes: a page holds at most 8 MiB of item text
// past its first item whatever its limit, and its cursor goes on.
func TestListPagesAreCappedByBytes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	var items []api.BatchItem
	for i := range 10 {
		items = append(items, api.BatchItem{Key: fmt.Sprintf("big.%d", i), Content: fmt.Sprint(i) + strings.Repeat("x ", 1<<19)[1:]}) // 1 MiB
	}
	e.batch("acme", items)
	r := e.do("GET", "/v1/projects/acme/items?limit=1000", e.admin, nil)
	require.Equal(t, 200, r.status)
	require.Len(t, r.list(), 8, "8 MiB, then the cursor")
	next, _ := r.json["next_cursor"].(string)
	require.NotEmpty(t, next)
	r = e.do("GET", "/v1/projects/acme/items?limit=1000&cursor="+next, e.admin, nil)
	require.Len(t, r.list(), 2)
	require.Equal(t, "big.8", r.list()[0]["key"])
	require.Nil(t, r.json["next_cursor"])
}

// TestDocumentNumbersAsStored: the numbers of a request's free-form
// documents are taken as jsonb stores them, so the packet renders what a
// replay of its stored request renders (a variable of 1e2 is 100, byte for
// byte the same on replay), and a number jsonb cannot hold is 422 at its
// pointer (it was a 500 when the packet was stored). (A context packet's
// numbers are navi's parser's: out of f64's range, it refuses them.)
func TestDocumentNumbersAsStored(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	req := packetRequest("implementer")
	req["variables"] = map[string]any{"customer": json.Number("1e2")}
	r := e.do("POST", "/v1/projects/acme/packets", e.admin, req)
	require.Equal(t, 201, r.status, r.text)
	require.Contains(t, r.json["rendered"], "Hello 100, this is acme.")
	rp := e.do("POST", "/v1/projects/acme/packets/"+r.json["packet_id"].(string)+"/replay", e.admin, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, true, rp.json["identical"], rp.text)

	for doc, want := range map[string]string{"agent_context": "/agent_context/n/1", "variables": "/variables/n/1"} {
		for _, n := range []string{"1e200000", "1e-20000", "1e131071"} {
			req := packetRequest("implementer")
			req[doc] = map[string]any{"n": []any{1, json.Number(n)}}
			r := e.do("POST", "/v1/projects/acme/packets", e.admin, req)
			require.Equal(t, 422, r.status, "%s %s: %s", doc, n, r.text)
			require.Equal(t, []string{want}, r.pointers(), "%s %s", doc, n)
		}
	}

	// A context packet is stored as sent: its numbers are checked where
	// they stand (metadata or members navi does not read), and its size is
	// taken as stored. (1e-20000 and an unread member's 1e200000 were a
	// 500; 9,000 of 1e131071 in one member, an 81 KB body, were stored and
	// made every read of the packet, and the project's packet list, a 500.)
	many := func(n int, num string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(num+",", n), ",") + "]"
	}
	for body, want := range map[string]string{
		`{"source":"File","content":"x","metadata":{"a":1e-20000}}`:          "/context_packets/0/metadata/a",
		`{"source":"File","content":"x","extra":1e200000}`:                   "/context_packets/0/extra",
		`{"source":"File","content":"x","extra":{"b":[0,1e131071]}}`:         "/context_packets/0/extra/b/1",
		`{"source":"File","content":"x","extra":` + many(400, "1e999") + `}`: "/context_packets/0",
	} {
		req := packetRequest("implementer")
		req["context_packets"] = []any{json.RawMessage(body)}
		r := e.do("POST", "/v1/projects/acme/packets", e.admin, req)
		require.Equal(t, 422, r.status, "%.100s: %.300s", body, r.text)
		require.Equal(t, []string{want}, r.pointers(), "%.100s", body)
	}
	req = packetRequest("implementer")
	req["context_packets"] = []any{json.RawMessage(`{"source":"File","content":"x","extra":` + many(300, "1e999") + `}`)}
	r = e.do("POST", "/v1/projects/acme/packets", e.admin, req)
	require.Equal(t, 201, r.status, "300 KB as stored is within the limits: %.300s", r.text)
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/packets/"+r.json["packet_id"].(string), e.admin, nil).status)
	req = packetRequest("implementer")
	req["variables"] = map[string]any{"n": json.RawMessage(many(300, "1e999"))}
	r = e.do("POST", "/v1/projects/acme/packets", e.admin, req)
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"/variables"}, r.pointers(), "300 KB of variables as stored")
}
