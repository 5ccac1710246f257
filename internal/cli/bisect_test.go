package cli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBisectFindsThePlantedItem: against a running server, a packet of ten
// items fails a script whenever one planted item is present; bisect finds
// exactly that item within --max-runs, names the ablation that proves it
// and the failing original, and records every run's outcome (source test)
// on the packet it ran. A second bisect (--json) asks for the same
// ablations in the same order. A packet that succeeds has nothing to find
// (exit 1); a usage error is exit 2; --help has an example.
func TestBisectFindsThePlantedItem(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	require.Equal(t, 201, put(t, r.base+"/v1/projects/acme", r.key, `{}`))
	for i := range 10 {
		content := fmt.Sprintf("Rule %d: answer customers within %d days.", i, i+1)
		if i == 6 {
			content = "Rule 6: PLANTED refunds are paid in cash."
		}
		r.ok("items", "put", fmt.Sprintf("rule.%d", i), content, "--always")
	}
	_, e := r.ok("packets", "assemble", "--role", "implementer")
	id := regexp.MustCompile(`^packet (\S+):`).FindStringSubmatch(e)[1]
	const script = "grep -q PLANTED && exit 1 || exit 0"

	o, e := r.ok("bisect", "--packet", id, "--run", script, "--max-runs", "32")
	m := regexp.MustCompile(`(?m)^suspect (\S+) \(item v1\): proved by (ctxpkt_\S+) \(success\) against (\S+) \(failure\)$`).FindAllStringSubmatch(o, -1)
	require.Len(t, m, 1, o)
	require.Equal(t, "rule.6", m[0][1])
	require.Equal(t, id, m[0][3])
	proof := m[0][2]
	require.Contains(t, o, "1-minimal")
	require.Contains(t, e, "bisect: run 1 of 32: "+id+" without 0 of 10 entries: failure (exit 1)")

	ablation := send(t, "GET", r.base+"/v1/projects/acme/packets/"+proof, r.key, "")
	require.Equal(t, id, ablation["ablation_of"])
	require.NotContains(t, ablation["rendered"], "PLANTED")
	require.Contains(t, ablation["rendered"], "Rule 5:")
	for pkt, status := range map[string]string{id: "failure", proof: "success"} {
		outs := send(t, "GET", r.base+"/v1/projects/acme/packets/"+pkt+"/outcomes", r.key, "")["data"].([]any)
		require.Len(t, outs, 1, pkt)
		out := outs[0].(map[string]any)
		require.Equal(t, "test", out["source"])
		require.Equal(t, status, out["status"])
		require.Equal(t, "bisect", out["label"])
	}

	o, _ = r.ok("bisect", "--packet", id, "--run", script, "--json")
	var rep bisectReport
	require.NoError(t, json.Unmarshal([]byte(o), &rep))
	require.True(t, rep.Found)
	require.True(t, rep.Minimal)
	require.Equal(t, 10, rep.Entries)
	require.LessOrEqual(t, rep.Runs, 32)
	require.Len(t, rep.Suspects, 1)
	require.Equal(t, "rule.6", rep.Suspects[0].Key)
	require.Equal(t, id, rep.Suspects[0].Original)
	require.Equal(t, rep.ProvedBy, rep.Suspects[0].ProvedBy)
	require.NotEqual(t, proof, rep.ProvedBy, "a new run makes new ablations")
	orig := send(t, "GET", r.base+"/v1/projects/acme/packets/"+id, r.key, "")
	ablations := orig["ablations"].([]any)
	require.Len(t, ablations, 2*(rep.Runs-1), "one ablation per run but the original's, in both bisects")
	var first, second [][]string
	for i, tr := range rep.Trials {
		require.Equal(t, i+1, tr.Run)
		second = append(second, slices.Sorted(slices.Values(tr.Without)))
		if i > 0 {
			require.Equal(t, ablations[rep.Runs-1+i-1], tr.PacketID)
			abl := send(t, "GET", r.base+"/v1/projects/acme/packets/"+ablations[i-1].(string)+"/records?decision=excluded", r.key, "")
			var left []string
			for _, rec := range abl["data"].([]any) {
				if rec := rec.(map[string]any); rec["reason"] == "ablated" {
					left = append(left, rec["key"].(string))
				}
			}
			slices.Sort(left)
			first = append(first, left)
		} else {
			first = append(first, nil)
		}
	}
	require.Equal(t, first, second, "the same packet and answers ask for the same ablations (what each left out, as its records say)")

	// A packet that succeeds has nothing to find: exit 1, one run.
	o, _, code := r.run("bisect", "--packet", id, "--run", "exit 0")
	require.Equal(t, 1, code, o)
	require.Contains(t, o, "succeeds as it is: there is nothing to find (1 runs of at most 32)")
	// A bound too small to reach a success: exit 1.
	o, _, code = r.run("bisect", "--packet", id, "--run", script, "--max-runs", "1")
	require.Equal(t, 1, code, o)
	require.Contains(t, o, "no removal succeeded before the bound")
	// Usage and server errors: exit 2.
	_, e, code = r.run("bisect", "--packet", id)
	require.Equal(t, 2, code)
	require.Contains(t, e, "--run is required")
	_, e, code = r.run("bisect", "--packet", "ctxpkt_nope", "--run", script)
	require.Equal(t, 2, code)
	require.Contains(t, e, "404")
	_, _, code = r.run("bisect", "--packet", id, "--run", script, "--max-runs", "x")
	require.Equal(t, 2, code)

	o, _, code = run(t, "bisect", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, o, "Examples:\n  contextd bisect --project acme --packet ctxpkt_")
}
