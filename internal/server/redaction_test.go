package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// TestRedactionRemovesASecretAndKeepsTheProof: a leaked secret leaves the
// version, every packet that included it (spans overwritten in place, the
// same byte length), the stored answers and the search index; the chain
// still verifies, and says a redaction happened.
func TestRedactionRemovesASecretAndKeepsTheProof(t *testing.T) {
	e := setup(t)
	e.project("acme")
	writer := e.agent("planner", "edit", "acme")
	const secret = "sk-live-51HAXQZZYX"
	put := e.do("PUT", "/v1/projects/acme/items/deploy", writer, map[string]any{
		"content": "Deploy with the key " + secret + " on Fridays.", "trigger": map[string]any{"always": true}}, "Idempotency-Key", "leak-1")
	require.Equal(t, 201, put.status, put.text)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/other", writer, map[string]any{"content": "Ship on Mondays.", "trigger": map[string]any{"always": true}}).status)
	var packets []string
	var lengths []int
	for range 3 {
		p := e.do("POST", "/v1/projects/acme/packets", writer, api.AssemblePacketJSONRequestBody{TargetRole: "planner"})
		require.Equal(t, 201, p.status, p.text)
		require.Contains(t, p.json["rendered"], secret)
		packets = append(packets, p.json["packet_id"].(string))
		lengths = append(lengths, len(p.json["rendered"].(string)))
	}
	secretHash := sha256.Sum256([]byte("Deploy with the key " + secret + " on Fridays."))

	require.Equal(t, 403, e.do("POST", "/v1/projects/acme/items/deploy/versions/1/redact", writer, map[string]any{"reason": "leaked"}).status)
	require.Equal(t, 422, e.do("POST", "/v1/projects/acme/items/deploy/versions/1/redact", e.admin, map[string]any{"reason": ""}).status)
	require.Equal(t, 422, e.do("POST", "/v1/projects/acme/items/deploy/versions/1/redact", e.admin, map[string]any{"reason": "   "}).status)
	nf := e.do("POST", "/v1/projects/acme/items/deploy/versions/9/redact", e.admin, map[string]any{"reason": "leaked"})
	require.NotContains(t, nf.text, "no rows", "no internal error text")
	require.Equal(t, 404, e.do("POST", "/v1/projects/acme/items/deploy/versions/9/redact", e.admin, map[string]any{"reason": "leaked"}).status)
	r := e.do("POST", "/v1/projects/acme/items/deploy/versions/1/redact", e.admin, map[string]any{"reason": "an API key was pasted"})
	require.Equal(t, 202, r.status, r.text)
	id := r.json["id"].(string)
	require.Equal(t, float64(3), r.json["packets_total"])
	require.Eventually(t, func() bool {
		g := e.do("GET", "/v1/projects/acme/redactions/"+id, e.admin, nil)
		return g.status == 200 && g.json["status"] == "done" && g.json["packets_done"] == float64(3)
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 409, e.do("POST", "/v1/projects/acme/items/deploy/versions/1/redact", e.admin, map[string]any{"reason": "again"}).status)

	v := e.do("GET", "/v1/projects/acme/items/deploy/versions/1", e.admin, nil)
	require.Equal(t, 200, v.status, v.text)
	require.NotContains(t, v.text, secret)
	require.NotEqual(t, hex.EncodeToString(secretHash[:]), v.json["content_sha256"], "a guessed secret cannot be confirmed")
	for i, id := range packets {
		p := e.do("GET", "/v1/projects/acme/packets/"+id, e.admin, nil)
		require.Equal(t, 200, p.status, p.text)
		require.NotContains(t, p.text, secret)
		require.Len(t, p.json["rendered"].(string), lengths[i], "every span keeps its byte length")
		require.Contains(t, p.json["rendered"], "[redacted "+r.json["id"].(string)+"]")
		require.Contains(t, p.json["rendered"], "Ship on Mondays.", "the other items' spans are untouched")
		now := sha256.Sum256([]byte(p.json["rendered"].(string)))
		require.Equal(t, hex.EncodeToString(now[:]), p.json["rendered_sha256"], "the hash of the text that held the secret is gone")
	}
	replayed := e.do("PUT", "/v1/projects/acme/items/deploy", writer, map[string]any{
		"content": "Deploy with the key " + secret + " on Fridays.", "trigger": map[string]any{"always": true}}, "Idempotency-Key", "leak-1")
	require.Equal(t, "true", replayed.header.Get("Idempotent-Replayed"), "a retry replays the redacted answer, it does not write again")
	require.NotContains(t, replayed.text, secret)
	require.Contains(t, replayed.text, "[redacted]")
	require.NotContains(t, replayed.text, hex.EncodeToString(secretHash[:]), "nor the hash of the text, which a short secret could be guessed from")
	cur := e.do("GET", "/v1/projects/acme/items/deploy", e.admin, nil)
	require.Equal(t, cur.json["content_sha256"], replayed.json["content_sha256"], "the replay answers the version as it now is")
	require.Equal(t, float64(1), cur.json["version"], "the retry wrote nothing")
	found := e.do("GET", "/v1/projects/acme/items?q="+secret, e.admin, nil)
	require.Equal(t, 200, found.status, found.text)
	require.NotContains(t, found.text, "\"deploy\"", "the search index forgot the secret's words")

	why := e.do("GET", "/v1/projects/acme/packets/"+packets[0]+"/why?item=deploy", e.admin, nil)
	require.Equal(t, 200, why.status, why.text)
	require.Equal(t, "included", why.json["decision"])
	red := why.json["redaction"].(map[string]any)
	require.Equal(t, id, red["id"])
	require.Equal(t, "an API key was pasted", red["reason"])
	require.NotEmpty(t, red["created_by"])
	require.NotEmpty(t, red["created_at"])
	require.Contains(t, why.json["detail"], "redacted")
	require.NotContains(t, why.text, secret)
	rp := e.do("POST", "/v1/projects/acme/packets/"+packets[0]+"/replay", e.admin, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, false, rp.json["identical"])
	require.Equal(t, true, rp.json["redacted"])
	require.Contains(t, rp.text, "an API key was pasted")
	require.NotContains(t, rp.text, secret)

	ver := e.verify()
	require.Equal(t, true, ver.json["ok"], ver.text)
	require.Equal(t, float64(1), ver.json["redacted"])
	entries := e.do("GET", "/v1/projects/acme/audit/entries?limit=1000", e.admin, nil)
	for _, ent := range entries.json["data"].([]any) {
		body, _ := base64.StdEncoding.DecodeString(ent.(map[string]any)["body"].(string))
		require.NotContains(t, string(body), hex.EncodeToString(secretHash[:]), "no entry confirms the secret")
		require.NotContains(t, string(body), secret)
	}

	redactedStillChecked(t, e, packets)

	// A body replaced as redacted without a redaction is tampering.
	e.tamper(`UPDATE audit_entries SET body = convert_to('{"entry":"item_version","redacted":"red_forged","subject":"other@1"}', 'UTF8') WHERE chain = 'acme' AND subject = 'other@1'`)
	ver = e.verify()
	require.Equal(t, false, ver.json["ok"], ver.text)
	require.Equal(t, "content_changed", ver.json["problem"])
}

// TestRedactionOfASharedItemReachesEveryProject: a _shared item is in
// every project's packets; its redaction overwrites them all.
func TestRedactionOfASharedItemReachesEveryProject(t *testing.T) {
	e := setup(t)
	e.project("acme")
	e.project("beta")
	const secret = "ghp_sharedsecret123"
	require.Equal(t, 201, e.do("PUT", "/v1/projects/_shared/items/token", e.admin, map[string]any{
		"content": "The CI token is " + secret, "trigger": map[string]any{"always": true}}).status)
	var packets [][2]string
	for _, p := range []string{"acme", "beta"} {
		r := e.do("POST", "/v1/projects/"+p+"/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "planner"})
		require.Equal(t, 201, r.status, r.text)
		require.Contains(t, r.json["rendered"], secret)
		packets = append(packets, [2]string{p, r.json["packet_id"].(string)})
	}
	r := e.do("POST", "/v1/projects/_shared/items/token/versions/1/redact", e.admin, map[string]any{"reason": "token leaked"})
	require.Equal(t, 202, r.status, r.text)
	require.Equal(t, float64(2), r.json["packets_total"])
	require.Eventually(t, func() bool {
		g := e.do("GET", "/v1/projects/_shared/redactions/"+r.json["id"].(string), e.admin, nil)
		return g.json["status"] == "done"
	}, 10*time.Second, 20*time.Millisecond)
	for _, p := range packets {
		g := e.do("GET", "/v1/projects/"+p[0]+"/packets/"+p[1], e.admin, nil)
		require.NotContains(t, g.text, secret, p[0])
		v := e.do("GET", "/v1/projects/"+p[0]+"/audit/verify", e.admin, nil)
		require.Equal(t, true, v.json["ok"], v.text)
	}
	v := e.do("GET", "/v1/projects/_shared/audit/verify", e.admin, nil)
	require.Equal(t, true, v.json["ok"], v.text)
	require.Equal(t, float64(1), v.json["redacted"])
}

// redactedStillChecked: after a redaction, what it did not remove is
// still verified: the other text of its packets, and that its version
// holds the marker alone; its functions rewrite nothing without it.
func redactedStillChecked(t *testing.T, e *env, packets []string) {
	// A redacted packet's other spans are still checked.
	t.Run("a redacted packet's other text", func(t *testing.T) {
		e.tamper(`UPDATE packets SET rendered = replace(rendered, 'Ship on Mondays.', 'Ship on Sundays.') WHERE id = '` + packets[1] + `'`)
		ver := e.verify()
		require.Equal(t, false, ver.json["ok"], ver.text)
		require.Equal(t, "content_changed", ver.json["problem"], "a redacted packet's text changed any other way: %s", ver.text)
		rp := e.do("POST", "/v1/projects/acme/packets/"+packets[1]+"/replay", e.admin, nil)
		require.Equal(t, 200, rp.status, rp.text)
		require.Equal(t, false, rp.json["identical"], rp.text)
		require.NotEqual(t, true, rp.json["redacted"], "the redaction does not explain this change: %s", rp.text)
		e.tamper(`UPDATE packets SET rendered = replace(rendered, 'Ship on Sundays.', 'Ship on Mondays.') WHERE id = '` + packets[1] + `'`)
		require.Equal(t, true, e.verify().json["ok"])
	})
	// A redacted version must hold the marker and nothing else.
	t.Run("content put back under a redaction", func(t *testing.T) {
		e.tamper(`UPDATE item_versions SET content = 'EVIL' WHERE project = 'acme' AND key = 'deploy' AND version = 1`)
		ver := e.verify()
		require.Equal(t, false, ver.json["ok"], ver.text)
		require.Equal(t, "content_changed", ver.json["problem"], ver.text)
		e.tamper(`UPDATE item_versions SET content = '[redacted]' WHERE project = 'acme' AND key = 'deploy' AND version = 1`)
		require.Equal(t, true, e.verify().json["ok"])
	})
	// The redaction functions do only what a redaction does.
	_, err := e.pool.Exec(context.Background(), `SELECT contextd_redact_packet('acme', $1, 'acme', 'red_none')`, packets[2])
	require.Error(t, err, "no redaction, no rewrite")

}

// TestRedactedTextLeavesNewPackets: once a version is redacted, no packet
// made afterwards contains its text, though the process had it cached from
// a packet made before (the cache is keyed by the content hash that a
// redaction replaces), and a second process, with its own cache, agrees.
func TestRedactedTextLeavesNewPackets(t *testing.T) {
	t.Parallel()
	e := auditFixture(t)
	other := httptest.NewServer(server.New(server.Config{App: app.New(store.New(e.pool, pgtest.AcquireTimeout), app.WithKeys(testKeys))}))
	t.Cleanup(other.Close)
	const secret = "TOPSECRET-PAYLOAD-7"
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/leak", e.admin, map[string]any{"content": secret, "trigger": map[string]any{"always": true}}).status)
	req := api.AssemblePacketJSONRequestBody{TargetRole: "implementer"}
	for _, base := range []string{e.url, other.URL} {
		r := e.doAt(base, "POST", "/v1/projects/acme/packets", e.admin, req)
		require.Equal(t, 201, r.status, r.text)
		require.Contains(t, r.json["rendered"], secret, "before: in the packet, and cached")
	}
	r := e.do("POST", "/v1/projects/acme/items/leak/versions/1/redact", e.admin, map[string]any{"reason": "leaked"})
	require.Equal(t, 202, r.status, r.text)
	require.Eventually(t, func() bool {
		return e.do("GET", "/v1/projects/acme/redactions/"+r.json["id"].(string), e.admin, nil).json["status"] == "done"
	}, 10*time.Second, 20*time.Millisecond)
	for _, base := range []string{e.url, other.URL} {
		r := e.doAt(base, "POST", "/v1/projects/acme/packets", e.admin, req)
		require.Equal(t, 201, r.status, r.text)
		require.NotContains(t, r.json["rendered"], secret, "after: not from any process's cache (%s)", base)
		require.Contains(t, r.json["rendered"], "[redacted]")
	}
}

// doAt is do against another server of the same database.
func (e *env) doAt(base, method, path, key string, body any) resp {
	e.t.Helper()
	saved := e.url
	e.url = base
	defer func() { e.url = saved }()
	return e.do(method, path, key, body)
}

// TestRedactionWaitsForOlderTransactions: a packet assembled in a
// transaction that began before a redaction committed may have read the
// text and be stored after the redaction's pass over the packets, so the
// redaction is not done until every such transaction has ended, and then
// passes over the packets again.
func TestRedactionWaitsForOlderTransactions(t *testing.T) {
	t.Parallel()
	e := auditFixture(t)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/late", e.admin, map[string]any{"content": "LATE-SECRET", "trigger": map[string]any{"always": true}}).status)
	older, err := e.pool.Begin(t.Context()) // stands for an assembly in flight
	require.NoError(t, err)
	defer older.Rollback(context.Background())
	var one int
	require.NoError(t, older.QueryRow(t.Context(), "SELECT 1").Scan(&one))
	r := e.do("POST", "/v1/projects/acme/items/late/versions/1/redact", e.admin, map[string]any{"reason": "leaked"})
	require.Equal(t, 202, r.status, r.text)
	status := func() any {
		return e.do("GET", "/v1/projects/acme/redactions/"+r.json["id"].(string), e.admin, nil).json["status"]
	}
	require.Never(t, func() bool { return status() == "done" }, 600*time.Millisecond, 50*time.Millisecond, "not done while an older transaction runs")
	require.NoError(t, older.Rollback(t.Context()))
	require.Eventually(t, func() bool { return status() == "done" }, 10*time.Second, 20*time.Millisecond)
}
