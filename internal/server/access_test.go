package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	path := "/v1/projects/acme/items"
	require.Equal(t, 200, e.do("GET", path, e.admin, nil).status)

	r := e.do("GET", path, "", nil)
	require.Equal(t, 401, r.status)
	require.Equal(t, "unauthenticated", r.json["code"])
	require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")

	// One changed character breaks the checksum.
	last := e.admin[len(e.admin)-1]
	swap := byte('A')
	if last == 'A' {
		swap = 'B'
	}
	require.Equal(t, 401, e.do("GET", path, e.admin[:len(e.admin)-1]+string(swap), nil).status)
	require.Equal(t, 401, e.do("GET", path, "not-a-key", nil).status)
	// Well formed but unknown.
	require.Equal(t, 401, e.do("GET", path, auth.NewKey(), nil).status)
	// Basic auth is not a bearer key.
	r = e.do("GET", path, "", nil, "Authorization", "Basic "+e.admin)
	require.Equal(t, 401, r.status)

	// Two Authorization headers: which one is the request's is not guessed.
	req, err := http.NewRequest("GET", e.url+path, nil)
	require.NoError(t, err)
	req.Header.Add("Authorization", "Bearer "+e.admin)
	req.Header.Add("Authorization", "Bearer "+auth.NewKey())
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, 400, res.StatusCode, string(body))
	require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
	require.Contains(t, string(body), `"code":"malformed"`)

	// Health, readiness and the contract need no key.
	require.Equal(t, 200, e.do("GET", "/healthz", "", nil).status)
	require.Equal(t, 200, e.do("GET", "/readyz", "", nil).status)
	r = e.do("GET", "/openapi.yaml", "", nil)
	require.Equal(t, 200, r.status)
	require.True(t, strings.HasPrefix(r.text, "openapi: 3"))
	// Unknown routes are problems too.
	r = e.do("GET", "/v1/nothing", e.admin, nil)
	require.Equal(t, 404, r.status)
	require.Equal(t, "not_found", r.json["code"])
}

func TestAgentsAPIAndRevocation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	r := e.do("POST", "/v1/agents", e.admin, map[string]any{"name": "rev", "role": "reviewer", "permission": "read-only", "projects": []string{"acme"}})
	require.Equal(t, 201, r.status, r.text)
	key := r.json["key"].(string)
	id := r.json["id"].(string)
	require.True(t, strings.HasPrefix(key, "ctxd_"))
	require.True(t, strings.HasPrefix(id, "agt_"))
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items", key, nil).status)

	r = e.do("GET", "/v1/agents", e.admin, nil)
	require.Equal(t, 200, r.status)
	require.Len(t, r.list(), 2)
	require.NotContains(t, r.text, key, "keys are never shown again")
	require.NotContains(t, r.text, "key_sha256")

	// Only admins manage agents.
	require.Equal(t, 403, e.do("GET", "/v1/agents", key, nil).status)
	require.Equal(t, 403, e.do("POST", "/v1/agents", key, map[string]any{"name": "x", "role": "x", "permission": "admin", "projects": []string{"*"}}).status)
	require.Equal(t, 403, e.do("DELETE", "/v1/agents/"+id, key, nil).status)

	r = e.do("POST", "/v1/agents", e.admin, map[string]any{"name": "", "role": "r", "permission": "root", "projects": []string{}})
	require.Equal(t, 422, r.status)
	require.ElementsMatch(t, []string{"/name", "/permission", "/projects"}, r.pointers())

	// Revocation is at once.
	r = e.do("DELETE", "/v1/agents/"+id, e.admin, nil)
	require.Equal(t, 200, r.status, r.text)
	require.NotEmpty(t, r.json["revoked_at"])
	require.Equal(t, 401, e.do("GET", "/v1/projects/acme/items", key, nil).status)
	r = e.do("DELETE", "/v1/agents/agt_nobody", e.admin, nil)
	require.Equal(t, 404, r.status)
	require.Equal(t, "not_found", r.json["code"])
	require.Contains(t, r.json["detail"], "there is no agent agt_nobody")
	require.NotContains(t, r.json["detail"], "no rows", "the store's words stay inside")
	r = e.do("PATCH", "/v1/agents/agt_nobody", e.admin, map[string]any{"name": "x"})
	require.Equal(t, 404, r.status)
	require.Equal(t, "not_found", r.json["code"])
	require.Contains(t, r.json["detail"], "there is no agent agt_nobody")
	require.NotContains(t, r.json["detail"], "no rows", "the store's words stay inside")
}

func TestScopeAndPermissions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	e.project("globex")
	reader := e.agent("reviewer", auth.ReadOnly, "acme")
	editor := e.agent("implementer", auth.Edit, "acme")
	everywhere := e.agent("planner", auth.Edit, "*")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/x", editor, api.PutItemJSONRequestBody{Content: "c"}).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/globex/items/x", e.admin, api.PutItemJSONRequestBody{Content: "g"}).status)

	// Read-only reads, and may not write.
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items/x", reader, nil).status)
	r := e.do("PUT", "/v1/projects/acme/items/x", reader, api.PutItemJSONRequestBody{Content: "d"})
	require.Equal(t, 403, r.status)
	require.Equal(t, "forbidden", r.json["code"])
	require.Equal(t, 403, e.do("DELETE", "/v1/projects/acme/items/x", reader, nil).status)
	require.Equal(t, 403, e.do("POST", "/v1/projects/acme/items", reader, map[string]any{"items": []any{map[string]any{"key": "y", "content": "c"}}}).status)

	// Out of scope is 404 — the same answer as a project that does not exist —
	// and scope is checked before permission.
	for _, path := range []string{"/v1/projects/globex/items/x", "/v1/projects/globex/items", "/v1/projects/nowhere/items/x"} {
		r = e.do("GET", path, editor, nil)
		require.Equal(t, 404, r.status, path)
		require.Equal(t, "not_found", r.json["code"])
	}
	require.Equal(t, 404, e.do("PUT", "/v1/projects/globex/items/x", reader, api.PutItemJSONRequestBody{Content: "d"}).status)
	require.Equal(t, 404, e.do("PUT", "/v1/projects/nowhere/items/x", e.admin, api.PutItemJSONRequestBody{Content: "d"}).status)
	require.Equal(t, 200, e.do("GET", "/v1/projects/globex/items/x", everywhere, nil).status)

	// _shared: everybody reads it, only admins write it.
	require.Equal(t, 201, e.do("PUT", "/v1/projects/_shared/items/style", e.admin, api.PutItemJSONRequestBody{Content: "Be brief."}).status)
	require.Equal(t, 200, e.do("GET", "/v1/projects/_shared/items/style", reader, nil).status)
	require.Equal(t, 403, e.do("PUT", "/v1/projects/_shared/items/style", editor, api.PutItemJSONRequestBody{Content: "Be long."}).status)
	require.Equal(t, 403, e.do("PUT", "/v1/projects/_shared/items/style", everywhere, api.PutItemJSONRequestBody{Content: "Be long."}).status)

	// Projects: admins create; everyone lists what they may see.
	require.Equal(t, 403, e.do("PUT", "/v1/projects/acme", editor, nil).status, "in scope: forbidden")
	require.Equal(t, 404, e.do("PUT", "/v1/projects/initech", editor, nil).status, "out of scope: as if it did not exist")
	r = e.do("PUT", "/v1/projects/initech", e.admin, nil)
	require.Equal(t, 201, r.status, r.text)
	r = e.do("PUT", "/v1/projects/initech", e.admin, api.PutProjectJSONRequestBody{Description: ptr("changed")})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, "changed", r.json["description"])
	require.Equal(t, 422, e.do("PUT", "/v1/projects/_shared", e.admin, nil).status)
	require.Equal(t, 422, e.do("PUT", "/v1/projects/_mine", e.admin, nil).status)
	names := func(r resp) []string {
		var out []string
		for _, p := range r.list() {
			out = append(out, p["project"].(string))
		}
		return out
	}
	require.Equal(t, []string{"_shared", "acme"}, names(e.do("GET", "/v1/projects", reader, nil)))
	require.Equal(t, []string{"_shared", "acme", "globex", "initech"}, names(e.do("GET", "/v1/projects", everywhere, nil)))
	r = e.do("GET", "/v1/projects?limit=2", e.admin, nil)
	require.Equal(t, []string{"_shared", "acme"}, names(r))
	r = e.do("GET", "/v1/projects?limit=2&cursor="+r.json["next_cursor"].(string), e.admin, nil)
	require.Equal(t, []string{"globex", "initech"}, names(r))
}

func TestRolesOnItemEndpoints(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	critic := e.agent("critic", auth.Edit, "acme")
	implementer := e.agent("implementer", auth.Edit, "acme")
	body := map[string]any{"content": "Rubric: reject patches without tests.", "roles": map[string]any{"visible_to": []string{"critic"}}}
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/rubric", critic, body).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/notes", e.admin, map[string]any{
		"content": "Rubric notes for everyone but the implementer.", "roles": map[string]any{"hidden_from": []string{"implementer"}},
	}).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/open", e.admin, api.PutItemJSONRequestBody{Content: "Rubric for all."}).status)

	keys := func(r resp) []string {
		var out []string
		for _, it := range r.list() {
			out = append(out, it["key"].(string))
		}
		return out
	}
	// For the implementer the hidden items do not exist, on every endpoint.
	for _, p := range []string{"rubric", "notes"} {
		base := "/v1/projects/acme/items/" + p
		require.Equal(t, 404, e.do("GET", base, implementer, nil).status)
		require.Equal(t, 404, e.do("GET", base+"/versions", implementer, nil).status)
		require.Equal(t, 404, e.do("GET", base+"/versions/1", implementer, nil).status)
		require.Equal(t, 404, e.do("PUT", base, implementer, map[string]any{"content": "overwritten"}).status)
		require.Equal(t, 404, e.do("DELETE", base, implementer, nil).status)
	}
	r := e.do("POST", "/v1/projects/acme/items", implementer, map[string]any{"items": []any{map[string]any{"key": "rubric", "content": "poison"}}})
	require.Equal(t, 404, r.status)
	require.Equal(t, []string{"open"}, keys(e.do("GET", "/v1/projects/acme/items", implementer, nil)))
	require.Equal(t, []string{"open"}, keys(e.do("GET", "/v1/projects/acme/items?q=rubric", implementer, nil)))
	// The critic and the admin see theirs.
	require.Equal(t, []string{"notes", "open", "rubric"}, keys(e.do("GET", "/v1/projects/acme/items", critic, nil)))
	require.Equal(t, []string{"notes", "open", "rubric"}, keys(e.do("GET", "/v1/projects/acme/items", e.admin, nil)))
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items/rubric", critic, nil).status)
	// Nothing the implementer tried was written.
	r = e.do("GET", "/v1/projects/acme/items/rubric/versions", e.admin, nil)
	require.Len(t, r.list(), 1)
	// A tombstone keeps the roles: the history stays hidden.
	require.Equal(t, 200, e.do("DELETE", "/v1/projects/acme/items/rubric", critic, nil).status)
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/rubric/versions", implementer, nil).status)
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items/rubric/versions", critic, nil).status)
}

func TestHistoryIsAppendOnlyInTheDatabase(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/x", e.admin, api.PutItemJSONRequestBody{Content: "c"}).status)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, "UPDATE item_versions SET content = 'forged'")
	require.ErrorContains(t, err, "append-only")
	_, err = e.pool.Exec(ctx, "DELETE FROM item_versions")
	require.ErrorContains(t, err, "append-only")
	_, err = e.pool.Exec(ctx, "TRUNCATE item_versions CASCADE")
	require.ErrorContains(t, err, "append-only")
	r := e.do("GET", "/v1/projects/acme/items/x", e.admin, nil)
	require.Equal(t, "c", r.json["content"])
}
