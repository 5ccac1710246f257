package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

// TestAgentsOverTheAPI: agents create, list, update and revoke through a
// running server with an admin key, by id or by name; a key that is not
// an admin's is refused, readably.
func TestAgentsOverTheAPI(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	r.project = ""
	require.Equal(t, 201, put(t, r.base+"/v1/projects/acme", r.key, `{}`))
	o, _ := r.ok("agents", "create", "--name", "impl-1", "--role", "implementer", "--permission", "edit", "--projects", "acme")
	m := regexp.MustCompile(`^agent (agt_\S+) \(impl-1, role implementer, edit on acme, authority up to instruction\)\nkey \(shown once\): (ctxd_\S+)\n$`).FindStringSubmatch(o)
	require.NotNil(t, m, o)
	implID, implKey := m[1], m[2]
	status, body := get(t, r.base+"/v1/projects/acme/items", implKey)
	require.Equal(t, 200, status, "the new key works: %s", body)

	o, _ = r.ok("agents", "create", "--name", "critic-1", "--role", "critic", "--permission", "read-only", "--projects", "acme", "--max-authority", "evidence", "--json")
	var made struct {
		ID, Key      string
		MaxAuthority string `json:"max_authority"`
	}
	require.NoError(t, json.Unmarshal([]byte(o), &made), o)
	require.Equal(t, "evidence", made.MaxAuthority)
	require.True(t, strings.HasPrefix(made.Key, "ctxd_"))
	require.Contains(t, r.fail("agents", "create", "--name", "x", "--role", "r", "--permission", "root", "--projects", "acme"), "422 validation_failed")

	o, _ = r.ok("agents", "list")
	require.Regexp(t, `^ID\s+NAME\s+ROLE\s+PERMISSION\s+PROJECTS\s+MAX AUTHORITY\s+REVOKED\n`, o)
	require.Regexp(t, `(?m)^`+implID+`\s+impl-1\s+implementer\s+edit\s+acme\s+instruction\s+-$`, o)
	o, _ = r.ok("agents", "list", "--json")
	var list struct{ Data []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(o), &list), o)
	require.Len(t, list.Data, 3, "the first admin and two")

	o, _ = r.ok("agents", "update", "impl-1", "--projects", "acme,globex", "--max-authority", "evidence")
	require.Equal(t, "agent "+implID+" (impl-1, role implementer, edit on acme,globex, authority up to evidence)\n", o)
	require.Contains(t, r.fail("agents", "update", "impl-1"), "nothing to change")
	require.Contains(t, r.fail("agents", "update", "nobody", "--role", "x"), `no agent named "nobody"`)

	// Only an admin manages agents: the implementer's key is refused.
	_, e, code := run(t, "agents", "list", "--url", r.base, "--key", implKey)
	require.Equal(t, 1, code)
	require.Contains(t, e, "contextd: 403 forbidden")
	_, e, code = run(t, "agents", "revoke", made.ID, "--url", r.base, "--key", implKey)
	require.Equal(t, 1, code)
	require.Contains(t, e, "403 forbidden")

	o, _ = r.ok("agents", "revoke", "impl-1")
	require.Regexp(t, `^agent `+implID+` \(impl-1, .*, revoked \S+\)\n$`, o)
	status, _ = get(t, r.base+"/v1/projects/acme/items", implKey)
	require.Equal(t, 401, status, "the revoked key is refused")
	require.Contains(t, r.fail("agents", "revoke", "impl-1"), `no agent named "impl-1"`, "names only agents not revoked")

	r.ok("agents", "create", "--name", "dup", "--role", "r", "--projects", "acme")
	r.ok("agents", "create", "--name", "dup", "--role", "r", "--projects", "acme")
	require.Contains(t, r.fail("agents", "revoke", "dup"), `2 agents are named "dup": give the id`)
}

// TestAgentsCreateChoosesTheDatabaseOrTheAPI: agents create writes to the
// database when DATABASE_URL is set and no server is named, and asks the
// server named by --url or CONTEXTD_URL otherwise.
func TestAgentsCreateChoosesTheDatabaseOrTheAPI(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.NewURL(t))
	o, e, code := run(t, "agents", "create", "--name", "root", "--role", "admin", "--permission", "admin", "--projects", "*")
	require.Equal(t, 0, code, e)
	require.Regexp(t, `^agent agt_\S+ \(root, role admin, admin on \*, authority up to policy\)\nkey \(shown once\): ctxd_\S+\n$`, o)
	require.Contains(t, e, "the agent's entry is not sealed", "written in the database, without an audit key")

	_, e, code = run(t, "agents", "create", "--name", "x", "--role", "r", "--projects", "a", "--url", "http://127.0.0.1:1", "--key", "ctxd_x")
	require.Equal(t, 1, code)
	require.Contains(t, e, "no server answers there", "--url names a server: the API")
	t.Setenv("CONTEXTD_URL", "http://127.0.0.1:1")
	t.Setenv("CONTEXTD_KEY", "ctxd_x")
	_, e, code = run(t, "agents", "create", "--name", "x", "--role", "r", "--projects", "a")
	require.Equal(t, 1, code)
	require.Contains(t, e, "no server answers there", "so does CONTEXTD_URL")
}
