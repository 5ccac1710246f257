package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHandoffsReadable: a handoff created from flags, rejected with a
// reason, reworked and accepted; another withdrawn; show, history and
// watch readable, and --json the API's answers.
func TestHandoffsReadable(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	require.Equal(t, 201, put(t, r.base+"/v1/projects/acme", r.key, `{}`))
	created := regexp.MustCompile(`^handoff (hnd_\S+) created: implementer → critic, pending\n  task T-1, intent request_review\n`)

	o, _ := r.ok("handoffs", "create", "--task", "T-1", "--intent", "request_review", "--target-role", "critic",
		"--source-role", "implementer", "--summary", "Refund limit patch", "--decision", "limit at 500 EUR")
	m := created.FindStringSubmatch(o)
	require.NotNil(t, m, o)
	first := m[1]
	require.Contains(t, o, "warning no_agent_for_role", "what the server warned of is said")
	require.Contains(t, r.fail("handoffs", "create", "--task", "T-1"), "give --task, --intent and --target-role")
	e := r.fail("handoffs", "create", "--task", "T-1", "--intent", "bogus", "--target-role", "critic")
	require.Contains(t, e, "422 validation_failed")
	require.Contains(t, e, "  /intent: ")

	require.Contains(t, r.fail("handoffs", "reject", first), "422", "a reject needs a reason")
	o, _ = r.ok("handoffs", "reject", first, "--reason", "No test for the 500 EUR edge")
	require.Equal(t, "handoff "+first+" is rejected (implementer → critic, task T-1): No test for the 500 EUR edge\n", o)

	o, _ = r.ok("handoffs", "create", "--task", "T-1", "--intent", "request_review", "--target-role", "critic",
		"--source-role", "implementer", "--rework-of", first, "--summary", "Tests added")
	m = created.FindStringSubmatch(o)
	require.NotNil(t, m, o)
	second := m[1]
	require.Contains(t, o, "  rework of "+first+"\n")
	o, _ = r.ok("handoffs", "accept", second)
	require.Equal(t, "handoff "+second+" is accepted (implementer → critic, task T-1)\n", o)

	o, _ = r.ok("handoffs", "show", second)
	require.Contains(t, o, "handoff   "+second+"  (project acme, task T-1)\n")
	require.Contains(t, o, "status    accepted\n")
	require.Contains(t, o, "summary   Tests added\n")
	require.Regexp(t, `(?m)^  \S+  created +· → pending  by agt_\S+ \(admin\)$`, o)
	require.Regexp(t, `(?m)^  \S+  accepted +pending → accepted  by agt_\S+ \(admin\)$`, o)
	require.Contains(t, o, "rework of "+first+"  implementer → critic, rejected\n")
	o, _ = r.ok("handoffs", "show", first, "--json")
	var detail map[string]any
	require.NoError(t, json.Unmarshal([]byte(o), &detail), o)
	require.Len(t, detail["events"], 2)
	require.Equal(t, []any{"limit at 500 EUR"}, detail["decisions"])

	o, _ = r.ok("handoffs", "create", "--task", "T-2", "--intent", "request_approval", "--target-role", "reviewer", "--source-role", "implementer", "--json")
	var third map[string]any
	require.NoError(t, json.Unmarshal([]byte(o), &third), o)
	o, _ = r.ok("handoffs", "withdraw", third["id"].(string), "--reason", "Wrong branch")
	require.Regexp(t, `^handoff `+third["id"].(string)+` is \w+ \(implementer → reviewer, task T-2\): Wrong branch\n$`, o)

	o, _ = r.ok("handoffs", "history", "T-1")
	require.Contains(t, o, "task T-1 in acme: 4 entries")
	require.Regexp(t, `rejected +`+first+`  implementer → critic  \[pending → rejected\].*reason: No test for the 500 EUR edge`, o)
	require.Regexp(t, `accepted +`+second+`  implementer → critic  \[pending → accepted\]`, o)
	o, _ = r.ok("handoffs", "history", "T-1", "--json")
	var hist map[string]any
	require.NoError(t, json.Unmarshal([]byte(o), &hist), o)
	require.Len(t, hist["entries"], 4)

	// watch: one line per event, its id first, until the stream ends.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wout, werr bytes.Buffer
	Execute(ctx, []string{"handoffs", "watch", "--target-role", "critic", "--last-event-id", "0", "--url", r.base, "--key", r.key, "--project", "acme"}, &wout, &werr)
	lines := strings.Split(strings.TrimSpace(wout.String()), "\n")
	require.Len(t, lines, 4, wout.String()+werr.String())
	require.Regexp(t, `^1  \S+  created   `+first+`  task T-1  implementer → critic  \[· → pending\] by agt_\S+ \(admin\)$`, lines[0])
	require.Regexp(t, `^2  \S+  rejected  `+first+`  task T-1  implementer → critic  \[pending → rejected\] by .*reason: No test for the 500 EUR edge$`, lines[1])
	require.Regexp(t, `^4  \S+  accepted  `+second+` `, lines[3])
}
