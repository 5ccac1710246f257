package cli

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLedger: contextd ledger lists the project's items by failure rate
// with their figures, pages with --cursor, and with a key shows the item
// per version; --json is the API's answer.
func TestLedger(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	require.Equal(t, 201, put(t, r.base+"/v1/projects/acme", r.key, `{}`))
	r.ok("items", "put", "refund.rules", "Refunds over 500 EUR need a manager's approval.", "--always")
	r.ok("items", "put", "tone", "Answer in two sentences at most.", "--always")
	_, e := r.ok("packets", "assemble", "--role", "implementer", "--message", "a refund of 700 EUR")
	id := regexp.MustCompile(`^packet (\S+):`).FindStringSubmatch(e)[1]
	r.ok("outcome", id, "--status", "failure")

	o, _ := r.ok("ledger")
	require.Regexp(t, `(?m)^ITEM\s+OFFERED\s+INCLUDED\s+TOKENS\s+SUCCESS\s+FAILURE\s+PARTIAL\s+USED\s+FAILURE RATE\s+EXCLUDED BY$`, o)
	require.Regexp(t, `(?m)^refund\.rules\s+1\s+1\s+\d+\s+0\s+1\s+0\s+0\s+1\.00\s*$`, o)

	o, _ = r.ok("ledger", "--sort", "tokens", "--limit", "1")
	m := regexp.MustCompile(`(?m)^more: --cursor (\S+)$`).FindStringSubmatch(o)
	require.NotNil(t, m, o)
	o2, _ := r.ok("ledger", "--sort", "tokens", "--limit", "1", "--cursor", m[1])
	require.NotContains(t, o2, "more:")
	require.Equal(t, 2, len(regexp.MustCompile(`(?m)^(refund\.rules|tone)\s`).FindAllString(o+o2, -1)), o+o2)

	o, _ = r.ok("ledger", "refund.rules")
	require.Regexp(t, `(?m)^v1\s+1\s+1\s+\d+\s+0\s+1\s+0\s+0\s+1\.00\s*$`, o)
	require.Regexp(t, `(?m)^all\s+1\s+1\s+`, o)

	o, _ = r.ok("ledger", "refund.rules", "--json")
	var ans struct {
		Key      string `json:"key"`
		Versions []struct {
			Version  int `json:"version"`
			Included int `json:"included"`
		} `json:"versions"`
	}
	require.NoError(t, json.Unmarshal([]byte(o), &ans), o)
	require.Equal(t, "refund.rules", ans.Key)
	require.Len(t, ans.Versions, 1)
	require.Equal(t, 1, ans.Versions[0].Included)

	e = r.fail("ledger", "--sort", "newest")
	require.Contains(t, e, "sort")
}
