package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

// remote is a running server and a way to run client commands against it
// as its first admin, in project acme.
type remote struct {
	t         *testing.T
	base, key string
	// project is given to every command ("" for commands of no project).
	project string
}

func newRemote(t *testing.T) *remote {
	t.Helper()
	base, out, stop := serve(t, "--database-url", pgtest.NewURL(t))
	t.Cleanup(func() { stop() })
	key := keyRE.FindString(out.String())
	require.NotEmpty(t, key, out.String())
	return &remote{t: t, base: base, key: key, project: "acme"}
}

// ok runs a command that must succeed: its stdout and
// stderr.
func (r *remote) ok(args ...string) (string, string) {
	r.t.Helper()
	o, e, code := r.run(args...)
	require.Equal(r.t, 0, code, "%v:\n%s%s", args, o, e)
	return o, e
}

// fail runs a command that must fail: its stderr.
func (r *remote) fail(args ...string) string {
	r.t.Helper()
	o, e, code := r.run(args...)
	require.Equal(r.t, 1, code, "%v must fail:\n%s%s", args, o, e)
	require.True(r.t, strings.HasPrefix(e, "contextd: "), e)
	return e
}

func (r *remote) run(args ...string) (string, string, int) {
	r.t.Helper()
	args = append(args, "--url", r.base, "--key", r.key)
	if r.project != "" {
		args = append(args, "--project", r.project)
	}
	return run(r.t, args...)
}

// TestItemsAndPacketsReadable: the daily jobs on items and packets against
// a running server, readable by default and the API's JSON with --json:
// items put (flags), get, list, delete, versions; packets assemble (the
// prompt on stdout, its id on stderr), why, attribute, records, replay;
// and errors that say what went wrong, with exit status 1.
func TestItemsAndPacketsReadable(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	require.Equal(t, 201, put(t, r.base+"/v1/projects/acme", r.key, `{}`))

	o, _ := r.ok("items", "put", "refund.rules", "Refunds over 500 EUR need a manager's approval.", "--kind", "instruction",
		"--keywords", "refund,refunds", "--title", "Refund limit")
	require.Regexp(t, `^item acme/refund\.rules v1 written: instruction, authority \w+, keywords refund, refunds, \d+ tokens\n$`, o)
	o, _ = r.ok("items", "put", "refund.rules", "Refunds over 500 EUR need a manager's approval.", "--kind", "instruction",
		"--keywords", "refund,refunds", "--title", "Refund limit")
	require.Equal(t, "item acme/refund.rules v1 unchanged\n", o)
	r.ok("items", "put", "tone", "Answer in plain words.", "--always", "--hidden-from", "critic")
	r.ok("items", "put", "deploy", "Deploys freeze on Fridays.", "--keywords", "deploy", "--priority", "3")
	e := r.fail("items", "put", "x", "y", "--always", "--keywords", "a")
	require.Contains(t, e, "one trigger")
	e = r.fail("items", "put", "x", "y", "--kind", "gossip")
	require.Contains(t, e, "422 validation_failed")
	require.Regexp(t, `(?m)^  /kind: \w+: .+$`, e, "the field errors, one a line")

	o, _ = r.ok("items", "get", "refund.rules")
	require.Contains(t, o, "item       acme/refund.rules v1\n")
	require.Contains(t, o, "kind       instruction, authority ")
	require.Contains(t, o, "trigger    keywords refund, refunds\n")
	require.Contains(t, o, "title      Refund limit\n")
	require.True(t, strings.HasSuffix(o, "----\nRefunds over 500 EUR need a manager's approval.\n"), o)
	o, _ = r.ok("items", "get", "tone")
	require.Contains(t, o, "roles      hidden from critic\n")
	o, _ = r.ok("items", "get", "tone", "--json")
	var item map[string]any
	require.NoError(t, json.Unmarshal([]byte(o), &item), o)
	require.Equal(t, "Answer in plain words.", item["content"])

	o, _ = r.ok("items", "list")
	lines := strings.Split(strings.TrimSpace(o), "\n")
	require.Len(t, lines, 4, o)
	require.Regexp(t, `^KEY\s+V\s+KIND\s+AUTHORITY\s+TRIGGER\s+TOKENS\s+TITLE OR CONTENT$`, lines[0])
	require.Regexp(t, `(?m)^refund\.rules\s+1\s+instruction\s+\w+\s+keywords refund, refunds\s+\d+\s+Refund limit$`, o)
	require.Regexp(t, `(?m)^tone\s+1\s+knowledge\s+\w+\s+always\s+\d+\s+Answer in plain words\.$`, o)
	o, _ = r.ok("items", "list", "--query", "freeze")
	require.Len(t, strings.Split(strings.TrimSpace(o), "\n"), 2, o)
	o, e = r.ok("items", "list", "--limit", "1")
	require.Len(t, strings.Split(strings.TrimSpace(o), "\n"), 2, o)
	require.Contains(t, e, "more: add --cursor ")

	packetsReadable(t, r)
	o, _ = r.ok("items", "delete", "deploy")
	require.Equal(t, "item acme/deploy deleted: tombstone v2 (its versions stay: contextd items versions deploy --project acme)\n", o)
	o, _ = r.ok("items", "versions", "deploy")
	require.Regexp(t, `(?m)^1\s+\S+\s+agt_\S+\s+knowledge\s+\w+\s+Deploys freeze on Fridays\.$`, o)
	require.Regexp(t, `(?m)^2\s+.*\(deleted\)$`, o)
	errorsReadable(t, r)
}

// packetsReadable is the packets half of TestItemsAndPacketsReadable.
func packetsReadable(t *testing.T, r *remote) {
	// A packet: the rendered prompt alone on stdout, byte for byte; its id
	// and how to ask why on stderr.
	o, e := r.ok("packets", "assemble", "--role", "implementer", "--message", "a customer asks for a refund of 700 EUR")
	m := regexp.MustCompile(`^packet (\S+): project acme, role implementer, \d+ of 16000 tokens, \d+ excluded\n`).FindStringSubmatch(e)
	require.NotNil(t, m, e)
	id := m[1]
	require.Contains(t, e, "contextd why "+id+" KEY --project acme")
	stored := send(t, "GET", r.base+"/v1/projects/acme/packets/"+id, r.key, "")
	require.Equal(t, stored["rendered"], o, "stdout is the rendered prompt as stored")
	require.Contains(t, o, "Refunds over 500 EUR")
	require.Contains(t, o, "Answer in plain words.")
	require.NotContains(t, o, "Deploys freeze")

	// Everyday flags: the critic does not see tone; a pin brings deploy in.
	o, _ = r.ok("packets", "assemble", "--role", "critic", "--message", "refund please", "--budget", "4000", "--pin", "deploy")
	require.NotContains(t, o, "plain words")
	require.Contains(t, o, "Deploys freeze on Fridays.")
	o, _ = r.ok("packets", "assemble", "--role", "implementer", "--query", "refund", "--format", "json", "--json")
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(o), &p), o)
	require.Equal(t, "json", p["format"])
	require.NotEmpty(t, p["sections"])
	// --file with flags on top.
	file := filepath.Join(t.TempDir(), "req.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"target_role":"critic","history":[{"role":"user","author":"person","content":"deploy now"}]}`), 0o600))
	o, e = r.ok("packets", "assemble", "--file", file, "--role", "implementer")
	require.Contains(t, e, "role implementer")
	require.Contains(t, o, "Deploys freeze on Fridays.", "the file's history")
	require.Contains(t, r.fail("packets", "assemble", "--message", "hi"), "--role is required")

	o, _ = r.ok("why", id, "refund.rules")
	require.Contains(t, o, "item refund.rules v1: INCLUDED in Project Knowledge")
	o, _ = r.ok("why", id, "deploy")
	require.Contains(t, o, "NOT A CANDIDATE (not_triggered)")
	o, _ = r.ok("why", id, "refund.rules", "--json")
	var why map[string]any
	require.NoError(t, json.Unmarshal([]byte(o), &why), o)
	require.Equal(t, "included", why["decision"])

	o, _ = r.ok("packets", "attribute", id, "refunds over 500 EUR need a MANAGER'S approval")
	require.Contains(t, o, "match 1: normalized, bytes [")
	require.Contains(t, o, `from:   item:refund.rules v1 in Project Knowledge (keyword:"refund"@history[0])`)
	require.Contains(t, r.fail("packets", "attribute", id, "nothing like this"), "contextd: 404 not_found: the text was not found")
	o, e, code := run(t, "attribute", id, "Refunds over 500 EUR", "--url", r.base, "--key", r.key)
	require.Equal(t, 0, code, e)
	require.Contains(t, o, "match 1: exact, bytes [", "at the top level, the packet found in the projects the key may see")
	o, _ = r.ok("packets", "records", id)
	require.Regexp(t, `(?m)^included\s+item:refund\.rules v1\s+Project Knowledge\s+keyword:"refund"@history\[0\]\s+\d+\s+\d+$`, o)
	require.Regexp(t, `(?m)^included\s+item:tone v1\s+Project Knowledge\s+always\s`, o)
	o, _ = r.ok("packets", "replay", id)
	require.Regexp(t, `^identical: the same bytes again \(sha256 [0-9a-f]{64}\)\n$`, o)

	o, _ = r.ok("injections", "refund.rules")
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(id)+`\s+\S+\s+implementer\s+agt_\S+\s+1\s+Project Knowledge\s+keyword:"refund"@history\[0\]$`, o)
}

// errorsReadable: an error is the problem's status and code and what to
// try, with exit status 1.
func errorsReadable(t *testing.T, r *remote) {
	_, e, code := run(t, "packets", "assemble", "--role", "x", "--project", "nowhere", "--url", r.base, "--key", r.key)
	require.Equal(t, 1, code)
	require.Regexp(t, `^contextd: 404 not_found: .*nowhere`, e)
	_, e, code = run(t, "items", "get", "tone", "--project", "acme", "--url", r.base, "--key", "ctxd_notakey")
	require.Equal(t, 1, code)
	require.Contains(t, e, "contextd: 401 unauthenticated")
	require.Contains(t, e, "the server does not know this key")
	_, e, code = run(t, "items", "list", "--project", "acme", "--url", "http://127.0.0.1:1", "--key", "ctxd_x")
	require.Equal(t, 1, code)
	require.Contains(t, e, "no server answers there")
}
