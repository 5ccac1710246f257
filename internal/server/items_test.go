package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

func TestItemVersionSemantics(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	key := e.agent("implementer", auth.Edit, "acme")
	path := "/v1/projects/acme/items/refund.policy"

	r := e.do("PUT", path, key, map[string]any{"content": "Refunds take 5 days.", "title": "Refunds"})
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, 1, r.num("version"))
	require.Equal(t, `"1"`, r.header.Get("ETag"))
	sum := sha256.Sum256([]byte("Refunds take 5 days."))
	require.Equal(t, hex.EncodeToString(sum[:]), r.json["content_sha256"])
	require.Positive(t, r.num("tokens"))
	require.Positive(t, r.num("tokens_cl100k_base"))
	require.Positive(t, r.num("xact_id"))
	v1Time := r.json["created_at"].(string)

	// The same write again changes nothing.
	r = e.do("PUT", path, key, map[string]any{"content": "Refunds take 5 days.", "title": "Refunds"})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, 1, r.num("version"))
	require.Equal(t, `"1"`, r.header.Get("ETag"))

	// A PUT is a full replacement: the omitted title goes back to its default.
	time.Sleep(5 * time.Millisecond)
	r = e.do("PUT", path, key, map[string]any{"content": "Refunds take 5 days."})
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, 2, r.num("version"))
	require.Equal(t, "", r.json["title"])

	r = e.do("GET", path, key, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, 2, r.num("version"))
	require.Equal(t, `"2"`, r.header.Get("ETag"))

	// as_of is recorded time: at v1's creation time, v1 was latest.
	r = e.do("GET", path+"?as_of="+url.QueryEscape(v1Time), key, nil)
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, 1, r.num("version"))
	require.Equal(t, "Refunds", r.json["title"])
	r = e.do("GET", path+"?as_of=2000-01-01T00:00:00Z", key, nil)
	require.Equal(t, 404, r.status)
	r = e.do("GET", path+"?as_of=yesterday", key, nil)
	require.Equal(t, 422, r.status)

	// If-Match.
	r = e.do("PUT", path, key, map[string]any{"content": "x"}, "If-Match", `"1"`)
	require.Equal(t, 412, r.status, r.text)
	require.Equal(t, "precondition_failed", r.json["code"])
	require.Contains(t, r.json["detail"], `If-Match "1", but`, "the detail names the tags as sent")
	r = e.do("PUT", path, key, map[string]any{"content": "x"}, "If-Match", `W/"2", "1"`)
	require.Contains(t, r.json["detail"], `If-Match "1", but`)
	r = e.do("PUT", path, key, map[string]any{"content": "x"}, "If-Match", `W/"2"`)
	require.Equal(t, 412, r.status, r.text)
	require.Contains(t, r.json["detail"], "weak tags only")
	r = e.do("PUT", "/v1/projects/acme/items/missing", key, api.PutItemJSONRequestBody{Content: "x"}, "If-Match", `"1"`)
	require.Equal(t, 412, r.status, r.text)
	r = e.do("PUT", path, key, map[string]any{"content": "Refunds take 7 days."}, "If-Match", `"2"`)
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, 3, r.num("version"))

	// Delete writes a tombstone; the item is gone, its history stays.
	r = e.do("DELETE", path, key, nil)
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, 4, r.num("version"))
	require.Equal(t, true, r.json["deleted"])
	require.Equal(t, 404, e.do("GET", path, key, nil).status)
	require.Equal(t, 404, e.do("DELETE", path, key, nil).status)
	r = e.do("GET", path+"/versions", key, nil)
	require.Equal(t, 200, r.status)
	require.Len(t, r.list(), 4)
	require.Equal(t, true, r.list()[3]["deleted"])
	r = e.do("GET", path+"/versions/1", key, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, "Refunds", r.json["title"])
	require.Equal(t, 404, e.do("GET", path+"/versions/9", key, nil).status)
	r = e.do("PUT", path, key, map[string]any{"content": "x"}, "If-Match", `"4"`)
	require.Equal(t, 412, r.status, "a tombstoned item does not exist for If-Match")

	// A write after the tombstone brings the item back, even with old content.
	r = e.do("PUT", path, key, map[string]any{"content": "Refunds take 7 days."})
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, 5, r.num("version"))
	require.Equal(t, 200, e.do("GET", path, key, nil).status)

	// Paging the versions.
	r = e.do("GET", path+"/versions?limit=2", key, nil)
	require.Len(t, r.list(), 2)
	next := r.json["next_cursor"].(string)
	r = e.do("GET", path+"/versions?limit=2&cursor="+next, key, nil)
	require.Equal(t, 3, int(r.list()[0]["version"].(float64)))
	r = e.do("GET", path+"/versions?limit=2&cursor="+r.json["next_cursor"].(string), key, nil)
	require.Len(t, r.list(), 1)
	require.Nil(t, r.json["next_cursor"])
}

func TestItemDefaultsAndFields(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	r := e.do("PUT", "/v1/projects/acme/items/a", e.admin, api.PutItemJSONRequestBody{Content: "c"})
	require.Equal(t, 201, r.status, r.text)
	for field, want := range map[string]any{
		"kind": "knowledge", "source": "project", "authority": "evidence", "confidence": "probable",
		"slot": "system", "priority": 0.0, "template": false, "title": "", "state_key": "",
		"trigger": map[string]any{"always": true}, "metadata": map[string]any{},
		"roles": map[string]any{"visible_to": []any{}, "hidden_from": []any{}},
	} {
		require.Equal(t, want, r.json[field], field)
	}

	full := map[string]any{
		"kind": "skill", "source": "other:jira", "title": "T", "summary": "S", "content": "C",
		"priority": 7, "authority": "hypothesis", "confidence": "verified", "state_key": "refunds.window",
		"valid_from": "2026-01-01T00:00:00+02:00", "valid_until": "2027-01-01T00:00:00Z", "slot": "tools",
		"trigger":    map[string]any{"keywords": []any{"refund", "money back"}},
		"roles":      map[string]any{"visible_to": []any{"critic"}, "hidden_from": []any{"planner"}},
		"template":   true,
		"metadata":   map[string]any{"ticket": "JIRA-1", "max_tokens": 5.0, "nested": map[string]any{"a": []any{1.5, "x"}}},
		"provenance": map[string]any{"source_ref": "git:abc", "derived_from": []any{"acme/b@2"}},
	}
	r = e.do("PUT", "/v1/projects/acme/items/b", e.admin, full)
	require.Equal(t, 201, r.status, r.text)
	for field, want := range full {
		if field == "valid_from" {
			want = "2025-12-31T22:00:00Z" // stored and answered in UTC
		}
		if field == "priority" {
			want = 7.0
		}
		require.Equal(t, want, r.json[field], field)
	}
	// The same fields again, keys in another order: unchanged.
	r = e.do("PUT", "/v1/projects/acme/items/b", e.admin, full)
	require.Equal(t, 200, r.status, r.text)
}

func TestItemValidation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	for _, tc := range []struct {
		name    string
		body    any
		status  int
		pointer string
	}{
		{"missing content", map[string]any{"title": "x"}, 422, "/content"},
		{"blank content", map[string]any{"content": "   "}, 422, "/content"},
		{"NUL in content", map[string]any{"content": "a\x00b"}, 422, "/content"},
		{"NUL in metadata", map[string]any{"content": "c", "metadata": map[string]any{"a": "\x00"}}, 422, "/metadata/a"},
		{"NUL in a keyword", map[string]any{"content": "c", "trigger": map[string]any{"keywords": []string{"a\x00"}}}, 422, "/trigger/keywords/0"},
		{"priority out of range", map[string]any{"content": "c", "priority": 1e10}, 422, "/priority"},
		{"bad kind", map[string]any{"content": "c", "kind": "fact"}, 422, "/kind"},
		{"bad source", map[string]any{"content": "c", "source": "internet"}, 422, "/source"},
		{"bad other source", map[string]any{"content": "c", "source": "other:"}, 422, "/source"},
		{"bad authority", map[string]any{"content": "c", "authority": "god"}, 422, "/authority"},
		{"bad confidence", map[string]any{"content": "c", "confidence": "sure"}, 422, "/confidence"},
		{"bad slot", map[string]any{"content": "c", "slot": "user"}, 422, "/slot"},
		{"bad time", map[string]any{"content": "c", "valid_from": "monday"}, 422, "/valid_from"},
		{"window reversed", map[string]any{"content": "c", "valid_from": "2027-01-01T00:00:00Z", "valid_until": "2026-01-01T00:00:00Z"}, 422, "/valid_until"},
		{"two triggers", map[string]any{"content": "c", "trigger": map[string]any{"always": true, "tool": "x"}}, 422, "/trigger"},
		{"no trigger", map[string]any{"content": "c", "trigger": map[string]any{}}, 422, "/trigger"},
		{"always false", map[string]any{"content": "c", "trigger": map[string]any{"always": false}}, 422, "/trigger"},
		{"empty keywords", map[string]any{"content": "c", "trigger": map[string]any{"keywords": []any{}}}, 422, "/trigger/keywords"},
		{"blank keyword", map[string]any{"content": "c", "trigger": map[string]any{"keywords": []any{"a", " "}}}, 422, "/trigger/keywords/1"},
		{"credential key", map[string]any{"content": "c", "metadata": map[string]any{"api_key": "sk-1"}}, 422, "/metadata/api_key"},
		{"nested credential", map[string]any{"content": "c", "metadata": map[string]any{"auth": map[string]any{"accessToken": "x"}}}, 422, "/metadata/auth/accessToken"},
		{"password key", map[string]any{"content": "c", "metadata": map[string]any{"db_password": "x"}}, 422, "/metadata/db_password"},
		{"permissions key", map[string]any{"content": "c", "metadata": map[string]any{"permissions": []any{"x"}}}, 422, "/metadata/permissions"},
		{"metadata not object", map[string]any{"content": "c", "metadata": []any{1}}, 400, "/metadata"},
		{"blank role", map[string]any{"content": "c", "roles": map[string]any{"visible_to": []any{""}}}, 422, "/roles/visible_to/0"},
		{"unknown field", map[string]any{"content": "c", "colour": "red"}, 400, "/colour"},
		{"unknown nested field", map[string]any{"content": "c", "trigger": map[string]any{"sometimes": true}}, 400, ""},
		{"wrong type", map[string]any{"content": "c", "priority": "high"}, 400, "/priority"},
		{"wrong type nested", map[string]any{"content": "c", "roles": map[string]any{"visible_to": "critic"}}, 400, "/roles/visible_to"},
		{"not json", "{content: c}", 400, ""},
		{"two values", `{"content":"c"} {}`, 400, ""},
		{"empty body", "", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("PUT", "/v1/projects/acme/items/k", e.admin, tc.body)
			require.Equal(t, tc.status, r.status, r.text)
			code := map[int]string{400: "malformed", 422: "validation_failed"}[tc.status]
			require.Equal(t, code, r.json["code"], r.text)
			if tc.pointer != "" {
				require.Contains(t, r.pointers(), tc.pointer, r.text)
			}
		})
	}
	// Several problems are reported at once.
	r := e.do("PUT", "/v1/projects/acme/items/k", e.admin, map[string]any{"kind": "x", "slot": "y"})
	require.Equal(t, 422, r.status)
	require.ElementsMatch(t, []string{"/kind", "/slot", "/content"}, r.pointers())
	// A bad key.
	r = e.do("PUT", "/v1/projects/acme/items/"+url.PathEscape("a b"), e.admin, api.PutItemJSONRequestBody{Content: "c"})
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"key"}, r.pointers())
	long := make([]byte, 201)
	for i := range long {
		long[i] = 'a'
	}
	require.Equal(t, 422, e.do("PUT", "/v1/projects/acme/items/"+string(long), e.admin, api.PutItemJSONRequestBody{Content: "c"}).status)
	// Nothing was written by any of it.
	r = e.do("GET", "/v1/projects/acme/items", e.admin, nil)
	require.Empty(t, r.list())
}

func TestBatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	key := e.agent("implementer", auth.Edit, "acme")
	items := func(contents ...string) map[string]any {
		var out []any
		for i, c := range contents {
			out = append(out, map[string]any{"key": fmt.Sprintf("k%d", i), "content": c})
		}
		return map[string]any{"items": out}
	}
	r := e.do("POST", "/v1/projects/acme/items", key, items("a", "b", "c"))
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, 3, r.num("created"))
	r = e.do("POST", "/v1/projects/acme/items", key, items("a", "B", "c", "d"))
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, []int{1, 1, 2}, []int{r.num("created"), r.num("updated"), r.num("unchanged")})
	entries := r.json["items"].([]any)
	require.Equal(t, map[string]any{"key": "k1", "version": 2.0, "status": "updated"}, entries[1])
	require.Equal(t, map[string]any{"key": "k0", "version": 1.0, "status": "unchanged"}, entries[0])
	require.Equal(t, map[string]any{"key": "k3", "version": 1.0, "status": "created"}, entries[3])

	// Any invalid item: 422 with one entry per problem, and nothing written.
	bad := map[string]any{"items": []any{
		map[string]any{"key": "new1", "content": "x"},
		map[string]any{"key": "k0", "content": "changed"},
		map[string]any{"key": "new2", "content": "y", "kind": "nope"},
		map[string]any{"key": "new1", "content": "z"},
		map[string]any{"key": "bad key", "content": ""},
	}}
	r = e.do("POST", "/v1/projects/acme/items", key, bad)
	require.Equal(t, 422, r.status, r.text)
	require.ElementsMatch(t, []string{"/items/2/kind", "/items/3/key", "/items/4/key", "/items/4/content"}, r.pointers())
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/new1", key, nil).status)
	r = e.do("GET", "/v1/projects/acme/items/k0", key, nil)
	require.Equal(t, "a", r.json["content"])

	// A database failure half way also leaves nothing: the second item's
	// content is fine for validation, but the batch is one transaction.
	require.Equal(t, 422, e.do("POST", "/v1/projects/acme/items", key, map[string]any{"items": []any{}}).status)
	many := make([]any, 10001)
	for i := range many {
		many[i] = map[string]any{"key": fmt.Sprintf("m%d", i), "content": "x"}
	}
	r = e.do("POST", "/v1/projects/acme/items", key, map[string]any{"items": many})
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"/items"}, r.pointers())
	require.Equal(t, "too_many", r.json["errors"].([]any)[0].(map[string]any)["code"], "a limit's code, as for every other limit")
}

// TestConcurrentIfMatchOnOneKey: of concurrent writes that all expect
// version 1, exactly one lands, whichever lane or group takes it; the
// others fail their precondition against the version it made.
func TestConcurrentIfMatchOnOneKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	r := e.do("PUT", "/v1/projects/acme/items/hot", e.admin, api.PutItemJSONRequestBody{Content: "first"})
	require.Equal(t, 201, r.status, r.text)
	const n = 8
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() {
			r := e.do("PUT", "/v1/projects/acme/items/hot", e.admin, map[string]any{"content": fmt.Sprintf("writer %d", i)}, "If-Match", `"1"`)
			statuses[i] = r.status
		})
	}
	wg.Wait()
	counts := map[int]int{}
	for _, st := range statuses {
		counts[st]++
	}
	require.Equal(t, map[int]int{201: 1, 412: n - 1}, counts, "a new version is 201")
	r = e.do("GET", "/v1/projects/acme/items/hot", e.admin, nil)
	require.Equal(t, 2, r.num("version"))
}

func TestConcurrentWritesOfOneKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	const n = 12
	var wg sync.WaitGroup
	statuses := make([]int, n)
	versions := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do("PUT", "/v1/projects/acme/items/hot", e.admin, map[string]any{"content": fmt.Sprintf("writer %d", i)})
			statuses[i], versions[i] = r.status, r.num("version")
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	for i := range n {
		require.Equal(t, 201, statuses[i])
		require.False(t, seen[versions[i]], "version %d given twice", versions[i])
		seen[versions[i]] = true
	}
	for v := 1; v <= n; v++ {
		require.True(t, seen[v], "version %d missing", v)
	}
	r := e.do("GET", "/v1/projects/acme/items/hot", e.admin, nil)
	require.Equal(t, n, r.num("version"))
}

func TestConcurrentBatchesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var items []any
			for i := range 50 {
				k := i
				if w%2 == 1 {
					k = 49 - i // the other order
				}
				items = append(items, map[string]any{"key": fmt.Sprintf("k%02d", k), "content": fmt.Sprintf("w%d", w)})
			}
			r := e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": items})
			require.Equal(t, 200, r.status, r.text)
		}()
	}
	wg.Wait()
	r := e.do("GET", "/v1/projects/acme/items/k00/versions", e.admin, nil)
	require.Len(t, r.list(), 6)
}

func TestListItems(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	batch := []any{
		map[string]any{"key": "c", "content": "Refunds are processed in five business days.", "kind": "knowledge"},
		map[string]any{"key": "a", "content": "The deploy pipeline runs on every merge.", "kind": "state", "source": "git"},
		map[string]any{"key": "b", "content": "Refund requests over 500 euros need a manager.", "kind": "instruction", "title": "Refund approval"},
		map[string]any{"key": "d", "content": "Gone soon.", "kind": "state"},
	}
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": batch}).status)
	require.Equal(t, 200, e.do("DELETE", "/v1/projects/acme/items/d", e.admin, nil).status)

	keys := func(r resp) []string {
		var out []string
		for _, it := range r.list() {
			out = append(out, it["key"].(string))
		}
		return out
	}
	r := e.do("GET", "/v1/projects/acme/items", e.admin, nil)
	require.Equal(t, []string{"a", "b", "c"}, keys(r), "by key, tombstones left out")
	require.Equal(t, []string{"a"}, keys(e.do("GET", "/v1/projects/acme/items?kind=state", e.admin, nil)))
	require.Equal(t, []string{"a"}, keys(e.do("GET", "/v1/projects/acme/items?source=git", e.admin, nil)))
	// Full text: stemmed by the english configuration, ranked.
	r = e.do("GET", "/v1/projects/acme/items?q=refund", e.admin, nil)
	require.ElementsMatch(t, []string{"b", "c"}, keys(r))
	require.Equal(t, "b", keys(r)[0], "the title match ranks first")
	r = e.do("GET", "/v1/projects/acme/items?q=refund&limit=1", e.admin, nil)
	require.Equal(t, []string{"b"}, keys(r))
	r = e.do("GET", "/v1/projects/acme/items?q=refund&limit=1&cursor="+r.json["next_cursor"].(string), e.admin, nil)
	require.Equal(t, []string{"c"}, keys(r))
	require.Nil(t, r.json["next_cursor"])
	// Pages by key.
	r = e.do("GET", "/v1/projects/acme/items?limit=2", e.admin, nil)
	require.Equal(t, []string{"a", "b"}, keys(r))
	r = e.do("GET", "/v1/projects/acme/items?limit=2&cursor="+r.json["next_cursor"].(string), e.admin, nil)
	require.Equal(t, []string{"c"}, keys(r))
	require.Nil(t, r.json["next_cursor"])
	// Limits.
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/items?limit=1001", e.admin, nil).status)
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/items?limit=0", e.admin, nil).status)
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items?limit=1000", e.admin, nil).status)
	require.Equal(t, 400, e.do("GET", "/v1/projects/acme/items?limit=ten", e.admin, nil).status)
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/items?cursor=garbage!", e.admin, nil).status)
}

func TestTypeErrorsPointIntoArrays(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	r := e.do("POST", "/v1/projects/acme/items", e.admin, `{"items":[{"key":"a","content":"x"},{"key":"b","content":"y","priority":"high"}]}`)
	require.Equal(t, 400, r.status, r.text)
	require.Equal(t, []string{"/items/1/priority"}, r.pointers())
	r = e.do("POST", "/v1/projects/acme/items", e.admin, `{"items":[{"key":"a","content":"x","trigger":{"keywords":["ok",7]}}]}`)
	require.Equal(t, 400, r.status, r.text)
	require.Equal(t, []string{"/items/0/trigger/keywords/1"}, r.pointers())
	r = e.do("PUT", "/v1/projects/acme/items/k", e.admin, `{"content":"c","roles":{"visible_to":"critic"}}`)
	require.Equal(t, []string{"/roles/visible_to"}, r.pointers())
}

func TestUnknownFieldsArePointedAt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	for body, want := range map[string]string{
		`{"items":[{"key":"a","content":"x"},{"key":"b","content":"x","zzz":1}]}`:       "/items/1/zzz",
		`{"items":[{"key":"a","content":"x","trigger":{"always":true,"sometimes":1}}]}`: "/items/0/trigger/sometimes",
		`{"zzz":1,"items":[]}`: "/zzz",
	} {
		r := e.do("POST", "/v1/projects/acme/items", e.admin, body)
		require.Equal(t, 400, r.status, r.text)
		require.Equal(t, []string{want}, r.pointers(), body)
	}
	r := e.do("PUT", "/v1/projects/acme/items/k", e.admin, []byte("{\"content\":\"\xff\xfe\"}"))
	require.Equal(t, 400, r.status, r.text)
	require.Equal(t, "malformed", r.json["code"])
}

// TestItemConditionalGet: a GET with If-None-Match naming the version it
// would answer is 304 with that ETag and no body (weak tags and "*"
// alike), so a client polling an item reads it again only when it
// changed; a tag of another version or form gets the item. Visibility
// comes first: a hidden item is 404 whatever the header says.
func TestItemConditionalGet(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	path := "/v1/projects/acme/items/policy"
	r := e.do("PUT", path, e.admin, map[string]any{"content": "Refunds within 14 days."})
	require.Equal(t, 201, r.status, r.text)
	first := time.Now()
	for _, h := range []string{`"1"`, `W/"1"`, `*`, `"7", "1"`, ` "1" `} {
		r = e.do("GET", path, e.admin, nil, "If-None-Match", h)
		require.Equal(t, 304, r.status, "If-None-Match %s: %s", h, r.text)
		require.Equal(t, `"1"`, r.header.Get("ETag"))
		require.Empty(t, r.header.Get("Content-Type"), "no body")
	}
	for _, h := range []string{`"2"`, `abc`, `"x"`, `""`, `"01"`, `"+1"`} {
		r = e.do("GET", path, e.admin, nil, "If-None-Match", h)
		require.Equal(t, 200, r.status, "If-None-Match %s", h)
		require.Equal(t, "Refunds within 14 days.", r.json["content"])
	}
	r = e.do("PUT", path, e.admin, map[string]any{"content": "Refunds within 30 days."})
	require.Equal(t, 201, r.status, r.text)
	r = e.do("GET", path, e.admin, nil, "If-None-Match", `"1"`)
	require.Equal(t, 200, r.status, "changed since version 1")
	require.Equal(t, `"2"`, r.header.Get("ETag"))
	require.Equal(t, "Refunds within 30 days.", r.json["content"])
	// As of a time, the version of that time is the one compared.
	asOf := url.QueryEscape(first.UTC().Format(time.RFC3339Nano))
	require.Equal(t, 304, e.do("GET", path+"?as_of="+asOf, e.admin, nil, "If-None-Match", `"1"`).status)
	require.Equal(t, 200, e.do("GET", path+"?as_of="+asOf, e.admin, nil, "If-None-Match", `"2"`).status)

	// Hidden from a role: not found, even for "*".
	r = e.do("PUT", "/v1/projects/acme/items/rubric", e.admin, map[string]any{"content": "x", "roles": map[string]any{"visible_to": []string{"critic"}}})
	require.Equal(t, 201, r.status, r.text)
	planner := e.agent("planner", auth.ReadOnly, "acme")
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/rubric", planner, nil, "If-None-Match", "*").status)
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/missing", e.admin, nil, "If-None-Match", "*").status)
}

// TestDotKeysAreRefused: "." and ".." match the key pattern but no client
// can address them (URL libraries remove dot segments), so a write of one
// is refused, in a PUT and in a batch; keys with dots in them are fine.
func TestDotKeysAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	for _, k := range []string{".", ".."} {
		r := e.do("PUT", "/v1/projects/acme/items/"+k, e.admin, api.PutItemJSONRequestBody{Content: "x"})
		require.Equal(t, 422, r.status, "%s: %s", k, r.text)
		require.Contains(t, r.text, `not \".\" or \"..\"`)
		r = e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": []any{map[string]any{"key": "ok", "content": "x"}, map[string]any{"key": k, "content": "x"}}})
		require.Equal(t, 422, r.status, "%s: %s", k, r.text)
		require.Equal(t, []string{"/items/1/key"}, r.pointers())
	}
	for _, k := range []string{".a", "a.", "...", "a..b"} {
		require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/"+k, e.admin, api.PutItemJSONRequestBody{Content: "x"}).status, k)
		require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items/"+k, e.admin, nil).status, k)
	}
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/ok", e.admin, nil).status, "the refused batch wrote nothing")
}
