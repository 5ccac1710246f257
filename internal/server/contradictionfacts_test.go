package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// TestContradictionLineNamesTheFacts: the line under Active
// Contradictions quotes the winner's and the loser's content (cut at 120
// characters), as KXM prints the losing fact; it is budgeted, the loser's
// record carries its tokens and span, and the packet replays to the same
// bytes.
func TestContradictionLineNamesTheFacts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	long := "Refunds are allowed within 14 days of delivery, " + strings.Repeat("provided the receipt is kept, ", 6)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/window", e.admin, map[string]any{"content": "Refunds within 30 days.", "kind": "state", "state_key": "refund.window", "authority": "instruction", "source": "human"}).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/window-old", e.admin, map[string]any{"content": long, "kind": "state", "state_key": "refund.window"}).status)
	p := e.do("POST", "/v1/projects/acme/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "planner"})
	require.Equal(t, 201, p.status, p.text)
	text := p.json["rendered"].(string)
	var loser map[string]any
	for _, r := range e.do("GET", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/records", e.admin, nil).list() {
		if r["key"] == "window-old" {
			loser = r
		}
	}
	require.Equal(t, "contradicted", loser["reason"])
	span := loser["span"].(map[string]any)
	line := text[int(span["start"].(float64)):int(span["end"].(float64))]
	cut := []rune(strings.Join(strings.Fields(long), " "))[:120]
	require.Equal(t, `- ⚠️ state "refund.window": kept: "Refunds within 30 days." (instruction) over "`+string(cut)+"…\" (evidence) [`window` v1 over `window-old` v1]\n", line)
	require.Greater(t, loser["tokens"].(float64), 20.0, "the loser's record carries the line's tokens")
	rp := e.do("POST", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/replay", e.admin, nil)
	require.Equal(t, true, rp.json["identical"], rp.text)

	// A budget with room for the winner but not the line: the fact goes
	// in, the pair is not listed, the loser's record still says why.
	tight := e.do("POST", "/v1/projects/acme/packets", e.admin, map[string]any{"target_role": "planner", "token_budget": int(p.json["budget"].(map[string]any)["used"].(float64)) - 5})
	require.Equal(t, 201, tight.status, tight.text)
	require.Contains(t, tight.json["rendered"], "Refunds within 30 days.")
	require.NotContains(t, tight.json["rendered"], "14 days")
}
