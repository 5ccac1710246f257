package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// TestWorkflowTimeline runs planner → implementer → critic (reject) →
// implementer (rework) → verifier (accept), each step working from a packet
// that names the handoff before it, and reads the task back as one timeline.
func TestWorkflowTimeline(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/style", e.admin, api.PutItemJSONRequestBody{Content: "Small commits."}).status)
	step := func(key, role, stepID string, preds ...string) string {
		if preds == nil {
			preds = []string{}
		}
		r := e.do("POST", "/v1/projects/acme/packets", key, map[string]any{
			"target_role": role, "predecessors": preds,
			"task": map[string]any{"task_id": "T-flow", "step_id": stepID, "objective": "Fix the refund rounding bug."},
		})
		require.Equal(t, 201, r.status, r.text)
		return r.json["packet_id"].(string)
	}

	p1 := step(a.planner, "planner", "plan")
	h1 := e.handoff(a.planner, manifest("T-flow", "implementer", "intent", "dispatch_fix", "packet_id", p1,
		"summary", "Round half-even in refunds.", "decisions", []string{"Use decimal, not float"}))
	p2 := step(a.implementer, "implementer", "implement", h1)
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+h1+"/accept", a.implementer, nil).status)
	h2 := e.handoff(a.implementer, manifest("T-flow", "critic", "packet_id", p2, "summary", "Patch ready.",
		"deliverables", map[string]any{"patches": []string{"p1.diff"}, "artifacts": []any{map[string]any{"name": "refund.go", "kind": "patch", "artifact_ref": "git:abc", "content_snippet": "return round(x)"}}},
		"verification_evidence", map[string]any{"witness_exit_code": 0, "witness_passed": true}))
	p3 := step(a.critic, "critic", "review", h2)
	r := e.do("GET", "/v1/projects/acme/packets/"+p3, a.critic, nil)
	rendered := r.json["rendered"].(string)
	require.Contains(t, rendered, "## 4. Predecessor Outputs\n### Predecessor: implementer → critic, "+h2+" (pending)\n")
	require.Contains(t, rendered, "  - `refund.go` [patch] (git:abc)\n    ```\n    return round(x)\n    ```\n")
	require.Contains(t, rendered, "Witness: exit 0 (passed)\n")
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+h2+"/reject", a.critic, map[string]any{"reason": "no test for negative amounts"}).status)
	h3 := e.handoff(a.critic, manifest("T-flow", "implementer", "intent", "dispatch_fix", "summary", "Add the negative-amount test.",
		"verification_evidence", map[string]any{"critic_verdicts": []any{map[string]any{"critic": "critic-1", "verdict": "FAIL", "summary": "missing test"}}}))
	p4 := step(a.implementer, "implementer", "rework", h3)
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+h3+"/accept", a.implementer, nil).status)
	h4 := e.handoff(a.implementer, manifest("T-flow", "verifier", "intent", "request_approval", "rework_of", h2, "packet_id", p4, "summary", "Patch with test."))
	p5 := step(a.verifier, "verifier", "verify", h4)
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+h4+"/accept", a.verifier, map[string]any{"reason": "all green"}).status)

	// The predecessor is recorded, explained and attributed.
	w := e.do("GET", "/v1/projects/acme/packets/"+p3+"/why?handoff="+h2, a.critic, nil)
	require.Equal(t, 200, w.status, w.text)
	require.Equal(t, "included", w.json["decision"])
	require.Equal(t, "predecessor", w.json["rule"])
	require.Equal(t, h2, w.json["handoff"].(map[string]any)["id"])
	require.Equal(t, "not_candidate", e.do("GET", "/v1/projects/acme/packets/"+p3+"/why?handoff="+h1, a.critic, nil).json["decision"])
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/packets/"+p3+"/why", a.critic, nil).status)
	at := e.do("POST", "/v1/projects/acme/packets/"+p3+"/attribute", a.critic, map[string]any{"text": "Patch ready."})
	rec := at.json["matches"].([]any)[0].(map[string]any)["records"].([]any)[0].(map[string]any)
	require.Equal(t, "handoff", rec["subject"])
	require.Equal(t, h2, rec["key"])
	// Replay still renders the predecessor as it was (pending), though it is rejected now.
	rp := e.do("POST", "/v1/projects/acme/packets/"+p3+"/replay", a.critic, nil)
	require.Equal(t, true, rp.json["identical"], rp.text)
	// The handoff knows where it came from and who used it.
	d := e.do("GET", "/v1/projects/acme/handoffs/"+h2, a.critic, nil)
	require.Equal(t, p2, d.json["packet_id"])
	require.Equal(t, p3, d.json["used_by_packets"].([]any)[0].(map[string]any)["packet_id"])
	require.Equal(t, h4, d.json["rework_chain"].(map[string]any)["descendants"].([]any)[0].(map[string]any)["id"])

	// The whole task, oldest first.
	tl := e.do("GET", "/v1/projects/acme/tasks/T-flow/history", a.planner, nil)
	require.Equal(t, 200, tl.status, tl.text)
	var got []string
	for _, en := range tl.json["entries"].([]any) {
		m := en.(map[string]any)
		if m["type"] == "packet" {
			got = append(got, "packet:"+m["role"].(string)+":"+m["step_id"].(string))
			continue
		}
		got = append(got, m["event"].(string)+":"+m["source_role"].(string)+"→"+m["target_role"].(string)+" by "+m["role"].(string))
	}
	require.Equal(t, []string{
		"packet:planner:plan",
		"created:planner→implementer by planner",
		"packet:implementer:implement",
		"accepted:planner→implementer by implementer",
		"created:implementer→critic by implementer",
		"packet:critic:review",
		"rejected:implementer→critic by critic",
		"created:critic→implementer by critic",
		"packet:implementer:rework",
		"accepted:critic→implementer by implementer",
		"created:implementer→verifier by implementer",
		"packet:verifier:verify",
		"accepted:implementer→verifier by verifier",
	}, got)
	for _, en := range tl.json["entries"].([]any) {
		m := en.(map[string]any)
		require.NotEmpty(t, m["time"])
		require.True(t, strings.HasPrefix(m["agent"].(string), "agt_"))
	}
	_ = p5
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/tasks/T-none/history", a.planner, nil).status)
}
