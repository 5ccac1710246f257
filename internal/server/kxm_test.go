package server_test

import (
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestItemAsKXMContextItem: GET .../items/{key}?format=kxm answers KXM's
// ContextItem, exactly its members, mapped as docs/formats.md says.
func TestItemAsKXMContextItem(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	long := strings.Repeat("é", 4100)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/d1", e.admin, map[string]any{
		"content": long, "kind": "decision", "source": "project", "authority": "instruction", "confidence": "verified",
		"state_key": "refund.window", "valid_from": "2026-01-01T00:00:00Z",
		"metadata":   map[string]any{"kxm": map[string]any{"observedAt": "2025-12-31T10:00:00Z", "supersedes": []string{"old-1"}}},
		"provenance": map[string]any{"derived_from": []string{"src-1"}},
	}).status)
	r := e.do("GET", "/v1/projects/acme/items/d1?format=kxm", e.admin, nil)
	require.Equal(t, 200, r.status, r.text)
	var members []string
	for k := range r.json {
		members = append(members, k)
	}
	sort.Strings(members)
	require.Equal(t, []string{"authority", "confidence", "id", "kind", "observedAt", "project", "provenance", "stateKey", "status", "summary", "supersedes", "validFrom"}, members)
	require.Equal(t, "d1", r.json["id"])
	require.Equal(t, "knowledge", r.json["kind"], "decision is knowledge in KXM")
	require.Equal(t, "acme", r.json["project"])
	require.Equal(t, 4000, utf8.RuneCountInString(r.json["summary"].(string)), "cut at 4,000 characters")
	require.Equal(t, map[string]any{"sourceType": "derived", "sourceRef": "contextd:acme/d1@v1", "derivedFrom": []any{"src-1"}}, r.json["provenance"])
	require.Equal(t, "evidence", r.json["authority"], "KXM's floor for derived content")
	require.Equal(t, "verified", r.json["confidence"])
	require.Equal(t, "refund.window", r.json["stateKey"])
	require.Equal(t, "current", r.json["status"])
	require.Equal(t, "2025-12-31T10:00:00Z", r.json["observedAt"])
	require.Equal(t, `"1"`, r.header.Get("ETag"))

	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/h1", e.admin, map[string]any{"content": "A person's rule.", "kind": "tool", "source": "steering", "authority": "policy"}).status)
	h := e.do("GET", "/v1/projects/acme/items/h1?format=kxm", e.admin, nil)
	require.Equal(t, "skill", h.json["kind"])
	require.Equal(t, "human", h.json["provenance"].(map[string]any)["sourceType"])
	require.Equal(t, "policy", h.json["authority"])
	require.NotContains(t, h.json, "stateKey")

	require.Equal(t, "d1", e.do("GET", "/v1/projects/acme/items/d1?format=contextd", e.admin, nil).json["key"])
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/items/d1?format=yaml", e.admin, nil).status)
}
