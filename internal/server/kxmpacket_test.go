package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestKXMPacket: format kxm answers KXM's formal context packet v2 as the
// rendered text: packetId and generatedAt are the packet's own id and
// time, estimatedTokens is budget.used, predecessors carry KXM's statuses,
// every entry's span is its own element of the document, and a replay
// gives the same bytes.
func TestKXMPacket(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	planner := e.agent("planner", auth.Edit, "acme")
	implementer := e.agent("implementer", auth.Edit, "acme")
	accepted := e.handoff(planner, manifest("T-1", "implementer", "summary", "Plan ready."))
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+accepted+"/accept", implementer, nil).status)
	withdrawn := e.handoff(planner, manifest("T-1", "implementer"))
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+withdrawn+"/withdraw", planner, map[string]any{"reason": "wrong branch"}).status)
	pending := e.handoff(planner, manifest("T-1", "implementer"))

	body := packetRequest("implementer")
	body["format"] = "kxm"
	body["predecessors"] = []string{accepted, withdrawn, pending}
	r := e.do("POST", "/v1/projects/acme/packets", implementer, body)
	require.Equal(t, 201, r.status, r.text)
	rendered := r.json["rendered"].(string)
	dec := json.NewDecoder(strings.NewReader(rendered))
	dec.UseNumber()
	var doc map[string]any
	require.NoError(t, dec.Decode(&doc), rendered)
	require.False(t, dec.More(), "one document")

	require.Equal(t, "kxm.context-packet.v2", doc["schema"])
	require.Equal(t, r.json["packet_id"], doc["packetId"], "the packet's own id")
	created, err := time.Parse(time.RFC3339Nano, r.json["created_at"].(string))
	require.NoError(t, err)
	generated, err := time.Parse(time.RFC3339Nano, doc["generatedAt"].(string))
	require.NoError(t, err)
	require.True(t, created.Equal(generated), "generatedAt %s is the packet's time %s", generated, created)
	require.True(t, strings.HasSuffix(doc["generatedAt"].(string), "Z"))

	budget := r.json["budget"].(map[string]any)
	kb := doc["budget"].(map[string]any)
	require.Equal(t, json.Number(jsonInt(budget["used"])), kb["estimatedTokens"], "estimatedTokens is budget.used")
	require.Equal(t, json.Number(jsonInt(budget["allocated"])), kb["allocatedTokens"])

	task := doc["task"].(map[string]any)
	require.Equal(t, "T-1", task["taskId"])
	require.Equal(t, "Fix the refund bug.", task["objective"])
	var statuses []any
	for _, p := range doc["predecessors"].([]any) {
		statuses = append(statuses, p.(map[string]any)["status"])
	}
	require.Equal(t, []any{"passed", "failed", "warning"}, statuses, "accepted, withdrawn, pending")
	withdrawnSummary := doc["predecessors"].([]any)[1].(map[string]any)["summary"].(string)
	require.Contains(t, withdrawnSummary, "wrong branch")
	require.Contains(t, withdrawnSummary, "by planner (", "who gave the reason")
	require.Contains(t, withdrawnSummary, "Base commit: abc123", "the handoff loop's members ride in the summary")

	env := doc["environment"].(map[string]any)
	for _, k := range []string{"sharedDefaults", "projectKnowledge", "currentState", "contradictions", "activeSkills"} {
		require.Contains(t, env, k)
	}
	require.Len(t, env["contradictions"].([]any), 1)
	require.Contains(t, env["contradictions"].([]any)[0].(map[string]any)["summary"], `kept: "`, "the contradiction names the facts")

	// Every entry with a span: its text is one JSON value of the document,
	// an item's element naming its key, a request part its member.
	n := 0
	for _, s := range r.json["sections"].([]any) {
		for _, en := range s.(map[string]any)["entries"].([]any) {
			entry := en.(map[string]any)
			span := entry["span"].(map[string]any)
			part := rendered[int(span["start"].(float64)):int(span["end"].(float64))]
			n++
			switch entry["subject"] {
			case "item":
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(part), &m), "item %s: %s", entry["key"], part)
				require.Equal(t, entry["key"], m["id"], part)
			case "handoff":
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(part), &m), part)
				require.Contains(t, []any{"passed", "failed", "warning"}, m["status"])
			default:
				require.True(t, strings.HasPrefix(part, `"`+map[string]string{"task": "task", "criteria": "acceptanceCriteria"}[entry["key"].(string)]+`":`) ||
					entry["key"] == "agent_context", "request part %s: %s", entry["key"], part)
			}
		}
	}
	require.Greater(t, n, 8)

	// The stored packet and its replay are the same bytes.
	id := r.json["packet_id"].(string)
	g := e.do("GET", "/v1/projects/acme/packets/"+id, implementer, nil)
	require.Equal(t, rendered, g.json["rendered"])
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/refund.rules", e.admin, map[string]any{"content": "Changed later.", "trigger": map[string]any{"keywords": []string{"refund"}}}).status)
	rp := e.do("POST", "/v1/projects/acme/packets/"+id+"/replay", implementer, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, true, rp.json["identical"], rp.text)
	require.Equal(t, r.json["rendered_sha256"], rp.json["rendered_sha256_now"])
	require.Empty(t, rp.json["differences"])

	// A second packet has its own id and time in its text.
	r2 := e.do("POST", "/v1/projects/acme/packets", implementer, body)
	require.Equal(t, 201, r2.status, r2.text)
	require.Contains(t, r2.json["rendered"], `"packetId":"`+r2.json["packet_id"].(string)+`"`)
	require.NotEqual(t, id, r2.json["packet_id"])
}

// TestKXMPacketTightBudget: with a budget that leaves entries out, the
// kxm text still counts itself exactly and says what the budget left out.
func TestKXMPacketTightBudget(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	implementer := e.agent("implementer", auth.ReadOnly, "acme")
	body := packetRequest("implementer")
	body["format"] = "kxm"
	body["token_budget"] = 700
	r := e.do("POST", "/v1/projects/acme/packets", implementer, body)
	require.Equal(t, 201, r.status, r.text)
	var doc struct {
		Budget struct {
			EstimatedTokens int      `json:"estimatedTokens"`
			UnresolvedGaps  []string `json:"unresolvedGaps"`
		} `json:"budget"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.json["rendered"].(string)), &doc))
	budget := r.json["budget"].(map[string]any)
	require.Equal(t, int(budget["used"].(float64)), doc.Budget.EstimatedTokens)
	require.LessOrEqual(t, doc.Budget.EstimatedTokens, 700)
	gaps := budget["unresolved_gaps"].([]any)
	require.NotEmpty(t, gaps, r.text)
	// The document names what the budget left out, as the answer lists
	// it (by layer, key and version), so it stands alone.
	lines := doc.Budget.UnresolvedGaps
	require.NotEmpty(t, lines)
	for i, line := range lines {
		g := gaps[i].(map[string]any)
		require.Equal(t, "budget", g["reason"])
		require.True(t, strings.HasPrefix(line, "budget: "), line)
		require.True(t, strings.HasSuffix(line, fmt.Sprintf("/%s v%d", g["key"], int(g["version"].(float64)))), "%s names %v", line, g)
	}
	require.NotContains(t, strings.Join(lines, "\n"), "unresolved_gaps", "the document does not send its reader elsewhere")
	rp := e.do("POST", "/v1/projects/acme/packets/"+r.json["packet_id"].(string)+"/replay", implementer, nil)
	require.Equal(t, true, rp.json["identical"], rp.text)
}

func jsonInt(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
