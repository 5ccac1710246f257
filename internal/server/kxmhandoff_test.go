package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// kxmManifest is the fixture of internal/kxm (a manifest as KXM's
// buildHandoffManifest emits it) with source.agentId set to agentID and the
// taskId to task.
func kxmManifest(t *testing.T, agentID, task string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "kxm", "testdata", "kxm-handoff-manifest.json"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	m["source"].(map[string]any)["agentId"] = agentID
	m["taskId"] = task
	return m
}

// agentWithID creates an agent and returns its id and key.
func (e *env) agentWithID(role string, perm auth.Permission, projects ...string) (string, string) {
	e.t.Helper()
	a, key, err := e.agents.CreateLocal(context.Background(), auth.CreateParams{Name: role + "-kxm", Role: role, Permission: perm, Projects: projects})
	require.NoError(e.t, err)
	return a.ID, key
}

func warningCodes(r resp) []string {
	ws, _ := r.json["warnings"].([]any)
	var out []string
	for _, w := range ws {
		out = append(out, w.(map[string]any)["code"].(string))
	}
	return out
}

// asKXM reads a handoff with ?format=kxm and checks it is the manifest
// sent, but for what contextd sets: its id, its status and its time.
func asKXM(t *testing.T, e *env, key, id, status string, sent map[string]any) {
	t.Helper()
	r := e.do("GET", "/v1/projects/acme/handoffs/"+id+"?format=kxm", key, nil)
	require.Equal(t, 200, r.status, r.text)
	detail := e.do("GET", "/v1/projects/acme/handoffs/"+id, key, nil)
	require.Equal(t, 200, detail.status, detail.text)
	stored, err := time.Parse(time.RFC3339Nano, detail.json["created_at"].(string))
	require.NoError(t, err)
	got, err := time.Parse(time.RFC3339Nano, r.json["createdAt"].(string))
	require.NoError(t, err)
	require.True(t, stored.Equal(got), "createdAt is when contextd stored it: %s, %s", stored, got)
	require.Regexp(t, `Z$`, r.json["createdAt"])
	want := map[string]any{}
	for k, v := range sent {
		want[k] = v
	}
	want["handoffId"], want["status"], want["createdAt"] = id, status, r.json["createdAt"]
	require.Equal(t, want, r.json)
}

// TestHandoffKXMManifestRoundTrip: a manifest as KXM emits it is a create;
// ?format=kxm gives it back, with contextd's id and the status contextd
// holds as it moves (superseded, accepted, rejected).
func TestHandoffKXMManifestRoundTrip(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	implID, impl := e.agentWithID("implementer", auth.Edit, "acme")
	sent := kxmManifest(t, implID, "KXM-412")

	r := e.do("POST", "/v1/projects/acme/handoffs", impl, sent)
	require.Equal(t, 201, r.status, r.text)
	first := r.json["id"].(string)
	require.NotEqual(t, sent["handoffId"], first, "contextd assigns the id")
	require.Contains(t, warningCodes(r), "kxm_handoff_id_replaced")
	require.Equal(t, "pending", r.json["status"])
	require.Equal(t, "KXM-412", r.json["task_id"])
	require.Equal(t, "claude-code", r.json["source"].(map[string]any)["harness"])
	require.Equal(t, "artifacts/run_8d21f0c4a9b3/witness.log", r.json["deliverables"].(map[string]any)["artifacts"].([]any)[0].(map[string]any)["artifact_ref"])
	asKXM(t, e, a.critic, first, "pending", sent)

	// The same task to the same role again: the first is superseded.
	second := e.handoff(impl, sent)
	asKXM(t, e, a.critic, first, "superseded", sent)
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+second+"/accept", a.criticRO, nil).status)
	asKXM(t, e, impl, second, "accepted", sent)

	other := kxmManifest(t, implID, "KXM-413")
	third := e.handoff(impl, other)
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+third+"/reject", a.critic, map[string]any{"reason": "no test"}).status)
	asKXM(t, e, impl, third, "rejected", other)

	// A rework names the rejected handoff by contextd's id.
	rework := kxmManifest(t, implID, "KXM-413")
	rework["reworkOf"] = third
	fourth := e.handoff(impl, rework)
	asKXM(t, e, impl, fourth, "pending", rework)

	// The default format is still the HandoffDetail; an unknown one is 422.
	d := e.do("GET", "/v1/projects/acme/handoffs/"+first+"?format=contextd", impl, nil)
	require.Equal(t, 200, d.status)
	require.Contains(t, d.json, "events")
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/handoffs/"+first+"?format=yaml", impl, nil).status)
}

// TestHandoffKXMManifestSourceAgent: source.agentId is as for any create:
// a non-admin may only name itself, with the same refusal.
func TestHandoffKXMManifestSourceAgent(t *testing.T) {
	t.Parallel()
	e, _ := handoffWorld(t)
	implID, impl := e.agentWithID("implementer", auth.Edit, "acme")
	plannerID, _ := e.agentWithID("planner", auth.Edit, "acme")

	native := e.do("POST", "/v1/projects/acme/handoffs", impl, manifest("T-1", "critic", "source", map[string]any{"agent_id": plannerID}))
	viaKXM := e.do("POST", "/v1/projects/acme/handoffs", impl, kxmManifest(t, plannerID, "T-1"))
	require.Equal(t, 403, native.status, native.text)
	require.Equal(t, native.status, viaKXM.status, viaKXM.text)
	require.Equal(t, native.json["code"], viaKXM.json["code"])
	require.Equal(t, native.json["detail"], viaKXM.json["detail"])

	otherRole := kxmManifest(t, implID, "T-1")
	otherRole["source"].(map[string]any)["role"] = "planner"
	require.Equal(t, 403, e.do("POST", "/v1/projects/acme/handoffs", impl, otherRole).status, "nor another role")

	r := e.do("POST", "/v1/projects/acme/handoffs", e.admin, kxmManifest(t, plannerID, "T-1"))
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, plannerID, r.json["source"].(map[string]any)["agent_id"], "an admin may speak for another agent")
	require.Len(t, e.do("GET", "/v1/projects/acme/handoffs?task_id=T-1", impl, nil).list(), 1, "only the admin's was written")
}

// TestHandoffKXMManifestNeverRefusesItsIDs: handoffId, status and
// createdAt, whatever they hold, never make a create fail.
func TestHandoffKXMManifestNeverRefusesItsIDs(t *testing.T) {
	t.Parallel()
	e, _ := handoffWorld(t)
	implID, impl := e.agentWithID("implementer", auth.Edit, "acme")
	for i, tc := range []struct {
		handoffID, status, createdAt any
		warnings                     []string
	}{
		{"hnd_3f9c2a7be41d4c08", "accepted", "2026-01-14T09:41:27.318Z", []string{"kxm_handoff_id_replaced", "kxm_status_ignored"}},
		{"", "rejected", "yesterday", []string{"kxm_status_ignored"}},
		{42, "withdrawn", 1736847687, []string{"kxm_handoff_id_replaced", "kxm_status_ignored"}},
		{nil, nil, nil, nil},
		{map[string]any{"id": "x"}, []any{"pending"}, true, []string{"kxm_handoff_id_replaced", "kxm_status_ignored"}},
		{"-", "pending", "", []string{"kxm_handoff_id_replaced"}},
	} {
		m := kxmManifest(t, implID, "T-ids")
		m["handoffId"], m["status"], m["createdAt"] = tc.handoffID, tc.status, tc.createdAt
		r := e.do("POST", "/v1/projects/acme/handoffs", impl, m)
		require.Equal(t, 201, r.status, "case %d: %s", i, r.text)
		require.Equal(t, "pending", r.json["status"], "case %d", i)
		codes := warningCodes(r)
		for _, w := range tc.warnings {
			require.Contains(t, codes, w, "case %d", i)
		}
		require.Len(t, codes, len(tc.warnings), "case %d: %v", i, codes)
	}
	m := kxmManifest(t, implID, "T-ids")
	delete(m, "handoffId")
	delete(m, "status")
	delete(m, "createdAt")
	r := e.do("POST", "/v1/projects/acme/handoffs", impl, m)
	require.Equal(t, 201, r.status, "absent: %s", r.text)
}

// TestHandoffKXMManifestErrors: a manifest's problems are problem+json
// with stable codes and JSON Pointers into the manifest as sent.
func TestHandoffKXMManifestErrors(t *testing.T) {
	t.Parallel()
	e, _ := handoffWorld(t)
	implID, impl := e.agentWithID("implementer", auth.Edit, "acme")
	for _, tc := range []struct {
		spoil   func(m map[string]any)
		status  int
		code    string
		pointer string
	}{
		{func(m map[string]any) { delete(m, "taskId") }, 422, "validation_failed", "/taskId"},
		{func(m map[string]any) { m["intent"] = "please" }, 422, "validation_failed", "/intent"},
		{func(m map[string]any) { m["target"].(map[string]any)["permission"] = "root" }, 422, "validation_failed", "/target/permission"},
		{func(m map[string]any) { m["target"].(map[string]any)["role"] = "" }, 422, "validation_failed", "/target/role"},
		{func(m map[string]any) {
			m["verificationEvidence"].(map[string]any)["criticVerdicts"].([]any)[1].(map[string]any)["verdict"] = "MEH"
		}, 422, "validation_failed", "/verificationEvidence/criticVerdicts/1/verdict"},
		{func(m map[string]any) { m["reworkOf"] = "hnd_unknown" }, 422, "validation_failed", "/reworkOf"},
		{func(m map[string]any) { m["schema"] = "kxm.handoff-manifest.v2" }, 422, "validation_failed", "/schema"},
		{func(m map[string]any) { m["summary"] = "contextd's, not KXM's" }, 400, "malformed", "/summary"},
		{func(m map[string]any) { m["source"].(map[string]any)["agent_id"] = implID }, 400, "malformed", "/source/agent_id"},
		{func(m map[string]any) { m["verificationEvidence"].(map[string]any)["witnessExitCode"] = "0" }, 400, "malformed", "/verificationEvidence/witnessExitCode"},
		{func(m map[string]any) { m["deliverables"].(map[string]any)["patches"] = "p.diff" }, 400, "malformed", "/deliverables/patches"},
	} {
		m := kxmManifest(t, implID, "T-err")
		tc.spoil(m)
		r := e.do("POST", "/v1/projects/acme/handoffs", impl, m)
		require.Equal(t, tc.status, r.status, "%s: %s", tc.pointer, r.text)
		require.Equal(t, tc.code, r.json["code"], r.text)
		require.Contains(t, r.pointers(), tc.pointer, r.text)
	}
	m := kxmManifest(t, implID, "T-err")
	m["baseCommit"] = "0123456789012345678901234567890123456789012345678901234567890123x"
	r := e.do("POST", "/v1/projects/acme/handoffs", impl, m)
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"/baseCommit"}, r.pointers(), "over KXM's 64 characters")
	require.Empty(t, e.do("GET", "/v1/projects/acme/handoffs?task_id=T-err", e.admin, nil).list(), "nothing was written")
}
