package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

// userWorld is a server with a project of its user's, shop, an always-on
// item of _shared and a packet request in shop whose answer must not move.
type userWorld struct {
	t         *testing.T
	base, key string
}

func newUserWorld(t *testing.T) userWorld {
	base, out, stop := serve(t, "--database-url", pgtest.NewURL(t))
	t.Cleanup(func() { stop() })
	w := userWorld{t: t, base: base, key: keyRE.FindString(out.String())}
	send(t, "PUT", base+"/v1/projects/shop", w.key, `{"description":"the user's shop"}`)
	send(t, "PUT", base+"/v1/projects/shop/items/refunds", w.key, `{"content":"Refunds take five days.","trigger":{"always":true}}`)
	send(t, "PUT", base+"/v1/projects/shop/items/deploy", w.key, `{"content":"Deploys freeze on Fridays.","trigger":{"keywords":["deploy"]}}`)
	send(t, "PUT", base+"/v1/projects/_shared/items/tone", w.key, `{"content":"Answer politely.","trigger":{"always":true}}`)
	// Not a bench item, though its key has the corpus's form: --clean
	// leaves it.
	send(t, "PUT", base+"/v1/projects/_shared/items/shared-000003", w.key, `{"content":"The user's own note.","trigger":{"keywords":["note"]}}`)
	return w
}

// packet assembles shop's packet for the planner (a role the bench's
// agents have too) and returns its rendered text and its records.
func (w userWorld) packet() (string, string) {
	p := send(w.t, "POST", w.base+"/v1/projects/shop/packets", w.key,
		`{"target_role":"planner","query":"how long do refunds and deploys take","history":[{"role":"user","author":"person","content":"deploy the refund fix"}]}`)
	recs := w.get("/v1/projects/shop/packets/" + p["packet_id"].(string) + "/records")
	return p["rendered"].(string), recs
}

func (w userWorld) get(path string) string {
	w.t.Helper()
	req, err := http.NewRequest("GET", w.base+path, nil)
	require.NoError(w.t, err)
	req.Header.Set("Authorization", "Bearer "+w.key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(w.t, err)
	require.Equal(w.t, 200, res.StatusCode, string(b))
	return string(b)
}

// TestBenchURLLeavesOtherProjectsAlone: bench --url against a server with a
// user's project changes nothing in that project's packets (same records,
// same text), writes no _shared item unless told the server is its own,
// and --clean then archives its projects and revokes its agents; the
// packet is still the same after.
func TestBenchURLLeavesOtherProjectsAlone(t *testing.T) {
	t.Parallel()
	w := newUserWorld(t)
	text, records := w.packet()
	require.Contains(t, text, "Refunds take five days.")
	require.Contains(t, text, "Answer politely.")

	_, errs, code := run(t, "bench", "--url", w.base, "--key", w.key, "--items", "60", "--shared", "5", "--duration", "1s")
	require.Equal(t, 1, code, "no _shared writes on a server of others")
	require.Contains(t, errs, "--dedicated")

	out, errs, code := run(t, "bench", "--url", w.base, "--key", w.key, "--items", "60", "--always", "0.5",
		"--duration", "2s", "--concurrency", "2")
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `(?m)^assemble +[1-9]`, out)
	require.Contains(t, errs, "bench: --url: no _shared items")
	require.Regexp(t, `this run wrote in projects bench-0, bench-1 and made 6 agents \(bench-\w+-\*\)`, errs)

	after, afterRecords := w.packet()
	require.Equal(t, text, after, "the bench changed the text of another project's packet")
	require.JSONEq(t, records, afterRecords, "the bench changed the records of another project's packet")
	require.NotContains(t, w.get("/v1/projects/_shared/items?limit=1000"), "shared-000000")

	out, errs, code = run(t, "bench", "--url", w.base, "--key", w.key, "--clean", "--json")
	require.Equal(t, 0, code, errs)
	var res struct {
		Projects []string `json:"archived_projects"`
		Agents   []string `json:"revoked_agents"`
		Shared   []string `json:"deleted_shared_items"`
		Kept     []string `json:"kept_shared_items"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, []string{"bench-0", "bench-1"}, res.Projects)
	require.Len(t, res.Agents, 6)
	require.Empty(t, res.Shared)
	require.Equal(t, []string{"shared-000003"}, res.Kept, "the user's item is not the bench's")
	requireBenchGone(t, w)

	// A second run restores and reuses what --clean archived; a second
	// --clean removes it again.
	_, errs, code = run(t, "bench", "--url", w.base, "--key", w.key, "--items", "60", "--always", "0.5", "--duration", "1s", "--concurrency", "1", "--reuse")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "restored bench-0")
	_, errs, code = run(t, "bench", "--url", w.base, "--key", w.key, "--clean")
	require.Equal(t, 0, code, errs)
	requireBenchGone(t, w)
	after, afterRecords = w.packet()
	require.Equal(t, text, after)
	require.JSONEq(t, records, afterRecords)
}

// requireBenchGone: no bench project is listed, and every bench agent is
// revoked.
func requireBenchGone(t *testing.T, w userWorld) {
	t.Helper()
	var projects struct {
		Data []struct{ Project string } `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(w.get("/v1/projects")), &projects))
	var names []string
	for _, p := range projects.Data {
		names = append(names, p.Project)
	}
	require.ElementsMatch(t, []string{"_shared", "shop"}, names)
	var agents struct {
		Data []struct {
			Name      string  `json:"name"`
			RevokedAt *string `json:"revoked_at"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(w.get("/v1/agents?limit=1000")), &agents))
	n := 0
	for _, a := range agents.Data {
		if strings.HasPrefix(a.Name, "bench-") {
			n++
			require.NotNil(t, a.RevokedAt, "bench agent %s is not revoked", a.Name)
		}
	}
	require.Positive(t, n)
}

// TestBenchCleanRemovesSharedItems: a bench told the server is its own
// (--dedicated) writes _shared, and the user's packet changes; --clean
// deletes those items and the packet is what it was; the user's item of
// the same key form (beyond the bench's three) is kept.
func TestBenchCleanRemovesSharedItems(t *testing.T) {
	t.Parallel()
	w := newUserWorld(t)
	text, records := w.packet()
	_, errs, code := run(t, "bench", "--url", w.base, "--key", w.key, "--dedicated", "--items", "30", "--shared", "3", "--always", "1",
		"--duration", "1s", "--concurrency", "1", "--only", "assemble")
	require.Equal(t, 0, code, errs)
	changed, _ := w.packet()
	require.NotEqual(t, text, changed, "always-on bench items of _shared enter every project's packets")

	out, errs, code := run(t, "bench", "--url", w.base, "--key", w.key, "--clean")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "deleted _shared items: 3\n  shared-000000\n  shared-000001\n  shared-000002\n")
	require.Contains(t, out, "kept _shared items (changed since a bench wrote them): 1\n  shared-000003\n")
	after, afterRecords := w.packet()
	require.Equal(t, text, after)
	require.JSONEq(t, records, afterRecords)
}
