package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReworkPacketSaysWhy: a packet naming a rejected handoff as its
// predecessor says why it was rejected and by whom, and carries everything
// the handoff handed over — patches, reports, artifacts, evidence, open
// questions, the suggested next step, the base commit and tree — in every
// format, inside the predecessor's span.
func TestReworkPacketSaysWhy(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	h := e.handoff(a.implementer, manifest("T-loop", "critic",
		"candidate_tree_hash", "tree9f",
		"deliverables", map[string]any{"patches": []string{"refund-rounding.diff"}, "reports": []string{"bench.txt"},
			"artifacts": []any{map[string]any{"name": "refund.go", "kind": "patch", "artifact_ref": "git:abc", "content_snippet": "return round(x)"}}},
		"verification_evidence", map[string]any{"critic_verdicts": []any{map[string]any{"critic": "lint", "verdict": "PASS", "summary": "clean"}}},
		"open_questions", []string{"Should negative amounts round toward zero?"},
		"suggested_next_step", map[string]any{"step_id": "review", "action": "Check the patch against the refund spec."}))
	rj := e.do("POST", "/v1/projects/acme/handoffs/"+h+"/reject", a.critic, map[string]any{"reason": "no test for negative amounts"})
	require.Equal(t, 200, rj.status, rj.text)
	critic := e.do("GET", "/v1/projects/acme/handoffs/"+h, a.critic, nil)
	require.Equal(t, 200, critic.status)

	md := e.do("POST", "/v1/projects/acme/packets", a.implementer, map[string]any{"target_role": "implementer", "predecessors": []string{h}})
	require.Equal(t, 201, md.status, md.text)
	text := md.json["rendered"].(string)
	for _, want := range []string{
		"### Predecessor: implementer → critic, " + h + " (rejected)\nRejected by critic (agt_",
		"): no test for negative amounts\n",
		"Base commit: abc123; candidate tree: tree9f\n",
		"Patches:\n  - refund-rounding.diff\n",
		"Reports:\n  - bench.txt\n",
		"  - `refund.go` [patch] (git:abc)\n",
		"Verdicts:\n  - lint: PASS — clean\n",
		"Open questions:\n  - Should negative amounts round toward zero?\n",
		"Suggested next step: review — Check the patch against the refund spec.\n",
	} {
		require.Contains(t, text, want)
	}
	// All of it inside the predecessor's span, counted as its tokens.
	var span map[string]any
	for _, rec := range e.do("GET", "/v1/projects/acme/packets/"+md.json["packet_id"].(string)+"/records", a.implementer, nil).list() {
		if rec["subject"] == "handoff" {
			span = rec["span"].(map[string]any)
			require.Greater(t, rec["tokens"].(float64), 40.0)
		}
	}
	require.NotNil(t, span)
	inSpan := text[int(span["start"].(float64)):int(span["end"].(float64))]
	require.Contains(t, inSpan, "no test for negative amounts")
	require.Contains(t, inSpan, "Suggested next step")

	js := e.do("POST", "/v1/projects/acme/packets", a.implementer, map[string]any{"target_role": "implementer", "predecessors": []string{h}, "format": "json"})
	require.Equal(t, 201, js.status, js.text)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(js.json["rendered"].(string)), &doc))
	blob, _ := json.Marshal(doc)
	for _, want := range []string{`"reason":"no test for negative amounts"`, `"reason_by_role":"critic"`, `"patches":["refund-rounding.diff"]`,
		`"reports":["bench.txt"]`, `"open_questions":["Should negative amounts round toward zero?"]`, `"base_commit":"abc123"`,
		`"candidate_tree_hash":"tree9f"`, `"suggested_next_step":{"action":"Check the patch against the refund spec.","step_id":"review"}`} {
		require.Contains(t, string(blob), want)
	}
	bl := e.do("POST", "/v1/projects/acme/packets", a.implementer, map[string]any{"target_role": "implementer", "predecessors": []string{h}, "format": "blocks"})
	require.True(t, strings.Contains(bl.json["rendered"].(string), "no test for negative amounts"))
	// Replays give the same bytes.
	for _, p := range []resp{md, js, bl} {
		rp := e.do("POST", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/replay", a.implementer, nil)
		require.Equal(t, true, rp.json["identical"], rp.text)
	}
}

// TestAuthorHearsBack: the author of a handoff listens to the answers to
// its role's handoffs (source_role), with the same ids and resumption as a
// target's inbox; another role's answers are an admin's only.
func TestAuthorHearsBack(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	ch, stop := openStream(t, e.url, a.implementer, "?source_role=implementer", "")
	time.Sleep(200 * time.Millisecond)
	mine := e.handoff(a.implementer, manifest("T-back", "critic"))
	e.handoff(a.planner, manifest("T-back", "implementer")) // another author's: not in this stream
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+mine+"/reject", a.critic, map[string]any{"reason": "needs a test"}).status)
	created, rejected := next(t, ch), next(t, ch)
	stop()
	require.Equal(t, []string{"created", "rejected"}, []string{created.event, rejected.event})
	require.Contains(t, rejected.data, mine)
	require.Contains(t, rejected.data, `"reason":"needs a test"`)
	require.Contains(t, rejected.data, `"actor_role":"critic"`)

	// Resumed from the last id: what came while nobody listened, only that.
	rework := e.handoff(a.implementer, manifest("T-back", "critic", "rework_of", mine))
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+rework+"/accept", a.critic, nil).status)
	ch, stop = openStream(t, e.url, a.implementer, "?source_role=implementer", rejected.id)
	defer stop()
	ev1, ev2 := next(t, ch), next(t, ch)
	require.Equal(t, []string{"created", "accepted"}, []string{ev1.event, ev2.event})
	require.Contains(t, ev2.data, rework)
	select {
	case extra := <-ch:
		t.Fatalf("unexpected event %+v", extra)
	case <-time.After(300 * time.Millisecond):
	}

	require.Equal(t, 403, e.do("GET", "/v1/projects/acme/handoffs/events?source_role=planner", a.implementer, nil).status)
	adm, stopAdm := openStream(t, e.url, e.admin, "?source_role=planner", "")
	defer stopAdm()
	time.Sleep(200 * time.Millisecond)
	id := e.handoff(a.planner, manifest("T-adm", "critic"))
	require.Contains(t, next(t, adm).data, id)
}

// TestHandoffChecksBeforeWriting: rework_of names a rejected or superseded
// handoff of the task; target.permission is at most the author's own; a
// packet's predecessors are of its task; a handoff to a role nobody holds
// is made, with a warning.
func TestHandoffChecksBeforeWriting(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	pending := e.handoff(a.implementer, manifest("T-c", "critic"))
	accepted := e.handoff(a.implementer, manifest("T-c", "verifier"))
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+accepted+"/accept", a.verifier, nil).status)
	other := e.handoff(a.implementer, manifest("T-other", "critic"))

	count := func() int { return len(e.do("GET", "/v1/projects/acme/handoffs?limit=1000", e.admin, nil).list()) }
	before := count()
	for _, c := range []struct {
		name string
		m    map[string]any
		want int
		ptr  string
	}{
		{"accepted", manifest("T-c", "critic", "rework_of", accepted), 422, "/rework_of"},
		{"pending, another role", manifest("T-c", "verifier", "rework_of", pending), 422, "/rework_of"},
		{"another task", manifest("T-c", "critic", "rework_of", other), 422, "/rework_of"},
		{"unknown", manifest("T-c", "critic", "rework_of", "hnd_nope"), 422, "/rework_of"},
		{"permission", manifest("T-c", "critic", "target", map[string]any{"role": "critic", "permission": "admin"}), 403, ""},
	} {
		r := e.do("POST", "/v1/projects/acme/handoffs", a.implementer, c.m)
		require.Equal(t, c.want, r.status, "%s: %s", c.name, r.text)
		if c.ptr != "" {
			require.Equal(t, []string{c.ptr}, r.pointers(), c.name)
		}
	}
	require.Equal(t, before, count(), "nothing written")
	// A rejected one, or the pending one this create supersedes, may be reworked.
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+pending+"/reject", a.critic, map[string]any{"reason": "r"}).status)
	e.handoff(a.implementer, manifest("T-c", "critic", "rework_of", pending))
	e.handoff(a.implementer, manifest("T-c", "critic", "target", map[string]any{"role": "critic", "permission": "edit"}))

	// Predecessors of another task than the packet's.
	r := e.do("POST", "/v1/projects/acme/packets", a.critic, map[string]any{"target_role": "critic", "predecessors": []string{pending, other},
		"task": map[string]any{"task_id": "T-c"}})
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"/predecessors/1"}, r.pointers())
	require.Equal(t, 201, e.do("POST", "/v1/projects/acme/packets", a.critic, map[string]any{"target_role": "critic", "predecessors": []string{pending, other}}).status,
		"without a task_id any handoff of the project may be named")

	// Nobody holds the role: made, and said.
	w := e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest("T-c", "auditor"))
	require.Equal(t, 201, w.status, w.text)
	ws := w.json["warnings"].([]any)
	require.Len(t, ws, 1)
	require.Equal(t, "no_agent_for_role", ws[0].(map[string]any)["code"])
	require.Contains(t, ws[0].(map[string]any)["detail"], "auditor")
	n := e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest("T-c2", "critic"))
	require.NotContains(t, n.json, "warnings")
	require.NotContains(t, e.do("GET", "/v1/projects/acme/handoffs/"+w.json["id"].(string), e.admin, nil).json, "warnings", "a create's answer only")
}
