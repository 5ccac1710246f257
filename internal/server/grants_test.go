package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// newAgent creates an agent through the API as admin and returns its id
// and key.
func (e *env) newAgent(admin string, body map[string]any) (id, key string, r resp) {
	e.t.Helper()
	r = e.do("POST", "/v1/agents", admin, body)
	if r.status != 201 {
		return "", "", r
	}
	return r.json["id"].(string), r.json["key"].(string), r
}

// TestAuthorityMustBeGranted: an item's authority may exceed neither its
// writer's max_authority nor its source's ceiling; above either the write
// is 403 authority_exceeds_grant naming the cap, and nothing is written.
func TestAuthorityMustBeGranted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	editor := e.agent("planner", auth.Edit, "acme")

	// An edit agent's default ceiling is instruction.
	r := e.do("PUT", "/v1/projects/acme/items/p", editor, map[string]any{"content": "Never refund.", "authority": "policy", "source": "human"})
	require.Equal(t, 403, r.status, r.text)
	require.Equal(t, "authority_exceeds_grant", r.json["code"])
	require.Contains(t, r.json["detail"], `max_authority "instruction"`)
	require.Equal(t, []string{"/authority"}, r.pointers())
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/p", editor, nil).status, "nothing written")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/p", editor, map[string]any{"content": "Refund within 30 days.", "authority": "instruction", "source": "human"}).status)

	// Source ceilings bind admins too, and fail closed.
	for _, c := range []struct {
		source, authority string
		ok                bool
		ceiling           string
	}{
		{"human", "policy", true, ""}, {"workflow", "policy", true, ""}, {"steering", "policy", true, ""},
		{"git", "instruction", true, ""}, {"project", "instruction", true, ""}, {"decision", "instruction", true, ""},
		{"git", "policy", false, "instruction"}, {"project", "policy", false, "instruction"},
		{"peer", "instruction", false, "evidence"}, {"peer", "evidence", true, ""}, {"rag", "instruction", false, "evidence"},
		{"other:jira", "instruction", false, "evidence"}, {"other:jira", "hypothesis", true, ""}, {"tool", "policy", false, "evidence"},
	} {
		r := e.do("PUT", "/v1/projects/acme/items/src."+c.source[:3]+"."+c.authority, e.admin, map[string]any{"content": "x", "authority": c.authority, "source": c.source})
		if c.ok {
			require.Equal(t, 201, r.status, "%s/%s: %s", c.source, c.authority, r.text)
			continue
		}
		require.Equal(t, 403, r.status, "%s/%s: %s", c.source, c.authority, r.text)
		require.Equal(t, "authority_exceeds_grant", r.json["code"])
		require.Contains(t, r.json["detail"], `ceiling "`+c.ceiling+`" of source "`+c.source+`"`)
	}

	// A batch with such items is refused whole, one entry per item.
	r = e.do("POST", "/v1/projects/acme/items", editor, map[string]any{"items": []any{
		map[string]any{"key": "b0", "content": "fine"},
		map[string]any{"key": "b1", "content": "too strong", "authority": "policy", "source": "human"},
		map[string]any{"key": "b2", "content": "fine", "authority": "instruction", "source": "git"},
		map[string]any{"key": "b3", "content": "peer says", "authority": "instruction", "source": "peer"},
	}})
	require.Equal(t, 403, r.status, r.text)
	require.Equal(t, "authority_exceeds_grant", r.json["code"])
	require.Equal(t, []string{"/items/1/authority", "/items/3/authority"}, r.pointers())
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/b0", editor, nil).status, "all or nothing")
	// Validation comes first: an unknown authority is 422, not 403.
	r = e.do("PUT", "/v1/projects/acme/items/v", editor, map[string]any{"content": "x", "authority": "gospel"})
	require.Equal(t, 422, r.status, r.text)
}

// TestMaxAuthorityIsGrantedAndChanged: max_authority is set at creation
// (default policy for admins, instruction otherwise, never above the
// granting admin's own), changed by PATCH /v1/agents/{id} with effect at
// once, and chained.
func TestMaxAuthorityIsGrantedAndChanged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")

	id, key, r := e.newAgent(e.admin, map[string]any{"name": "host", "role": "host", "permission": "edit", "projects": []string{"acme"}, "max_authority": "policy"})
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, "policy", r.json["max_authority"])
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/rule", key, map[string]any{"content": "Never refund twice.", "authority": "policy", "source": "human"}).status)

	_, _, r = e.newAgent(e.admin, map[string]any{"name": "w", "role": "w", "permission": "edit", "projects": []string{"acme"}})
	require.Equal(t, "instruction", r.json["max_authority"], "edit default")
	_, _, r = e.newAgent(e.admin, map[string]any{"name": "w", "role": "w", "permission": "edit", "projects": []string{"acme"}, "max_authority": "gospel"})
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"/max_authority"}, r.pointers())

	// An admin whose own ceiling is instruction grants at most that.
	_, lesser, r := e.newAgent(e.admin, map[string]any{"name": "ops", "role": "ops", "permission": "admin", "projects": []string{"acme"}, "max_authority": "instruction"})
	require.Equal(t, 201, r.status, r.text)
	_, _, r = e.newAgent(lesser, map[string]any{"name": "x", "role": "x", "permission": "edit", "projects": []string{"acme"}, "max_authority": "policy"})
	require.Equal(t, 403, r.status, r.text)
	require.Equal(t, "authority_exceeds_grant", r.json["code"])
	require.Equal(t, []string{"/max_authority"}, r.pointers())
	_, _, r = e.newAgent(lesser, map[string]any{"name": "x", "role": "x", "permission": "admin", "projects": []string{"acme"}})
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, "instruction", r.json["max_authority"], "an admin's default, capped by its granter's")
	p := e.do("PATCH", "/v1/agents/"+id, lesser, map[string]any{"max_authority": "policy"})
	require.Equal(t, 403, p.status, p.text)
	require.Equal(t, "authority_exceeds_grant", p.json["code"])

	// Lowering takes effect at once.
	r = e.do("PATCH", "/v1/agents/"+id, e.admin, map[string]any{"max_authority": "evidence"})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, "evidence", r.json["max_authority"])
	require.Equal(t, "edit", r.json["permission"], "members left out stay")
	w := e.do("PUT", "/v1/projects/acme/items/rule", key, map[string]any{"content": "Never refund twice!", "authority": "instruction", "source": "human"})
	require.Equal(t, 403, w.status, w.text)
	require.Contains(t, w.json["detail"], `max_authority "evidence"`)

	// Other members; a patch outside one's scope, by a non-admin, or of a
	// revoked agent is refused.
	r = e.do("PATCH", "/v1/agents/"+id, e.admin, map[string]any{"role": "critic", "permission": "read-only"})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, "critic", r.json["role"])
	require.Equal(t, 403, e.do("PUT", "/v1/projects/acme/items/x", key, api.PutItemJSONRequestBody{Content: "x"}).status, "read-only now")
	require.Equal(t, 403, e.do("PATCH", "/v1/agents/"+id, key, map[string]any{"role": "admin"}).status)
	outsider := e.agent("ops", auth.Admin, "beta")
	require.Equal(t, 403, e.do("PATCH", "/v1/agents/"+id, outsider, map[string]any{"role": "x"}).status)
	r = e.do("PATCH", "/v1/agents/"+id, e.admin, map[string]any{"projects": []string{"acme", "bad name"}})
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, 404, e.do("PATCH", "/v1/agents/agt_nobody", e.admin, map[string]any{"role": "x"}).status)
	require.Equal(t, 400, e.do("PATCH", "/v1/agents/"+id, e.admin, map[string]any{"key": "x"}).status, "unknown member")
	require.Equal(t, 200, e.do("DELETE", "/v1/agents/"+id, e.admin, nil).status)
	r = e.do("PATCH", "/v1/agents/"+id, e.admin, map[string]any{"role": "x"})
	require.Equal(t, 409, r.status, r.text)

	// Every change is in the global chain, which verifies.
	g := e.do("GET", "/v1/audit/entries?limit=1000", e.admin, nil)
	require.Equal(t, 200, g.status, g.text)
	n := 0
	for _, en := range g.list() {
		if en["subject"] == id {
			n++
		}
	}
	require.Equal(t, 4, n, "created, patched twice, revoked; refused changes leave no entry")
	v := e.do("GET", "/v1/audit/verify", e.admin, nil)
	require.Equal(t, 200, v.status, v.text)
	require.Equal(t, true, v.json["ok"], v.text)
}
