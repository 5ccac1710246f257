package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

// TestItemsAndAgentsCommands drives a running server through the command
// line: items put (content or JSON), get, list, versions, delete; agents
// list and revoke; version.
func TestItemsAndAgentsCommands(t *testing.T) {
	t.Parallel()
	url := pgtest.Empty(t)
	base, out, stop := serve(t, "--database-url", url)
	defer stop()
	key := keyRE.FindString(out.String())
	require.NotEmpty(t, key)
	cli := func(args ...string) (map[string]any, string, int) {
		o, e, code := run(t, append(args, "--url", base, "--key", key, "--json")...)
		var v map[string]any
		_ = json.Unmarshal([]byte(o), &v)
		return v, o + e, code
	}
	status, body := get(t, base+"/v1/projects", key)
	require.Equal(t, 200, status, body)
	listed, _, _ := run(t, "agents", "list", "--url", base, "--key", key, "--json")
	require.Contains(t, listed, `"permission": "admin"`)

	// A project, through the API (no command for it).
	_, _, code := cli("items", "put", "k1", "x", "--project", "nowhere")
	require.Equal(t, 1, code, "a missing project is the API's 404")
	require.Equal(t, 201, put(t, base+"/v1/projects/acme", key, `{"description":"d"}`))

	v, o, code := cli("items", "put", "k1", "Refunds need a receipt.", "--project", "acme")
	require.Equal(t, 0, code, o)
	require.Equal(t, 1.0, v["version"])
	file := filepath.Join(t.TempDir(), "item.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"content": "Refunds need a receipt and a reason.", "kind": "instruction", "source": "human"}`), 0o600))
	v, o, code = cli("items", "put", "k1", "--project", "acme", "--file", file)
	require.Equal(t, 0, code, o)
	require.Equal(t, 2.0, v["version"])
	require.NoError(t, os.WriteFile(file, []byte(`not json`), 0o600))
	_, o, code = cli("items", "put", "k1", "--project", "acme", "--file", file)
	require.Equal(t, 1, code)
	require.Contains(t, o, "not JSON")
	// A refused write prints the answer's field errors, one per line.
	require.NoError(t, os.WriteFile(file, []byte(`{"content": "x", "kind": "bogus", "confidence": "sure"}`), 0o600))
	_, o, code = cli("items", "put", "k1", "--project", "acme", "--file", file)
	require.Equal(t, 1, code)
	require.Contains(t, o, "422 validation_failed")
	require.Regexp(t, `(?m)^  /kind: \w+: .+$`, o)
	require.Regexp(t, `(?m)^  /confidence: \w+: .+$`, o)
	v, o, code = cli("items", "get", "k1", "--project", "acme")
	require.Equal(t, 0, code, o)
	require.Equal(t, "Refunds need a receipt and a reason.", v["content"])
	require.Equal(t, "instruction", v["kind"])
	v, o, code = cli("items", "list", "--project", "acme", "--query", "receipt")
	require.Equal(t, 0, code, o)
	require.Len(t, v["data"], 1)
	v, o, code = cli("items", "delete", "k1", "--project", "acme")
	require.Equal(t, 0, code, o)
	require.Equal(t, true, v["deleted"])
	v, o, code = cli("items", "versions", "k1", "--project", "acme")
	require.Equal(t, 0, code, o)
	require.Len(t, v["data"], 3)
	_, o, code = cli("items", "get", "k1")
	require.Equal(t, 1, code)
	require.Contains(t, o, "--project is required")

	a, o, code := run(t, "agents", "create", "--database-url", url, "--name", "w", "--role", "r", "--permission", "edit", "--projects", "acme", "--json")
	require.Equal(t, 0, code, o)
	var made struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(a), &made))
	v, o, code = cli("agents", "revoke", made.ID)
	require.Equal(t, 0, code, o)
	require.NotEmpty(t, v["revoked_at"])

	ver, _, code := run(t, "version")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(ver, "contextd "), ver)
}

func put(t *testing.T, url, key, body string) int {
	t.Helper()
	req, err := http.NewRequest("PUT", url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res.StatusCode
}

// TestPacketAndHandoffCommands: packets assemble|records|attribute|replay
// and handoffs create|reject|show|watch through the command line.
func TestPacketAndHandoffCommands(t *testing.T) {
	t.Parallel()
	url := pgtest.Empty(t)
	base, out, stop := serve(t, "--database-url", url)
	defer stop()
	key := keyRE.FindString(out.String())
	require.Equal(t, 201, put(t, base+"/v1/projects/acme", key, `{}`))
	require.Equal(t, 201, put(t, base+"/v1/projects/acme/items/rule", key, `{"content":"Refunds need a receipt."}`))
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	cli := func(args ...string) (map[string]any, string) {
		o, e, code := run(t, append(args, "--url", base, "--key", key, "--project", "acme", "--json")...)
		require.Equal(t, 0, code, "%v: %s%s", args, o, e)
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(o), &v), o)
		return v, o
	}
	p, _ := cli("packets", "assemble", "--file", file("req.json", `{"target_role":"admin"}`))
	id := p["packet_id"].(string)
	require.Contains(t, p["rendered"], "Refunds need a receipt.")
	recs, _ := cli("packets", "records", id)
	require.NotEmpty(t, recs["data"])
	at, _ := cli("packets", "attribute", id, "refunds", "NEED a receipt")
	require.Equal(t, "normalized", at["matches"].([]any)[0].(map[string]any)["match"])
	rp, _ := cli("packets", "replay", id)
	require.Equal(t, true, rp["identical"])
	inj, _ := cli("injections", "rule")
	require.Equal(t, id, inj["data"].([]any)[0].(map[string]any)["packet_id"], "the top-level injections names the packet")

	h, _ := cli("handoffs", "create", "--file", file("h.json", `{"task_id":"T-1","intent":"request_review","target":{"role":"critic"},"summary":"Patch."}`))
	hid := h["id"].(string)
	_, e, code := run(t, "handoffs", "reject", hid, "--url", base, "--key", key, "--project", "acme")
	require.Equal(t, 1, code, "a reject needs a reason")
	require.Contains(t, e, "422")
	r, _ := cli("handoffs", "reject", hid, "--reason", "no test")
	require.Equal(t, "rejected", r["status"])
	s, _ := cli("handoffs", "show", hid)
	require.Len(t, s["events"], 2)

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wout, werr bytes.Buffer
	Execute(ctx, []string{"handoffs", "watch", "--target-role", "critic", "--last-event-id", "0", "--url", base, "--key", key, "--project", "acme", "--json"}, &wout, &werr)
	lines := strings.Split(strings.TrimSpace(wout.String()), "\n")
	require.Len(t, lines, 2, wout.String()+werr.String())
	require.Contains(t, lines[0], `"event":"created"`)
	require.Contains(t, lines[1], `"event":"rejected"`)
	require.Contains(t, lines[1], `"reason":"no test"`)
}

// TestItemsImportExport: export prints, as JSON Lines, what import takes
// back; importing an export changes nothing.
func TestItemsImportExport(t *testing.T) {
	t.Parallel()
	base, out, stop := serve(t, "--database-url", pgtest.Empty(t))
	defer stop()
	key := keyRE.FindString(out.String())
	require.Equal(t, 201, put(t, base+"/v1/projects/acme", key, `{}`))
	file := filepath.Join(t.TempDir(), "items.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"key":"a","content":"A fact.","priority":3,"trigger":{"keywords":["refund"]}},
		{"key":"b","content":"Hello {{project}}.","template":true,"roles":{"hidden_from":["critic"]},"metadata":{"ticket":"T-1"}}]`), 0o600))
	args := []string{"--url", base, "--key", key, "--project", "acme"}
	o, e, code := run(t, append([]string{"items", "import", file}, args...)...)
	require.Equal(t, 0, code, o+e)
	require.Equal(t, "created 2, updated 0, unchanged 0, refused 0\n", o)
	exported, e, code := run(t, append([]string{"items", "export"}, args...)...)
	require.Equal(t, 0, code, e)
	lines := strings.Split(strings.TrimSpace(exported), "\n")
	require.Len(t, lines, 2, "one JSON object a line")
	require.Contains(t, lines[1], `"ticket":"T-1"`)
	require.NotContains(t, exported, `"version"`)
	require.NoError(t, os.WriteFile(file, []byte(exported), 0o600))
	o, e, code = run(t, append([]string{"items", "import", "--file", file}, args...)...)
	require.Equal(t, 0, code, o+e)
	require.Equal(t, "created 0, updated 0, unchanged 2, refused 0\n", o)

	kx, e, code := run(t, append([]string{"items", "export", "--format", "kxm"}, args...)...)
	require.Equal(t, 0, code, e)
	require.Contains(t, strings.Split(kx, "\n")[0], `"sourceRef":"contextd:acme/a@v1"`)

	// navi's packets, in and out: the export gives back what was imported.
	packets := `{"id":"sel-1","source":"UserSelection","title":"selection","content":"func refund() {}","priority":5,"metadata":{"file":"pay.go"}}
{"id":null,"source":{"Other":"custom-tag"},"title":null,"content":"Custom context.","priority":1,"metadata":{}}
`
	require.NoError(t, os.WriteFile(file, []byte(packets), 0o600))
	nargs := []string{"--url", base, "--key", key, "--project", "navi"}
	require.Equal(t, 201, put(t, base+"/v1/projects/navi", key, `{}`))
	o, e, code = run(t, append([]string{"items", "import", file, "--format", "navi"}, nargs...)...)
	require.Equal(t, 0, code, o+e)
	require.Equal(t, "created 2, updated 0, unchanged 0, refused 0\n", o)
	nx, e, code := run(t, append([]string{"items", "export", "--format", "navi"}, nargs...)...)
	require.Equal(t, 0, code, e)
	require.ElementsMatch(t, strings.Split(strings.TrimSpace(packets), "\n"), strings.Split(strings.TrimSpace(nx), "\n"))
}

// TestItemsImportStreams: a large JSON Lines file goes in batches, with
// progress; bad lines are refused by number, with their reasons, while
// every good line is written, and the counts are exact. Run again, it
// changes nothing.
func TestItemsImportStreams(t *testing.T) {
	t.Parallel()
	base, out, stop := serve(t, "--database-url", pgtest.Empty(t))
	defer stop()
	key := keyRE.FindString(out.String())
	require.Equal(t, 201, put(t, base+"/v1/projects/acme", key, `{}`))
	const n = importTestLines
	var b strings.Builder
	bad := map[int]string{}
	for i := 1; i <= n; i++ {
		switch {
		case i%9973 == 0:
			fmt.Fprintf(&b, `{"key":"k%d","content":"x","kind":"gossip"}`+"\n", i)
			bad[i] = "/kind"
		case i == 4242:
			b.WriteString("{not json\n")
			bad[i] = "not JSON"
		case i%25000 == 7:
			fmt.Fprintf(&b, `{"key":"k%d","content":"x","colour":"red"}`+"\n", i)
			bad[i] = "/colour"
		default:
			fmt.Fprintf(&b, `{"key":"k%d","content":"Fact number %d."}`+"\n", i, i)
		}
	}
	file := filepath.Join(t.TempDir(), "items.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o600))
	args := []string{"items", "import", file, "--url", base, "--key", key, "--project", "acme"}
	o, e, code := run(t, args...)
	require.Equal(t, 1, code, "refused lines make the exit status 1")
	lines := strings.Split(strings.TrimSpace(o), "\n")
	require.Len(t, lines, len(bad)+1, o)
	for _, l := range lines[:len(bad)] {
		var at int
		_, err := fmt.Sscanf(l, "line %d:", &at)
		require.NoError(t, err, l)
		require.Contains(t, l, bad[at], "line %d is refused for its own reason", at)
	}
	require.Equal(t, fmt.Sprintf("created %d, updated 0, unchanged 0, refused %d", n-len(bad), len(bad)), lines[len(bad)])
	require.Contains(t, e, fmt.Sprintf("/%d items (100%%)", n), "progress ends at the whole file")
	require.Contains(t, e, "importing: [")

	o, _, code = run(t, args...)
	require.Equal(t, 1, code)
	require.True(t, strings.HasSuffix(o, fmt.Sprintf("created 0, updated 0, unchanged %d, refused %d\n", n-len(bad), len(bad))), o)
}

// importTestLines is the size of TestItemsImportStreams's file: the issue's
// 100,000 lines.
const importTestLines = 100_000

// TestItemsImportStopsSayingWhere: an import the server refuses as a whole
// (a key that may not write) stops at once and says where, with the
// counts of what was done.
func TestItemsImportStopsSayingWhere(t *testing.T) {
	t.Parallel()
	url := pgtest.Empty(t)
	base, out, stop := serve(t, "--database-url", url)
	defer stop()
	key := keyRE.FindString(out.String())
	require.Equal(t, 201, put(t, base+"/v1/projects/acme", key, `{}`))
	a, o, code := run(t, "agents", "create", "--database-url", url, "--name", "ro", "--role", "r", "--permission", "read-only", "--projects", "acme", "--json")
	require.Equal(t, 0, code, o)
	var made struct{ Key string }
	require.NoError(t, json.Unmarshal([]byte(a), &made))
	file := filepath.Join(t.TempDir(), "items.jsonl")
	require.NoError(t, os.WriteFile(file, []byte("{\"key\":\"a\",\"content\":\"x\"}\n{\"key\":\"b\",\"content\":\"y\"}\n"), 0o600))
	o, e, code := run(t, "items", "import", file, "--url", base, "--key", made.Key, "--project", "acme")
	require.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(o), "\n")
	require.Len(t, lines, 2, o)
	require.True(t, strings.HasPrefix(lines[0], "stopped at line 1: it and what follows were not written"), lines[0])
	require.Equal(t, "created 0, updated 0, unchanged 0, refused 0", lines[1])
	require.Contains(t, e, "403")
}
