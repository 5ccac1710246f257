package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
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
	// refunds v1, v2; shipping v1, v2 (tombstone); b1, b2: six versions.
	require.Equal(t, 6, r.num("entries"))

	// The entries page recomputes to the head the verification reported.
	page := e.do("GET", "/v1/projects/acme/audit/entries?limit=4", e.admin, nil)
	require.Equal(t, 200, page.status, page.text)
	rest := e.do("GET", fmt.Sprintf("/v1/projects/acme/audit/entries?after=%d", page.num("next_after")), e.admin, nil)
	require.Equal(t, 200, rest.status, rest.text)
	require.Nil(t, rest.json["next_after"], "the last page has no next")
	prev := make([]byte, 32)
	seq := 0
	for _, p := range []resp{page, rest} {
		for _, ent := range p.json["data"].([]any) {
			en := ent.(map[string]any)
			seq++
			require.Equal(t, float64(seq), en["seq"])
			body, err := base64.StdEncoding.DecodeString(en["body"].(string))
			require.NoError(t, err)
			eh := sha256.Sum256(body)
			require.Equal(t, hex.EncodeToString(eh[:]), en["entry_hash"])
			ch := sha256.Sum256(append(append([]byte{}, prev...), eh[:]...))
			require.Equal(t, hex.EncodeToString(ch[:]), en["chain_hash"])
			prev = ch[:]
		}
	}
	require.Equal(t, 6, seq)
	require.Equal(t, hex.EncodeToString(prev), r.json["head"])
	require.Equal(t, r.json["head"], page.json["head"].(map[string]any)["hash"])

	// Only an admin reads the chain.
	reader := e.agent("planner", "edit", "acme")
	require.Equal(t, 403, e.do("GET", "/v1/projects/acme/audit/verify", reader, nil).status)
	require.Equal(t, 403, e.do("GET", "/v1/projects/acme/audit/entries", reader, nil).status)
	require.Equal(t, 404, e.do("GET", "/v1/projects/nope/audit/verify", e.admin, nil).status)
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
		{"a byte of a version's content", `UPDATE item_versions SET content = 'refunds take five dayz' WHERE project = 'acme' AND key = 'refunds' AND version = 1`, "content_changed", 1},
		{"content and its stored hash", `UPDATE item_versions SET content = 'x', content_sha256 = sha256('x') WHERE project = 'acme' AND key = 'refunds' AND version = 2`, "content_changed", 2},
		{"a version's author", `UPDATE item_versions SET created_by = 'agt_someone' WHERE project = 'acme' AND key = 'b1'`, "content_changed", 5},
		{"a version's metadata", `UPDATE item_versions SET metadata = '{"n": 2}' WHERE project = 'acme' AND key = 'refunds' AND version = 1`, "content_changed", 1},
		{"a version row deleted", `DELETE FROM item_versions WHERE project = 'acme' AND key = 'shipping' AND version = 2`, "content_changed", 4},
		{"an entry deleted", `DELETE FROM audit_entries WHERE chain = 'acme' AND seq = 3`, "entry_missing", 3},
		{"two entries swapped", `UPDATE audit_entries SET seq = 1000 WHERE chain = 'acme' AND seq = 2;
			UPDATE audit_entries SET seq = 2 WHERE chain = 'acme' AND seq = 3;
			UPDATE audit_entries SET seq = 3 WHERE chain = 'acme' AND seq = 1000`, "order_changed", 2},
		{"the tail cut, head moved back", `DELETE FROM audit_entries WHERE chain = 'acme' AND seq = 6;
			UPDATE audit_heads SET seq = 5, hash = (SELECT chain_hash FROM audit_entries WHERE chain = 'acme' AND seq = 5) WHERE chain = 'acme'`, "entry_missing", 6},
		{"the tail cut, head kept", `DELETE FROM audit_entries WHERE chain = 'acme' AND seq = 6`, "entry_missing", 6},
		{"an entry's body rewritten and rehashed", `UPDATE audit_entries SET body = convert_to(replace(convert_from(body, 'UTF8'), 'refunds', 'refundz'), 'UTF8'),
			entry_hash = sha256(convert_to(replace(convert_from(body, 'UTF8'), 'refunds', 'refundz'), 'UTF8')) WHERE chain = 'acme' AND seq = 1`, "content_changed", 1},
		{"an extra entry", `INSERT INTO audit_entries SELECT chain, 7, kind, subject, body, entry_hash, chain_hash FROM audit_entries WHERE chain = 'acme' AND seq = 6`, "extra_entry", 7},
		{"an item hidden (items.live)", `UPDATE items SET live = false WHERE project = 'acme' AND key = 'refunds'`, "state_mismatch", 2},
		{"an item brought back (items.live)", `UPDATE items SET live = true WHERE project = 'acme' AND key = 'shipping'`, "state_mismatch", 4},
		{"an item moved to an older version", `UPDATE items SET current_version = 1 WHERE project = 'acme' AND key = 'refunds'`, "state_mismatch", 2},
		{"an item row deleted", `DELETE FROM items WHERE project = 'acme' AND key = 'b2'`, "state_mismatch", 6},
		{"a version added without an entry", `INSERT INTO item_versions (project, key, version, kind, source, content, authority, confidence, slot, trigger, fields_sha256, content_sha256, tokens_o200k, tokens_cl100k, created_by)
			SELECT project, key, 3, kind, source, 'forged', authority, confidence, slot, trigger, fields_sha256, content_sha256, 1, 1, created_by FROM item_versions WHERE project = 'acme' AND key = 'refunds' AND version = 2`, "entry_missing", 7},
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
	require.Equal(t, float64(6), r.json["first_bad_seq"])
}
