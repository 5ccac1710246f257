package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWithdrawnIsItsOwnStatus: a withdrawal is withdrawn wherever a
// handoff's status shows (its answer, its detail and events, the listing
// and its filter, the task's history, the live stream), never superseded,
// which stays the word for a handoff a newer one replaced; KXM's manifest,
// which has no withdrawn, says superseded as before; a withdrawn handoff
// may be reworked; and the chain still verifies.
func TestWithdrawnIsItsOwnStatus(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	ch, stop := openStream(t, e.url, e.admin, "?target_role=critic", "")
	defer stop()
	time.Sleep(200 * time.Millisecond)

	id := e.handoff(a.implementer, manifest("T-1", "critic"))
	r := e.do("POST", "/v1/projects/acme/handoffs/"+id+"/withdraw", a.implementer, map[string]any{"reason": "wrong branch"})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, "withdrawn", r.json["status"])
	require.Equal(t, "wrong branch", r.json["status_reason"])
	require.Nil(t, r.json["superseded_by"])

	d := e.do("GET", "/v1/projects/acme/handoffs/"+id, a.critic, nil)
	require.Equal(t, "withdrawn", d.json["status"])
	evs := d.json["events"].([]any)
	last := evs[len(evs)-1].(map[string]any)
	require.Equal(t, "withdrawn", last["event"])
	require.Equal(t, "pending", last["from_status"])
	require.Equal(t, "withdrawn", last["to_status"])
	require.Equal(t, "wrong branch", last["reason"])

	require.Equal(t, "created", next(t, ch).event)
	ev := next(t, ch)
	require.Equal(t, "withdrawn", ev.event, "the stream names the withdrawal")
	var data map[string]any
	require.NoError(t, json.Unmarshal([]byte(ev.data), &data))
	require.Equal(t, "withdrawn", data["to_status"])

	// A handoff replaced by a newer one is still superseded.
	replaced := e.handoff(a.implementer, manifest("T-2", "critic"))
	newer := e.handoff(a.implementer, manifest("T-2", "critic"))
	require.Equal(t, "superseded", e.do("GET", "/v1/projects/acme/handoffs/"+replaced, a.critic, nil).json["status"])

	ids := func(status string) []string {
		var out []string
		for _, h := range e.do("GET", "/v1/projects/acme/handoffs?status="+status, a.critic, nil).list() {
			out = append(out, h["id"].(string))
		}
		return out
	}
	require.Equal(t, []string{id}, ids("withdrawn"))
	require.Equal(t, []string{replaced}, ids("superseded"))
	require.Equal(t, []string{newer}, ids("pending"))
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/handoffs?status=taken_back", a.critic, nil).status)

	hist := e.do("GET", "/v1/projects/acme/tasks/T-1/history", a.critic, nil)
	require.Equal(t, 200, hist.status, hist.text)
	entries := hist.json["entries"].([]any)
	require.Equal(t, "withdrawn", entries[len(entries)-1].(map[string]any)["event"])
	require.Equal(t, "withdrawn", entries[len(entries)-1].(map[string]any)["to_status"])

	k := e.do("GET", "/v1/projects/acme/handoffs/"+id+"?format=kxm", a.critic, nil)
	require.Equal(t, 200, k.status, k.text)
	require.Equal(t, "superseded", k.json["status"], "KXM's manifest knows no withdrawn")

	// A withdrawn handoff's work may be reworked, and the chain verifies.
	rework := e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest("T-1", "critic", "rework_of", id))
	require.Equal(t, 201, rework.status, rework.text)
	v := e.verify()
	require.Equal(t, true, v.json["ok"], v.text)

	// The database refuses a withdrawal without a reason or with a successor.
	_, err := e.pool.Exec(t.Context(), "UPDATE handoffs SET status = 'withdrawn', status_reason = '' WHERE id = $1", newer)
	require.ErrorContains(t, err, "handoffs_withdrawn_check")
	_, err = e.pool.Exec(t.Context(), "UPDATE handoffs SET status = 'withdrawn', status_reason = 'x', superseded_by = $2 WHERE id = $1", newer, replaced)
	require.ErrorContains(t, err, "handoffs_withdrawn_check")
}
