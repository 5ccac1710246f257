package cli

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSuspects: contextd suspects says a packet without a failure has no
// suspects, and after a failure lists its item with its contrast in
// words; --json is the API's answer.
func TestSuspects(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	require.Equal(t, 201, put(t, r.base+"/v1/projects/acme", r.key, `{}`))
	r.ok("items", "put", "refund.rules", "Refunds over 500 EUR need a manager's approval.", "--always")
	_, e := r.ok("packets", "assemble", "--role", "implementer", "--message", "a refund of 700 EUR")
	id := regexp.MustCompile(`^packet (\S+):`).FindStringSubmatch(e)[1]

	o, _ := r.ok("suspects", id)
	require.Equal(t, "packet "+id+" has no failed or partial outcome: no suspects\n", o)

	r.ok("outcome", id, "--status", "failure")
	o, _ = r.ok("suspects", id)
	require.Regexp(t, `(?m)^SCORE\s+CONFIDENCE\s+ENTRY\s+EVIDENCE$`, o)
	require.Regexp(t, `(?m)^\S+\s+correlational\s+item refund\.rules v1\s+failed 1/1 with, 0/0 without$`, o)

	o, _ = r.ok("suspects", id, "--json")
	var ans struct {
		PacketID string `json:"packet_id"`
		Suspects []struct {
			Key        string `json:"key"`
			Confidence string `json:"confidence"`
		} `json:"suspects"`
	}
	require.NoError(t, json.Unmarshal([]byte(o), &ans), o)
	require.Equal(t, id, ans.PacketID)
	require.NotEmpty(t, ans.Suspects)

	e = r.fail("suspects", "ctxpkt_nosuch")
	require.Contains(t, e, "404")
}
