package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// auditFixture is a project with a few items written through the API:
// creates, an update, a tombstone, a batch and a write that changed
// nothing (which makes no entry).
func auditFixture(t *testing.T) *env {
	e := setup(t)
	e.project("acme")
	writer := e.agent("planner", "edit", "acme")
	put := func(key, content string, want int) {
		r := e.do("PUT", "/v1/projects/acme/items/"+key, writer, map[string]any{
			"content": content, "metadata": map[string]any{"n": 1.50, "tags": []string{"a<b", "ü"}},
			"valid_from": "2026-01-02T03:04:05.123456789Z"})
		require.Equal(t, want, r.status, r.text)
	}
	put("refunds", "refunds take five days", 201)
	put("refunds", "refunds take three days", 201)
	put("refunds", "refunds take three days", 200)
	put("shipping", "ships in two days", 201)
	require.Equal(t, 200, e.do("DELETE", "/v1/projects/acme/items/shipping", writer, nil).status)
	r := e.do("POST", "/v1/projects/acme/items", writer, map[string]any{"items": []map[string]any{
		{"key": "b1", "content": "first of a batch"}, {"key": "b2", "content": "second of a batch"}}})
	require.Equal(t, 200, r.status, r.text)
	return e
}

// verify asks the server to verify acme's chain.
func (e *env) verify() resp {
	e.t.Helper()
	r := e.do("GET", "/v1/projects/acme/audit/verify", e.admin, nil)
	require.Equal(e.t, 200, r.status, r.text)
	return r
}

// tamper runs SQL as the database's superuser would, with triggers off.
func (e *env) tamper(sql string, args ...any) {
	e.t.Helper()
	ctx := context.Background()
	conn, err := e.pool.Acquire(ctx)
	require.NoError(e.t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET session_replication_role = replica")
	require.NoError(e.t, err)
	defer conn.Exec(ctx, "SET session_replication_role = origin") //nolint:errcheck
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(e.t, err)
}

func TestAuditChainCoversEveryItemVersion(t *testing.T) {
	e := auditFixture(t)
	r := e.verify()
	require.Equal(t, true, r.json["ok"], r.text)
	// The project; refunds v1, v2; shipping v1, v2 (tombstone); b1, b2.
	require.Equal(t, 7, r.num("entries"))

	// The entries page recomputes to the head the verification reported.
	page := e.do("GET", "/v1/projects/acme/audit/entries?limit=4", e.admin, nil)
	require.Equal(t, 200, page.status, page.text)
	rest := e.do("GET", fmt.Sprintf("/v1/projects/acme/audit/entries?after=%d", page.num("next_after")), e.admin, nil)
	require.Equal(t, 200, rest.status, rest.text)
	require.Nil(t, rest.json["next_after"], "the last page has no next")
	prev, seq := make([]byte, 32), 0
	for _, p := range []resp{page, rest} {
		prev, seq = relink(t, p, prev, seq, nil)
	}
	require.Equal(t, 7, seq)
	require.Equal(t, hex.EncodeToString(prev), r.json["head"])
	require.Equal(t, r.json["head"], page.json["head"].(map[string]any)["hash"])

	// Only an admin reads the chain.
	reader := e.agent("planner", "edit", "acme")
	require.Equal(t, 403, e.do("GET", "/v1/projects/acme/audit/verify", reader, nil).status)
	require.Equal(t, 403, e.do("GET", "/v1/projects/acme/audit/entries", reader, nil).status)
	require.Equal(t, 404, e.do("GET", "/v1/projects/nope/audit/verify", e.admin, nil).status)
}

// relink recomputes the entries of a page of the chain from their bodies,
// after the chain hash prev at seq: each must be the next seq, its entry
// hash SHA-256 of its body, its chain hash SHA-256(previous || entry hash).
// It returns the last chain hash and seq, and adds the subjects seen.
func relink(t *testing.T, page resp, prev []byte, seq int, subjects map[string]bool) ([]byte, int) {
	t.Helper()
	for _, ent := range page.json["data"].([]any) {
		en := ent.(map[string]any)
		seq++
		require.Equal(t, float64(seq), en["seq"])
		body, err := base64.StdEncoding.DecodeString(en["body"].(string))
		require.NoError(t, err)
		eh := sha256.Sum256(body)
		require.Equal(t, hex.EncodeToString(eh[:]), en["entry_hash"], "seq %d", seq)
		ch := sha256.Sum256(append(append([]byte{}, prev...), eh[:]...))
		require.Equal(t, hex.EncodeToString(ch[:]), en["chain_hash"], "seq %d", seq)
		prev = ch[:]
		if subjects != nil {
			subjects[en["subject"].(string)] = true
		}
	}
	return prev, seq
}

// TestBulkAppendLinksAsTheFunctionDoes: a batch of 300 items appends its
// entries by COPY with hashes computed in Go (store's bulk append); the
// writes around it by contextd_audit_append. Every entry, across both
// paths, recomputes from its body to the head that verification reports.
func TestBulkAppendLinksAsTheFunctionDoes(t *testing.T) {
	e := auditFixture(t)
	writer := e.agent("planner", "edit", "acme")
	items := make([]map[string]any, 300)
	for i := range items {
		items[i] = map[string]any{"key": fmt.Sprintf("bulk-%03d", i), "content": fmt.Sprintf("bulk item %d", i)}
	}
	r := e.do("POST", "/v1/projects/acme/items", writer, map[string]any{"items": items})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/after", writer, api.PutItemJSONRequestBody{Content: "after the batch"}).status)

	v := e.verify()
	require.Equal(t, true, v.json["ok"], v.text)
	require.Equal(t, 7+300+1, v.num("entries"))
	prev, seq, after := make([]byte, 32), 0, 0
	subjects := map[string]bool{}
	for {
		page := e.do("GET", fmt.Sprintf("/v1/projects/acme/audit/entries?limit=100&after=%d", after), e.admin, nil)
		require.Equal(t, 200, page.status, page.text)
		prev, seq = relink(t, page, prev, seq, subjects)
		if page.json["next_after"] == nil {
			break
		}
		after = page.num("next_after")
	}
	require.Equal(t, 7+300+1, seq)
	require.Equal(t, hex.EncodeToString(prev), v.json["head"])
	require.True(t, subjects["bulk-000@1"] && subjects["bulk-299@1"], "the batch's versions are in the chain")
}

// TestAuditVerifyCatchesTampering: each way of rewriting history as the
// database's superuser is found, at the seq where it happened.
func TestAuditVerifyCatchesTampering(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sql     string
		problem string
		seq     int
	}{
		{"a byte of a version's content", `UPDATE item_versions SET content = 'refunds take five dayz' WHERE project = 'acme' AND key = 'refunds' AND version = 1`, "content_changed", 2},
		{"content and its stored hash", `UPDATE item_versions SET content = 'x', content_sha256 = sha256('x') WHERE project = 'acme' AND key = 'refunds' AND version = 2`, "content_changed", 3},
		{"a version's author", `UPDATE item_versions SET created_by = 'agt_someone' WHERE project = 'acme' AND key = 'b1'`, "content_changed", 6},
		{"a version's metadata", `UPDATE item_versions SET metadata = '{"n": 2}' WHERE project = 'acme' AND key = 'refunds' AND version = 1`, "content_changed", 2},
		{"a version row deleted", `DELETE FROM item_versions WHERE project = 'acme' AND key = 'shipping' AND version = 2`, "content_changed", 5},
		{"an entry deleted", `DELETE FROM audit_entries WHERE chain = 'acme' AND seq = 3`, "entry_missing", 3},
		{"two entries swapped", `UPDATE audit_entries SET seq = 1000 WHERE chain = 'acme' AND seq = 2;
			UPDATE audit_entries SET seq = 2 WHERE chain = 'acme' AND seq = 3;
			UPDATE audit_entries SET seq = 3 WHERE chain = 'acme' AND seq = 1000`, "order_changed", 2},
		{"the tail cut, head moved back", `DELETE FROM audit_entries WHERE chain = 'acme' AND seq = 7;
			UPDATE audit_heads SET seq = 6, hash = (SELECT chain_hash FROM audit_entries WHERE chain = 'acme' AND seq = 6) WHERE chain = 'acme'`, "entry_missing", 7},
		{"the tail cut, head kept", `DELETE FROM audit_entries WHERE chain = 'acme' AND seq = 7`, "entry_missing", 7},
		{"an entry's body rewritten and rehashed", `UPDATE audit_entries SET body = convert_to(replace(convert_from(body, 'UTF8'), 'refunds', 'refundz'), 'UTF8'),
			entry_hash = sha256(convert_to(replace(convert_from(body, 'UTF8'), 'refunds', 'refundz'), 'UTF8')) WHERE chain = 'acme' AND seq = 2`, "content_changed", 2},
		{"an extra entry", `INSERT INTO audit_entries SELECT chain, 8, kind, subject, body, entry_hash, chain_hash FROM audit_entries WHERE chain = 'acme' AND seq = 7`, "extra_entry", 8},
		{"an item hidden (items.live)", `UPDATE items SET live = false WHERE project = 'acme' AND key = 'refunds'`, "state_mismatch", 3},
		{"an item brought back (items.live)", `UPDATE items SET live = true WHERE project = 'acme' AND key = 'shipping'`, "state_mismatch", 5},
		{"an item moved to an older version", `UPDATE items SET current_version = 1 WHERE project = 'acme' AND key = 'refunds'`, "state_mismatch", 3},
		{"an item row deleted", `DELETE FROM items WHERE project = 'acme' AND key = 'b2'`, "state_mismatch", 7},
		{"an item's authority as packets rank it (items.authority)", `UPDATE items SET authority = 'policy', rank_authority = -4 WHERE project = 'acme' AND key = 'refunds'`, "state_mismatch", 3},
		{"an item's block tokens (items.block_tokens_o200k)", `UPDATE items SET block_tokens_o200k = 1 WHERE project = 'acme' AND key = 'shipping'`, "state_mismatch", 5},
		{"an item's roles as the lanes read them (items.visible_to)", `UPDATE items SET visible_to = '{nobody}', open = false WHERE project = 'acme' AND key = 'refunds'`, "state_mismatch", 3},
		{"an item's trigger kind (items.trigger_kind)", `UPDATE items SET trigger_kind = 'pinned_only' WHERE project = 'acme' AND key = 'refunds'`, "state_mismatch", 3},
		{"an item's content hash, its trigger bypassed (items.content_sha256)", `UPDATE items SET content_sha256 = sha256('x') WHERE project = 'acme' AND key = 'b1'`, "state_mismatch", 6},
		{"a keyword lane row forged for an item (item_keyword_terms)", `INSERT INTO item_keyword_terms (project, term, key, rank_authority, rank_priority, rank_confidence, rank_time, plain)
			SELECT project, project || chr(31) || 'refund', key, rank_authority, rank_priority, rank_confidence, rank_time, true FROM items WHERE project = 'acme' AND key = 'b1'`, "state_mismatch", 6},
		{"a restricted lane row forged for an item (item_restricted)", `INSERT INTO item_restricted (project, lane, rank_authority, rank_priority, rank_confidence, rank_time, key, visible_to, hidden_from)
			SELECT project, '', rank_authority, rank_priority, rank_confidence, rank_time, key, '{}', '{support}' FROM items WHERE project = 'acme' AND key = 'b1'`, "state_mismatch", 6},
		{"a version added without an entry", `INSERT INTO item_versions (project, key, version, kind, source, content, authority, confidence, slot, trigger, fields_sha256, content_sha256, tokens_o200k, tokens_cl100k, created_by)
			SELECT project, key, 3, kind, source, 'forged', authority, confidence, slot, trigger, fields_sha256, content_sha256, 1, 1, created_by FROM item_versions WHERE project = 'acme' AND key = 'refunds' AND version = 2`, "entry_missing", 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := auditFixture(t)
			require.Equal(t, true, e.verify().json["ok"])
			e.tamper(tc.sql)
			r := e.verify()
			require.Equal(t, false, r.json["ok"], r.text)
			require.Equal(t, tc.problem, r.json["problem"], r.text)
			require.Equal(t, float64(tc.seq), r.json["first_bad_seq"], r.text)
			require.NotEmpty(t, r.json["detail"])
		})
	}
}

// TestAuditTriggerDisabledAroundAnUpdate: the owner's way around the
// append-only trigger is caught like any other rewrite.
func TestAuditTriggerDisabledAroundAnUpdate(t *testing.T) {
	e := auditFixture(t)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `ALTER TABLE item_versions DISABLE TRIGGER item_versions_append_only;
		UPDATE item_versions SET title = 'rewritten' WHERE project = 'acme' AND key = 'b2';
		ALTER TABLE item_versions ENABLE TRIGGER item_versions_append_only`)
	require.NoError(t, err)
	r := e.verify()
	require.Equal(t, false, r.json["ok"], r.text)
	require.Equal(t, "content_changed", r.json["problem"])
	require.Equal(t, float64(7), r.json["first_bad_seq"])
}

// TestAuditVerifyCatchesTamperingOfPacketsAndHandoffs: packets (their
// rendered text and their records), handoffs and their events, and the
// project row are in the chain too.
func TestAuditVerifyCatchesTamperingOfPacketsAndHandoffs(t *testing.T) {
	fixture := func(t *testing.T) (*env, map[string]int) {
		e := setup(t)
		e.project("acme")
		writer := e.agent("planner", "edit", "acme")
		critic := e.agent("critic", "edit", "acme")
		require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/refunds", writer, map[string]any{
			"content": "refunds take five days", "trigger": map[string]any{"always": true}}).status)
		p := e.do("POST", "/v1/projects/acme/packets", writer, api.AssemblePacketJSONRequestBody{TargetRole: "planner", TokenBudget: ptr(2000)})
		require.Equal(t, 201, p.status, p.text)
		h := e.do("POST", "/v1/projects/acme/handoffs", writer, map[string]any{
			"task_id": "T-1", "intent": "request_review", "target": map[string]any{"role": "critic"}, "summary": "ready"})
		require.Equal(t, 201, h.status, h.text)
		a := e.do("POST", "/v1/projects/acme/handoffs/"+h.json["id"].(string)+"/accept", critic, map[string]any{})
		require.Equal(t, 200, a.status, a.text)
		seqs := map[string]int{}
		page := e.do("GET", "/v1/projects/acme/audit/entries", e.admin, nil)
		for _, ent := range page.json["data"].([]any) {
			en := ent.(map[string]any)
			seqs[en["kind"].(string)+" "+en["subject"].(string)] = int(en["seq"].(float64))
		}
		require.Equal(t, true, e.verify().json["ok"])
		return e, seqs
	}
	_, seqs := fixture(t)
	var packetSeq, handoffSeq, acceptSeq int
	for k, s := range seqs {
		switch {
		case len(k) > 7 && k[:7] == "packet ":
			packetSeq = s
		case len(k) > 8 && k[:8] == "handoff " && s > handoffSeq:
			handoffSeq = s // the handoff's last entry: accepted
		case len(k) > 14 && k[:14] == "handoff_event " && s > acceptSeq:
			acceptSeq = s
		}
	}
	require.NotZero(t, packetSeq)
	require.NotZero(t, acceptSeq)
	require.Equal(t, 1, seqs["project acme"])
	for _, tc := range []struct {
		name, sql, problem string
		seq                int
	}{
		{"a byte of a packet's rendered text", `UPDATE packets SET rendered = overlay(rendered placing 'X' from 3 for 1) WHERE project = 'acme'`, "content_changed", packetSeq},
		{"a packet's record", `UPDATE packet_records SET reason = 'forged' WHERE project = 'acme' AND ord = 0`, "content_changed", packetSeq},
		{"a packet's record deleted", `DELETE FROM packet_records WHERE project = 'acme' AND ord = 0`, "content_changed", packetSeq},
		{"a handoff's status", `UPDATE handoffs SET status = 'pending' WHERE project = 'acme'`, "state_mismatch", handoffSeq},
		{"the accepted event deleted and the handoff set back to pending", `DELETE FROM handoff_events WHERE project = 'acme' AND event = 'accepted';
			UPDATE handoffs SET status = 'pending', status_reason = '' WHERE project = 'acme'`, "content_changed", acceptSeq},
		{"the project's description", `UPDATE projects SET description = 'forged' WHERE project = 'acme'`, "state_mismatch", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := fixture(t)
			e.tamper(tc.sql)
			r := e.verify()
			require.Equal(t, false, r.json["ok"], r.text)
			require.Equal(t, tc.problem, r.json["problem"], r.text)
			require.Equal(t, float64(tc.seq), r.json["first_bad_seq"], r.text)
		})
	}
}

func TestAuditCheckpointIsSignedOverItsDocumentedMessage(t *testing.T) {
	e := auditFixture(t)
	r := e.do("GET", "/v1/projects/acme/audit/checkpoint", e.admin, nil)
	require.Equal(t, 200, r.status, r.text)
	v := e.verify()
	require.Equal(t, "acme", r.json["project"])
	require.Equal(t, float64(7), r.json["seq"])
	require.Equal(t, v.json["head"], r.json["head"])
	at, err := time.Parse(time.RFC3339, r.json["time"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), at, time.Minute)
	require.True(t, strings.HasSuffix(r.json["time"].(string), "Z"))
	pub, err := base64.StdEncoding.DecodeString(r.json["public_key"].(string))
	require.NoError(t, err)
	require.Equal(t, []byte(testKeys.PublicKey()), pub)
	sig, err := base64.StdEncoding.DecodeString(r.json["signature"].(string))
	require.NoError(t, err)
	msg := fmt.Sprintf("contextd-checkpoint v1\nacme\n7\n%s\n%s\n", r.json["head"], r.json["time"])
	require.True(t, ed25519.Verify(pub, []byte(msg), sig))
	require.False(t, ed25519.Verify(pub, []byte(strings.Replace(msg, "\n7\n", "\n6\n", 1)), sig))

	// A server without a key signs nothing.
	bare := httptest.NewServer(server.New(server.Config{App: app.New(store.New(e.pool, 0))}))
	defer bare.Close()
	e2 := *e
	e2.url = bare.URL
	r = e2.do("GET", "/v1/projects/acme/audit/checkpoint", e.admin, nil)
	require.Equal(t, 503, r.status, r.text)
	require.Equal(t, "audit_key_missing", r.json["code"])
}

// TestForgedIdempotencyAnswerIsNeverServed: an answer rewritten in the
// table fails its HMAC, and the retry is refused, not replayed.
func TestForgedIdempotencyAnswerIsNeverServed(t *testing.T) {
	e := auditFixture(t)
	writer := e.agent("planner", "edit", "acme")
	body := map[string]any{"content": "refunds take two days"}
	first := e.do("PUT", "/v1/projects/acme/items/idem", writer, body, "Idempotency-Key", "k-1")
	require.Equal(t, 201, first.status, first.text)
	again := e.do("PUT", "/v1/projects/acme/items/idem", writer, body, "Idempotency-Key", "k-1")
	require.Equal(t, 201, again.status, again.text)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.text, again.text)

	e.tamper(`UPDATE idempotency_keys SET body = convert_to(replace(convert_from(body, 'UTF8'), 'two days', 'no days'), 'UTF8') WHERE key = 'k-1'`)
	forged := e.do("PUT", "/v1/projects/acme/items/idem", writer, body, "Idempotency-Key", "k-1")
	require.Equal(t, 500, forged.status, forged.text)
	require.Equal(t, "idempotency_answer_tampered", forged.json["code"])
	require.NotContains(t, forged.text, "no days")
	g := e.do("GET", "/v1/audit/verify", e.admin, nil)
	require.Equal(t, false, g.json["ok"], g.text)
	require.Equal(t, "state_mismatch", g.json["problem"])
	require.Contains(t, g.json["detail"], "k-1")

	// A mac removed is no better.
	second := e.do("PUT", "/v1/projects/acme/items/idem2", writer, body, "Idempotency-Key", "k-2")
	require.Equal(t, 201, second.status, second.text)
	e.tamper(`UPDATE idempotency_keys SET mac = NULL WHERE key = 'k-2'`)
	r := e.do("PUT", "/v1/projects/acme/items/idem2", writer, body, "Idempotency-Key", "k-2")
	require.Equal(t, 500, r.status, r.text)
	require.Equal(t, "idempotency_answer_tampered", r.json["code"])
}

// TestGlobalChainCoversAgents: agent creations and revocations are in the
// global chain; a raised permission or an un-revoked key is caught.
func TestGlobalChainCoversAgents(t *testing.T) {
	for _, tc := range []struct{ name, sql string }{
		{"a permission raised", `UPDATE agents SET permission = 'admin' WHERE name = 'worker-agent'`},
		{"a key un-revoked", `UPDATE agents SET revoked_at = NULL WHERE revoked_at IS NOT NULL`},
		{"a scope widened", `UPDATE agents SET projects = '{*}' WHERE name = 'worker-agent'`},
		{"an agent added by SQL", `INSERT INTO agents (id, name, role, permission, projects, key_sha256) VALUES ('agt_forged', 'x', 'x', 'admin', '{*}', sha256('x'))`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			e.agent("worker", "edit", "acme")
			gone := e.do("POST", "/v1/agents", e.admin, map[string]any{"name": "gone", "role": "worker", "permission": "edit", "projects": []string{"acme"}})
			require.Equal(t, 201, gone.status, gone.text)
			require.Equal(t, 200, e.do("DELETE", "/v1/agents/"+gone.json["id"].(string), e.admin, nil).status)
			r := e.do("GET", "/v1/audit/verify", e.admin, nil)
			require.Equal(t, 200, r.status, r.text)
			require.Equal(t, true, r.json["ok"], r.text)
			require.GreaterOrEqual(t, r.num("entries"), 4, "the admin, the worker, gone and its revocation")
			cp := e.do("GET", "/v1/audit/checkpoint", e.admin, nil)
			require.Equal(t, 200, cp.status, cp.text)
			require.Equal(t, "", cp.json["project"])

			e.tamper(tc.sql)
			r = e.do("GET", "/v1/audit/verify", e.admin, nil)
			require.Equal(t, false, r.json["ok"], r.text)
			require.Equal(t, "state_mismatch", r.json["problem"], r.text)
		})
	}
}

// TestBackfillChainsDataOlderThanTheChain: rows written before the chain
// existed (here: their entries and seals removed, as before migration
// 00011) get their entries at the next migration, and verify then holds
// once an operator with the key adopted them (`contextd audit adopt`);
// before, the unsealed entries are refused.
func TestBackfillChainsDataOlderThanTheChain(t *testing.T) {
	e := auditFixture(t)
	critic := e.agent("critic", "edit", "acme")
	writer := e.agent("writer", "edit", "acme")
	require.Equal(t, 201, e.do("POST", "/v1/projects/acme/packets", writer, api.AssemblePacketJSONRequestBody{TargetRole: "writer"}).status)
	h := e.do("POST", "/v1/projects/acme/handoffs", writer, map[string]any{"task_id": "T-1", "intent": "request_review", "target": map[string]any{"role": "critic"}})
	require.Equal(t, 201, h.status, h.text)
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+h.json["id"].(string)+"/accept", critic, map[string]any{}).status)
	e.tamper(`DELETE FROM audit_entries; DELETE FROM audit_heads; DELETE FROM audit_seals`)
	r := e.verify()
	require.Equal(t, false, r.json["ok"], "no chain: every row lacks its entry")

	require.NoError(t, store.MigrateUp(context.Background(), e.pool.Config().ConnString()))
	r = e.verify()
	require.Equal(t, false, r.json["ok"], r.text)
	require.Equal(t, "unsealed", r.json["problem"], "the backfill's entries have no seal until a process with the key adopts them: %s", r.text)
	adoptChains(t, e.app.Store)
	r = e.verify()
	require.Equal(t, true, r.json["ok"], r.text)
	// the project, 6 versions, a packet, a handoff and its two events
	require.Equal(t, 11, r.num("entries"), r.text)
	require.Equal(t, 11, r.num("adopted_through"), r.text)
	g := e.do("GET", "/v1/audit/verify", e.admin, nil)
	require.Equal(t, true, g.json["ok"], g.text)
	require.Equal(t, 4, g.num("entries"), "the admin and three agents")

	// Once chained, a chain is never backfilled again.
	require.NoError(t, store.MigrateUp(context.Background(), e.pool.Config().ConnString()))
	require.Equal(t, 11, e.verify().num("entries"))
}
