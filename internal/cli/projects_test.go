package cli

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProjectsCommands: projects create, list, show, archive and restore
// through a running server. An archived project leaves the list and
// refuses writes and packets (410 gone) until it is restored; a key that
// is not an admin's cannot archive.
func TestProjectsCommands(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	r.project = ""
	o, _ := r.ok("projects", "create", "acme", "--description", "Support desk")
	require.Equal(t, "project acme created\n", o)
	o, _ = r.ok("projects", "create", "acme")
	require.Equal(t, "project acme exists; left as it is\n", o)
	o, _ = r.ok("projects", "show", "acme")
	require.Contains(t, o, "description  Support desk\n", "a create without --description keeps the one it had")
	o, _ = r.ok("projects", "create", "acme", "--description", "Support desk of ACME")
	require.Equal(t, "project acme updated\n", o)
	r.ok("projects", "create", "globex")

	o, _ = r.ok("projects", "list")
	require.Regexp(t, `^PROJECT\s+CREATED\s+DESCRIPTION\n`, o)
	require.Regexp(t, `(?m)^_shared\s+\S+\s+`, o)
	require.Regexp(t, `(?m)^acme\s+\S+\s+Support desk of ACME$`, o)
	require.Regexp(t, `(?m)^globex\s+\S+\s*$`, o)
	o, _ = r.ok("projects", "show", "acme", "--json")
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(o), &p), o)
	require.Equal(t, "Support desk of ACME", p["description"])
	require.Nil(t, p["archived_at"])

	// Only an admin archives: an editor of acme is refused.
	o, _ = r.ok("agents", "create", "--name", "ed", "--role", "implementer", "--permission", "edit", "--projects", "acme")
	editorKey := regexp.MustCompile(`key \(shown once\): (ctxd_\S+)`).FindStringSubmatch(o)[1]
	_, e, code := run(t, "projects", "archive", "acme", "--url", r.base, "--key", editorKey)
	require.Equal(t, 1, code)
	require.Contains(t, e, "contextd: 403 forbidden")

	r.project = "acme"
	r.ok("items", "put", "tone", "Answer kindly.")
	_, e = r.ok("packets", "assemble", "--role", "implementer")
	packetID := regexp.MustCompile(`packet (ctxpkt_\S+):`).FindStringSubmatch(e)[1]
	r.project = ""

	o, _ = r.ok("projects", "archive", "acme")
	require.Equal(t, "project acme archived; contextd projects restore acme brings it back\n", o)
	o, _ = r.ok("projects", "list")
	require.NotRegexp(t, `(?m)^acme\s`, o, "hidden from the list")
	o, _ = r.ok("projects", "list", "--archived")
	require.Regexp(t, `(?m)^acme\s`, o, "listed with --archived")
	require.NotRegexp(t, `(?m)^globex\s`, o, "--archived lists only the archived")
	o, _ = r.ok("why", packetID, "tone")
	require.Contains(t, o, "INCLUDED", "the history of an archived project is found without --project")
	o, _ = r.ok("projects", "show", "acme")
	require.Regexp(t, `(?m)^archived     \S+ by agt_\S+ \(writes and packets answer 410 gone; contextd projects restore acme\)$`, o)
	r.project = "acme"
	require.Contains(t, r.fail("items", "put", "k", "x"), "contextd: 410 gone")
	require.Contains(t, r.fail("packets", "assemble", "--role", "implementer"), "contextd: 410 gone")
	r.project = ""
	require.Contains(t, r.fail("projects", "create", "acme"), "project acme is archived: contextd projects restore acme brings it back")
	require.Contains(t, r.fail("projects", "archive", "_shared"), "422")

	o, _ = r.ok("projects", "restore", "acme")
	require.Equal(t, "project acme restored\n", o)
	require.Contains(t, r.fail("projects", "restore", "acme"), "409", "it is not archived")
	o, _ = r.ok("projects", "list")
	require.Regexp(t, `(?m)^acme\s+\S+\s+Support desk of ACME$`, o)
	r.project = "acme"
	r.ok("items", "put", "k", "x")
	r.project = ""
	require.Contains(t, r.fail("projects", "show", "nowhere"), "contextd: 404 not_found")
}
