package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/pgtest"
)

func testAuditKey(t *testing.T) string {
	seed := make([]byte, 32)
	_, err := rand.Read(seed)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(seed)
}

// tamper runs SQL on the server's database as its superuser, triggers off.
func tamper(t *testing.T, dbURL, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SET session_replication_role = replica; "+sql)
	require.NoError(t, err)
}

func TestAuditVerifyAndCheckpointFromTheClientSide(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	keyFile := filepath.Join(t.TempDir(), "audit.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(testAuditKey(t)+"\n"), 0o600))
	base, out, stop := serve(t, "--database-url", dbURL, "--audit-key-file", keyFile)
	defer stop()
	key := keyRE.FindString(out.String())
	send(t, "PUT", base+"/v1/projects/acme", key, `{}`)
	send(t, "PUT", base+"/v1/projects/acme/items/refund.rules", key, `{"content":"Refunds over 500 EUR need a manager.","metadata":{"n":1.50},"trigger":{"always":true}}`)
	send(t, "PUT", base+"/v1/projects/acme/items/refund.rules", key, `{"content":"Refunds over 900 EUR need a manager.","trigger":{"always":true}}`)
	send(t, "POST", base+"/v1/projects/acme/packets", key, `{"target_role":"implementer"}`)
	args := func(extra ...string) []string {
		return append([]string{"--project", "acme", "--url", base, "--key", key}, extra...)
	}

	stdout, errs, code := run(t, append([]string{"audit", "verify"}, args()...)...)
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `^ok entries=4 head=[0-9a-f]{64}\n$`, stdout)

	cpFile := filepath.Join(t.TempDir(), "cp.json")
	stdout, errs, code = run(t, append([]string{"audit", "checkpoint", "--out", cpFile}, args()...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, stdout, "seq=4")
	var cp evidence.Checkpoint
	b, err := os.ReadFile(cpFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cp))
	require.NoError(t, cp.VerifySignature(nil))
	require.Equal(t, int64(4), cp.Seq)

	// Later writes extend the checkpointed chain.
	send(t, "PUT", base+"/v1/projects/acme/items/shipping", key, `{"content":"Ships in two days."}`)
	stdout, errs, code = run(t, append([]string{"audit", "verify", "--checkpoint", cpFile}, args()...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, stdout, "ok entries=5 ")
	require.Contains(t, stdout, fmt.Sprintf("\ncheckpoint %s: signature checked (public key %s); its head seq=4 %s of %s is on the chain\n", cpFile, cp.PublicKey, cp.Head, cp.Time),
		"it says what the checkpoint added")
	stdout, _, _ = run(t, append([]string{"audit", "verify"}, args()...)...)
	require.NotContains(t, stdout, "checkpoint", "without one it says nothing of a checkpoint")

	stdout, errs, code = run(t, "audit", "verify", "--global", "--url", base, "--key", key)
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `^ok entries=1 head=`, stdout, "the bootstrap admin")

	// A version's content rewritten: found from this side.
	tamper(t, dbURL, `UPDATE item_versions SET content = 'Refunds over 50 EUR need a manager.' WHERE key = 'refund.rules' AND version = 1`)
	stdout, _, code = run(t, append([]string{"audit", "verify", "--rows=true"}, args()...)...)
	require.NotEqual(t, 0, code)
	require.Contains(t, stdout, "bad seq=2 problem=content_changed")
}

// TestAuditVerifyCatchesAChainRewrittenWhole: every hash recomputed after a
// rewrite fails against the seals of the entries written with the key,
// and against a checkpoint saved before it; the entries written while the
// server had no key are proven by that checkpoint.
func TestAuditVerifyCatchesAChainRewrittenWhole(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	base, out, stop := serve(t, "--database-url", dbURL)
	key := keyRE.FindString(out.String())
	send(t, "PUT", base+"/v1/projects/acme", key, `{}`)
	send(t, "PUT", base+"/v1/projects/acme/items/a", key, `{"content":"first"}`)
	send(t, "PUT", base+"/v1/projects/acme/items/b", key, `{"content":"second"}`)
	args := []string{"--project", "acme", "--url", base, "--key", key}
	// Without an audit key the server signs nothing.
	_, errs, code := run(t, append([]string{"audit", "checkpoint"}, args...)...)
	require.NotEqual(t, 0, code)
	require.Contains(t, errs, "audit_key_missing")
	require.Equal(t, 0, stop())

	keyFile := filepath.Join(t.TempDir(), "audit.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(testAuditKey(t)+"\n"), 0o600))
	base, _, stop = serve(t, "--database-url", dbURL, "--audit-key-file", keyFile)
	defer stop()
	args = []string{"--project", "acme", "--url", base, "--key", key}
	stdout, _, code := run(t, append([]string{"audit", "verify", "--rows=false"}, args...)...)
	require.NotEqual(t, 0, code, "entries written without the key have no seal: %s", stdout)
	require.Contains(t, stdout, "bad seq=1 problem=unsealed")
	cpFile := filepath.Join(t.TempDir(), "cp.json")
	_, errs, code = run(t, append([]string{"audit", "checkpoint", "--out", cpFile}, args...)...)
	require.Equal(t, 0, code, errs)
	send(t, "PUT", base+"/v1/projects/acme/items/c", key, `{"content":"third"}`)
	stdout, _, code = run(t, append([]string{"audit", "verify", "--rows=false", "--checkpoint", cpFile}, args...)...)
	require.Equal(t, 0, code, "the checkpoint proves seqs 1 to 3, the seal seq 4: %s", stdout)
	require.Contains(t, stdout, "ok entries=4 ")

	// Rewrite item b's only version and recompute every hash after it,
	// as someone with the database but not the key would.
	tamper(t, dbURL, `UPDATE item_versions SET title = 'rewritten' WHERE key = 'b'`)
	rehash(t, dbURL, "acme")
	stdout, _, code = run(t, append([]string{"audit", "verify", "--rows=false"}, args...)...)
	require.NotEqual(t, 0, code, "the seal of seq 4 signed the chain hash the rehash changed: %s", stdout)
	require.Contains(t, stdout, "bad seq=1 problem=unsealed", "seqs 1 to 3 are unsealed, and nothing here proves them")
	stdout, _, code = run(t, append([]string{"audit", "verify", "--rows=false", "--checkpoint", cpFile}, args...)...)
	require.NotEqual(t, 0, code)
	require.Contains(t, stdout, "bad seq=3 problem=content_changed")
	require.Contains(t, stdout, "checkpoint")
}

// rehash rewrites a chain's bodies from their rows and recomputes every
// hash and the head, the whole rewrite a checkpoint exists to catch.
func rehash(t *testing.T, dbURL, chain string) {
	t.Helper()
	rehashItem(t, dbURL, chain, "b@1")
}

// rehashItem puts the title "rewritten" into the entry of an item version
// (subject KEY@N) and recomputes every hash of the chain.
func rehashItem(t *testing.T, dbURL, chain, subject string) {
	t.Helper()
	tamper(t, dbURL, `
		UPDATE audit_entries e SET body = convert_to(replace(convert_from(e.body, 'UTF8'), '"title":""', '"title":"rewritten"'), 'UTF8')
		WHERE chain = '`+chain+`' AND kind = 'item_version' AND subject = '`+subject+`';
		DO $$
		DECLARE r record; h bytea := '\x0000000000000000000000000000000000000000000000000000000000000000';
		BEGIN
			FOR r IN SELECT seq, body FROM audit_entries WHERE chain = '`+chain+`' ORDER BY seq LOOP
				h := sha256(h || sha256(r.body));
				UPDATE audit_entries SET entry_hash = sha256(r.body), chain_hash = h WHERE chain = '`+chain+`' AND seq = r.seq;
			END LOOP;
			UPDATE audit_heads SET hash = h WHERE chain = '`+chain+`';
		END $$;`)
}

// TestAuditVerifyCatchesEveryTamperClass: each way of rewriting history
// with the database's superuser login is caught by `contextd audit verify`.
func TestAuditVerifyCatchesEveryTamperClass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sql, problem string
		global             bool
	}{
		{"a byte of a version", `UPDATE item_versions SET content = 'Refunds over 501 EUR need a manager.' WHERE key = 'refund.rules'`, "content_changed", false},
		{"a byte of a packet's text", `UPDATE packets SET rendered = overlay(rendered placing 'X' from 3 for 1)`, "content_changed", false},
		{"a record", `UPDATE packet_records SET reason = 'forged' WHERE ord = 0`, "content_changed", false},
		{"a version row deleted", `DELETE FROM item_versions WHERE key = 'refund.rules'`, "content_changed", false},
		{"two entries swapped", `UPDATE audit_entries SET seq = 1000 WHERE seq = 2; UPDATE audit_entries SET seq = 2 WHERE seq = 3; UPDATE audit_entries SET seq = 3 WHERE seq = 1000`, "order_changed", false},
		{"the tail cut", `DELETE FROM audit_entries WHERE chain = 'acme' AND seq = (SELECT max(seq) FROM audit_entries WHERE chain = 'acme')`, "entry_missing", false},
		{"the tail cut and the head moved back", `DELETE FROM audit_entries WHERE chain = 'acme' AND seq = (SELECT max(seq) FROM audit_entries WHERE chain = 'acme');
			UPDATE audit_heads SET seq = seq - 1, hash = (SELECT chain_hash FROM audit_entries WHERE chain = 'acme' ORDER BY seq DESC LIMIT 1) WHERE chain = 'acme'`, "entry_missing", false},
		{"a trigger disabled around an update", `SET session_replication_role = origin; ALTER TABLE item_versions DISABLE TRIGGER item_versions_append_only;
			UPDATE item_versions SET title = 'x' WHERE key = 'refund.rules'; ALTER TABLE item_versions ENABLE TRIGGER item_versions_append_only`, "content_changed", false},
		{"items.live", `UPDATE items SET live = false WHERE key = 'refund.rules'`, "state_mismatch", false},
		{"a handoff's status", `UPDATE handoffs SET status = 'pending'`, "state_mismatch", false},
		{"an agent's permission", `UPDATE agents SET permission = 'admin' WHERE name = 'critic'`, "state_mismatch", true},
		{"a forged idempotency answer", `UPDATE idempotency_keys SET body = convert_to('{"forged":true}', 'UTF8')`, "state_mismatch", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.NewURL(t)
			keyFile := filepath.Join(t.TempDir(), "audit.key")
			require.NoError(t, os.WriteFile(keyFile, []byte(testAuditKey(t)+"\n"), 0o600))
			base, out, stop := serve(t, "--database-url", dbURL, "--audit-key-file", keyFile)
			defer stop()
			key := keyRE.FindString(out.String())
			send(t, "PUT", base+"/v1/projects/acme", key, `{}`)
			send(t, "PUT", base+"/v1/projects/acme/items/refund.rules", key, `{"content":"Refunds over 500 EUR need a manager.","trigger":{"always":true}}`)
			send(t, "POST", base+"/v1/projects/acme/packets", key, `{"target_role":"implementer"}`)
			critic := send(t, "POST", base+"/v1/agents", key, `{"name":"critic","role":"critic","permission":"edit","projects":["acme"]}`)
			h := send(t, "POST", base+"/v1/projects/acme/handoffs", key, `{"task_id":"T-1","intent":"request_review","target":{"role":"critic"}}`)
			send(t, "POST", base+"/v1/projects/acme/handoffs/"+h["id"].(string)+"/accept", critic["key"].(string), `{}`)
			req := sendWith(t, "PUT", base+"/v1/projects/acme/items/idem", key, `{"content":"once"}`, "Idempotency-Key", "k-1")
			require.NotEmpty(t, req)
			args := []string{"audit", "verify", "--url", base, "--key", key}
			if tc.global {
				args = append(args, "--global")
			} else {
				args = append(args, "--project", "acme")
			}
			stdout, errs, code := run(t, args...)
			require.Equal(t, 0, code, "%s%s", stdout, errs)
			tamper(t, dbURL, tc.sql)
			stdout, _, code = run(t, args...)
			require.NotEqual(t, 0, code, stdout)
			require.Contains(t, stdout, "problem="+tc.problem, stdout)
		})
	}
}

func sendWith(t *testing.T, method, url, key, body string, header ...string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	require.Less(t, res.StatusCode, 300, string(b))
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// TestAuditVerifyAfterARedaction: the client side accepts a redaction's
// entries and still checks what it did not remove.
func TestAuditVerifyAfterARedaction(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	base, out, stop := serve(t, "--database-url", dbURL)
	defer stop()
	key := keyRE.FindString(out.String())
	send(t, "PUT", base+"/v1/projects/acme", key, `{}`)
	send(t, "PUT", base+"/v1/projects/acme/items/token", key, `{"content":"The token is sk-123456.","trigger":{"always":true}}`)
	send(t, "PUT", base+"/v1/projects/acme/items/other", key, `{"content":"Ship on Mondays.","trigger":{"always":true}}`)
	p := send(t, "POST", base+"/v1/projects/acme/packets", key, `{"target_role":"implementer"}`)
	r := send(t, "POST", base+"/v1/projects/acme/items/token/versions/1/redact", key, `{"reason":"leaked"}`)
	require.Eventually(t, func() bool {
		g := send(t, "GET", base+"/v1/projects/acme/redactions/"+r["id"].(string), key, "")
		return g["status"] == "done"
	}, 10*time.Second, 20*time.Millisecond)
	args := []string{"audit", "verify", "--project", "acme", "--url", base, "--key", key}
	stdout, errs, code := run(t, args...)
	require.Equal(t, 0, code, "%s%s", stdout, errs)
	require.Contains(t, stdout, "ok entries=")
	tamper(t, dbURL, `UPDATE packets SET rendered = replace(rendered, 'Mondays', 'Sundays') WHERE id = '`+p["packet_id"].(string)+`'`)
	stdout, _, code = run(t, args...)
	require.NotEqual(t, 0, code, stdout)
	require.Contains(t, stdout, "problem=content_changed", "a redacted packet's text changed any other way")
}

// checkpointedChain serves a database with an audit key, writes project
// acme with one item (entries 1 and 2, sealed) and saves a checkpoint of
// it; it returns the database, the server, the admin key, the client
// arguments for acme and the checkpoint's file.
func checkpointedChain(t *testing.T) (dbURL, base, key string, args []string, cpFile string) {
	t.Helper()
	dbURL = pgtest.NewURL(t)
	keyFile := filepath.Join(t.TempDir(), "audit.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(testAuditKey(t)+"\n"), 0o600))
	base, out, stop := serve(t, "--database-url", dbURL, "--audit-key-file", keyFile)
	t.Cleanup(func() { stop() })
	key = keyRE.FindString(out.String())
	send(t, "PUT", base+"/v1/projects/acme", key, `{}`)
	send(t, "PUT", base+"/v1/projects/acme/items/a", key, `{"content":"first"}`)
	args = []string{"--project", "acme", "--url", base, "--key", key}
	cpFile = filepath.Join(t.TempDir(), "cp.json")
	_, errs, code := run(t, append([]string{"audit", "checkpoint", "--out", cpFile}, args...)...)
	require.Equal(t, 0, code, errs)
	return dbURL, base, key, args, cpFile
}

// TestAuditVerifyRefusesEntriesAppendedWithoutTheKey: issue 32's third
// row. After a checkpoint, someone with the database but not the audit key
// appends consistent, correctly hashed entries (here through a contextd of
// their own on the same database, without the key: the easiest forger),
// and both `contextd audit verify` and `--checkpoint` refuse them at the
// first forged seq; a genuine write after them does not launder them.
func TestAuditVerifyRefusesEntriesAppendedWithoutTheKey(t *testing.T) {
	t.Parallel()
	dbURL, base, key, args, cpFile := checkpointedChain(t)
	stdout, _, code := run(t, append([]string{"audit", "verify", "--checkpoint", cpFile}, args...)...)
	require.Equal(t, 0, code, stdout)
	require.Contains(t, stdout, "ok entries=2 ")

	forger, _, stopForger := serve(t, "--database-url", dbURL)
	defer stopForger()
	send(t, "PUT", forger+"/v1/projects/acme/items/a", key, `{"content":"forged"}`)
	send(t, "PUT", base+"/v1/projects/acme/items/b", key, `{"content":"genuine, later"}`)
	for _, extra := range [][]string{nil, {"--checkpoint", cpFile}, {"--rows=false"}} {
		stdout, _, code = run(t, append(append([]string{"audit", "verify"}, extra...), args...)...)
		require.NotEqual(t, 0, code, "%v: %s", extra, stdout)
		require.Contains(t, stdout, "bad seq=3 problem=unsealed", "%v", extra)
	}
}

// TestAuditAdoptSealsWhatWasWrittenWithoutTheKey: entries a server wrote
// without a key have no seal, and verify refuses them until an operator
// with the key adopts them; a fresh database's own entries are adopted by
// the server that made its schema. A database writer who drops the seals
// and has the sealing migration applied again gets nothing adopted: only
// a fresh database is.
func TestAuditAdoptSealsWhatWasWrittenWithoutTheKey(t *testing.T) {
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "audit.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(testAuditKey(t)+"\n"), 0o600))

	fresh := pgtest.Empty(t)
	base, out, stop := serve(t, "--database-url", fresh, "--audit-key-file", keyFile)
	key := keyRE.FindString(out.String())
	stdout, _, code := run(t, "audit", "verify", "--project", "_shared", "--url", base, "--key", key)
	require.Equal(t, 0, code, "a fresh database's _shared entry is adopted by the server that made it: %s", stdout)
	require.Equal(t, 0, stop())

	dbURL := pgtest.NewURL(t)
	base, out, stop = serve(t, "--database-url", dbURL)
	key = keyRE.FindString(out.String())
	send(t, "PUT", base+"/v1/projects/acme", key, `{}`)
	send(t, "PUT", base+"/v1/projects/acme/items/a", key, `{"content":"first"}`)
	require.Equal(t, 0, stop())
	base, _, stop = serve(t, "--database-url", dbURL, "--audit-key-file", keyFile)
	args := []string{"--project", "acme", "--url", base, "--key", key}
	stdout, _, code = run(t, append([]string{"audit", "verify"}, args...)...)
	require.NotEqual(t, 0, code, stdout)
	require.Contains(t, stdout, "bad seq=1 problem=unsealed")

	cpFile := filepath.Join(t.TempDir(), "cp.json")
	_, errs, code := run(t, append([]string{"audit", "checkpoint", "--out", cpFile}, args...)...)
	require.Equal(t, 0, code, errs)

	stdout, errs, code = run(t, "audit", "adopt", "--database-url", dbURL, "--audit-key-file", keyFile)
	require.Equal(t, 0, code, errs)
	require.Contains(t, stdout, `adopted chain "acme" through seq 2`)
	stdout, _, code = run(t, append([]string{"audit", "verify"}, args...)...)
	require.Equal(t, 0, code, stdout)
	require.Contains(t, stdout, "ok entries=2 ")
	stdout, _, code = run(t, append([]string{"audit", "verify", "--checkpoint", cpFile}, args...)...)
	require.Equal(t, 0, code, "a checkpoint taken before the adoption agrees with it: %s", stdout)
	stdout, _, code = run(t, "audit", "adopt", "--database-url", dbURL, "--audit-key-file", keyFile)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "every chain with entries has a seal already")
	require.Equal(t, 0, stop())

	// The attack: the seals dropped, the sealing migration made pending
	// again, an entry rewritten with every hash recomputed, the server
	// restarted (it migrates).
	tamper(t, dbURL, `DROP TABLE audit_seals; DELETE FROM goose_db_version WHERE version_id >= 26;
		UPDATE item_versions SET title = 'rewritten' WHERE key = 'a'`)
	rehashItem(t, dbURL, "acme", "a@1")
	base, _, stop = serve(t, "--database-url", dbURL, "--audit-key-file", keyFile)
	defer stop()
	args = []string{"--project", "acme", "--url", base, "--key", key}
	stdout, _, code = run(t, append([]string{"audit", "verify"}, args...)...)
	require.NotEqual(t, 0, code, "nothing adopted the rewritten chain: %s", stdout)
	require.Contains(t, stdout, "bad seq=1 problem=unsealed")
}

// TestAuditVerifyCatchesAnEntryPastTheHead: an entry put past the chain's
// head (the server's check of it stops its walk there) hides no other
// change from `contextd audit verify`: the server's extra_entry is
// reported, with a checkpoint or without.
func TestAuditVerifyCatchesAnEntryPastTheHead(t *testing.T) {
	t.Parallel()
	dbURL, _, _, args, cpFile := checkpointedChain(t)

	tamper(t, dbURL, `UPDATE projects SET description = 'EVIL' WHERE project = 'acme';
		INSERT INTO audit_entries VALUES ('acme', 999999999999, 'project', 'acme', '\x7b7d', sha256('\x7b7d'), sha256('\x00'))`)
	for _, extra := range [][]string{nil, {"--checkpoint", cpFile}} {
		stdout, _, code := run(t, append(append([]string{"audit", "verify"}, extra...), args...)...)
		require.NotEqual(t, 0, code, "%v: %s", extra, stdout)
		require.Contains(t, stdout, "problem=extra_entry", "%v", extra)
	}
	tamper(t, dbURL, `DELETE FROM audit_entries WHERE seq = 999999999999`)
	stdout, _, code := run(t, append([]string{"audit", "verify", "--checkpoint", cpFile}, args...)...)
	require.NotEqual(t, 0, code, stdout)
	require.Contains(t, stdout, "problem=state_mismatch")
}

// TestAgentsCreateSealsWithTheKey: an agent made straight in the database
// gets its global-chain entry sealed when the command has the audit key,
// and says so when it has none (verify then reports the chain unsealed).
func TestAgentsCreateSealsWithTheKey(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	keyFile := filepath.Join(t.TempDir(), "audit.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(testAuditKey(t)+"\n"), 0o600))
	out, errs, code := run(t, "agents", "create", "--database-url", dbURL, "--audit-key-file", keyFile, "--name", "root", "--role", "admin", "--permission", "admin", "--projects", "*", "--json")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, errs, "not sealed")
	var made struct{ Key string }
	require.NoError(t, json.Unmarshal([]byte(out), &made))
	key := made.Key
	base, _, stop := serve(t, "--database-url", dbURL, "--audit-key-file", keyFile)
	defer stop()
	stdout, errs, code := run(t, "audit", "verify", "--global", "--url", base, "--key", key)
	require.Equal(t, 0, code, stdout+errs)
	require.Contains(t, stdout, "ok entries=1 ")

	_, errs, code = run(t, "agents", "create", "--database-url", dbURL, "--name", "u", "--role", "r", "--permission", "edit", "--projects", "*")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "not sealed")
	stdout, _, code = run(t, "audit", "verify", "--global", "--url", base, "--key", key)
	require.NotEqual(t, 0, code, stdout)
	require.Contains(t, stdout, "bad seq=2 problem=unsealed")
}

// TestSharedRowIsAdoptedOnAMigratedDatabase: a database migrated by
// another process (`contextd migrate up` as the owner, then `serve` with
// the key) has one unsealed entry, the _shared row's, and the server
// seals it; a _shared chain with more than that (an item written without
// the key) is left unsealed.
func TestSharedRowIsAdoptedOnAMigratedDatabase(t *testing.T) {
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "audit.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(testAuditKey(t)+"\n"), 0o600))
	dbURL := pgtest.NewURL(t)
	base, out, stop := serve(t, "--database-url", dbURL, "--audit-key-file", keyFile)
	key := keyRE.FindString(out.String())
	stdout, _, code := run(t, "audit", "verify", "--project", "_shared", "--url", base, "--key", key)
	require.Equal(t, 0, code, stdout)
	require.Contains(t, stdout, "ok entries=1 ")
	require.Equal(t, 0, stop())

	other := pgtest.NewURL(t)
	base, out, stop = serve(t, "--database-url", other)
	key = keyRE.FindString(out.String())
	send(t, "PUT", base+"/v1/projects/_shared/items/tone", key, `{"content":"be brief"}`)
	require.Equal(t, 0, stop())
	base, _, stop = serve(t, "--database-url", other, "--audit-key-file", keyFile)
	defer stop()
	stdout, _, code = run(t, "audit", "verify", "--project", "_shared", "--url", base, "--key", key)
	require.NotEqual(t, 0, code, stdout)
	require.Contains(t, stdout, "bad seq=1 problem=unsealed")
}
