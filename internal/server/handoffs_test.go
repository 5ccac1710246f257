package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

func manifest(task, target string, extra ...any) map[string]any {
	m := map[string]any{
		"task_id": task, "workflow_run_id": "run-1", "intent": "request_review",
		"target":  map[string]any{"role": target, "permission": "read-only"},
		"summary": "Patch for " + task, "base_commit": "abc123",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

type roles struct {
	planner, implementer, critic, verifier, criticRO string
}

func handoffWorld(t *testing.T) (*env, roles) {
	e := setup(t)
	e.project("acme")
	return e, roles{
		planner:     e.agent("planner", auth.Edit, "acme"),
		implementer: e.agent("implementer", auth.Edit, "acme"),
		critic:      e.agent("critic", auth.Edit, "acme"),
		verifier:    e.agent("verifier", auth.Edit, "acme"),
		criticRO:    e.agent("critic", auth.ReadOnly, "acme"),
	}
}

func (e *env) handoff(key string, m map[string]any) string {
	e.t.Helper()
	r := e.do("POST", "/v1/projects/acme/handoffs", key, m)
	require.Equal(e.t, 201, r.status, r.text)
	return r.json["id"].(string)
}

func TestHandoffTransitionMatrix(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	// A handoff in each status.
	mk := func(task string) string { return e.handoff(a.implementer, manifest(task, "critic")) }
	pending := map[string]string{}
	for _, st := range []string{"pending", "accepted", "rejected", "withdrawn"} {
		id := mk("T-" + st)
		switch st {
		case "accepted":
			require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+id+"/accept", a.critic, nil).status)
		case "rejected":
			require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+id+"/reject", a.critic, map[string]any{"reason": "no tests"}).status)
		case "withdrawn":
			require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+id+"/withdraw", a.implementer, map[string]any{"reason": "wrong branch"}).status)
		}
		pending[st] = id
	}
	for from, id := range pending {
		for _, act := range []struct {
			name, key string
			body      map[string]any
			to        string
		}{
			{"accept", a.critic, map[string]any{"reason": "lgtm"}, "accepted"},
			{"reject", a.critic, map[string]any{"reason": "no"}, "rejected"},
			{"withdraw", a.implementer, map[string]any{"reason": "oops"}, "withdrawn"},
		} {
			if from == "pending" {
				continue // tried below, one at a time
			}
			r := e.do("POST", "/v1/projects/acme/handoffs/"+id+"/"+act.name, act.key, act.body)
			require.Equal(t, 409, r.status, "%s from %s: %s", act.name, from, r.text)
			require.Equal(t, "invalid_transition", r.json["code"])
			require.Equal(t, from, r.json["current_status"])
		}
	}
	// From pending, each transition works once.
	for _, act := range []struct{ name, key, to string }{{"accept", a.critic, "accepted"}, {"reject", a.criticRO, "rejected"}, {"withdraw", a.implementer, "withdrawn"}} {
		id := mk("T-from-pending-" + act.name)
		r := e.do("POST", "/v1/projects/acme/handoffs/"+id+"/"+act.name, act.key, map[string]any{"reason": "because"})
		require.Equal(t, 200, r.status, r.text)
		require.Equal(t, act.to, r.json["status"])
		require.Equal(t, "because", r.json["status_reason"])
		d := e.do("GET", "/v1/projects/acme/handoffs/"+id, a.planner, nil)
		evs := d.json["events"].([]any)
		require.Len(t, evs, 2)
		first, second := evs[0].(map[string]any), evs[1].(map[string]any)
		require.Equal(t, "created", first["event"])
		require.Nil(t, first["from_status"])
		require.Equal(t, "pending", first["to_status"])
		require.Equal(t, "pending", second["from_status"])
		require.Equal(t, act.to, second["to_status"])
		require.Equal(t, "because", second["reason"])
		require.Less(t, first["seq"].(float64), second["seq"].(float64))
	}

	// Through raw SQL the database refuses what the API refuses.
	ctx := context.Background()
	for _, q := range []string{
		"UPDATE handoffs SET status = 'pending' WHERE id = '" + pending["accepted"] + "'",
		"UPDATE handoffs SET status = 'accepted' WHERE id = '" + pending["rejected"] + "'",
		"UPDATE handoffs SET status = 'rejected' WHERE id = '" + pending["withdrawn"] + "'",
		"UPDATE handoffs SET manifest = '{}' WHERE id = '" + pending["pending"] + "'",
		"UPDATE handoffs SET target_role = 'x' WHERE id = '" + pending["pending"] + "'",
		"DELETE FROM handoffs WHERE id = '" + pending["pending"] + "'",
		"UPDATE handoff_events SET reason = 'forged'",
		"DELETE FROM handoff_events",
		"TRUNCATE handoff_events",
		"UPDATE handoffs SET status = 'bogus' WHERE id = '" + pending["pending"] + "'",
	} {
		_, err := e.pool.Exec(ctx, q)
		require.Error(t, err, q)
	}
	// A legal step through SQL still needs its event, in the same
	// transaction: every change is an event, whatever the client does.
	_, err := e.pool.Exec(ctx, "UPDATE handoffs SET status = 'accepted' WHERE id = $1", pending["pending"])
	require.ErrorContains(t, err, "without its event")
	_, err = e.pool.Exec(ctx, "INSERT INTO handoff_events (project, seq, handoff_id, event, from_status, to_status, actor, actor_role) VALUES ('acme', 999999, $1, 'created', 'pending', 'accepted', 'x', 'x')", pending["pending"])
	require.Error(t, err, "not a step of the lifecycle")
	_, err = e.pool.Exec(ctx, "INSERT INTO handoffs (project, id, task_id, source_role, target_role, intent, manifest, created_by, status) VALUES ('acme', 'hnd_raw', 'T', 'a', 'b', 'request_review', '{}', 'x', 'accepted')")
	require.Error(t, err, "a handoff is born pending, with its event")
	_, err = e.pool.Exec(ctx, "UPDATE handoffs SET superseded_by = 'hnd_nothing' WHERE id = $1", pending["pending"])
	require.Error(t, err, "superseded_by names a handoff")
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "UPDATE handoffs SET status = 'accepted' WHERE id = $1", pending["pending"])
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO handoff_events (project, seq, handoff_id, event, from_status, to_status, actor, actor_role) VALUES ('acme', 999999, $1, 'accepted', 'pending', 'accepted', 'x', 'x')", pending["pending"])
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	_, err = e.pool.Exec(ctx, "UPDATE handoffs SET status = 'rejected' WHERE id = $1", pending["pending"])
	require.ErrorContains(t, err, "terminal")
}

func TestHandoffPermissionsAndValidation(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	id := e.handoff(a.implementer, manifest("T-1", "critic"))
	reader := e.agent("implementer", auth.ReadOnly, "acme")

	require.Equal(t, 403, e.do("POST", "/v1/projects/acme/handoffs", reader, manifest("T-2", "critic")).status, "creating needs edit")
	r := e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest("T-2", "critic", "source", map[string]any{"role": "planner"}))
	require.Equal(t, 403, r.status, "a non-admin cannot speak for another role")
	r = e.do("POST", "/v1/projects/acme/handoffs", e.admin, manifest("T-2", "critic", "source", map[string]any{"role": "planner", "agent_id": "planner-7"}))
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, "planner", r.json["source"].(map[string]any)["role"])
	r = e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest("T-3", "critic"))
	require.Equal(t, "implementer", r.json["source"].(map[string]any)["role"], "the source role is the caller's")

	require.Equal(t, 403, e.do("POST", "/v1/projects/acme/handoffs/"+id+"/accept", a.verifier, nil).status, "not the target role")
	require.Equal(t, 403, e.do("POST", "/v1/projects/acme/handoffs/"+id+"/withdraw", a.planner, map[string]any{"reason": "x"}).status, "not the source")
	r = e.do("POST", "/v1/projects/acme/handoffs/"+id+"/reject", a.critic, nil)
	require.Equal(t, 422, r.status)
	require.Equal(t, []string{"/reason"}, r.pointers())
	require.Equal(t, 422, e.do("POST", "/v1/projects/acme/handoffs/"+id+"/withdraw", a.implementer, map[string]any{}).status)
	require.Equal(t, 404, e.do("POST", "/v1/projects/acme/handoffs/hnd_nothing/accept", a.critic, nil).status)
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/handoffs/hnd_nothing", a.critic, nil).status)

	for _, tc := range []struct {
		body    map[string]any
		pointer string
		status  int
	}{
		{map[string]any{"target": map[string]any{"role": "critic"}, "intent": "request_review"}, "/task_id", 422},
		{manifest("T-9", ""), "/target/role", 422},
		{manifest("T-9", "critic", "intent", "please"), "/intent", 422},
		{manifest("T-9", "critic", "target", map[string]any{"role": "critic", "permission": "root"}), "/target/permission", 422},
		{manifest("T-9", "critic", "verification_evidence", map[string]any{"critic_verdicts": []any{map[string]any{"critic": "c", "verdict": "MEH"}}}), "/verification_evidence/critic_verdicts/0/verdict", 422},
		{manifest("T-9", "critic", "rework_of", "hnd_unknown"), "/rework_of", 422},
		{manifest("T-9", "critic", "rework_of", id), "/rework_of", 422}, // another task
		{manifest("T-9", "critic", "packet_id", "ctxpkt_unknown"), "/packet_id", 422},
		{manifest("T-9", "critic", "colour", "red"), "/colour", 400},
	} {
		r := e.do("POST", "/v1/projects/acme/handoffs", a.implementer, tc.body)
		require.Equal(t, tc.status, r.status, r.text)
		require.Contains(t, r.pointers(), tc.pointer, r.text)
	}
	require.Empty(t, e.do("GET", "/v1/projects/acme/handoffs?task_id=T-9", e.admin, nil).list(), "nothing was written")
}

func TestHandoffSupersedeAndRework(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	first := e.handoff(a.implementer, manifest("T-1", "critic"))
	other := e.handoff(a.implementer, manifest("T-1", "verifier")) // another target: untouched
	second := e.handoff(a.implementer, manifest("T-1", "critic", "rework_of", first))
	d := e.do("GET", "/v1/projects/acme/handoffs/"+first, a.critic, nil)
	require.Equal(t, "superseded", d.json["status"])
	require.Equal(t, second, d.json["superseded_by"])
	evs := d.json["events"].([]any)
	require.Equal(t, "superseded", evs[len(evs)-1].(map[string]any)["event"])
	require.Equal(t, "pending", e.do("GET", "/v1/projects/acme/handoffs/"+other, a.critic, nil).json["status"])

	third := e.handoff(a.implementer, manifest("T-1", "critic", "rework_of", second))
	d = e.do("GET", "/v1/projects/acme/handoffs/"+second, a.critic, nil)
	chain := d.json["rework_chain"].(map[string]any)
	require.Equal(t, first, chain["ancestors"].([]any)[0].(map[string]any)["id"])
	require.Equal(t, third, chain["descendants"].([]any)[0].(map[string]any)["id"])
	d = e.do("GET", "/v1/projects/acme/handoffs/"+third, a.critic, nil)
	anc := d.json["rework_chain"].(map[string]any)["ancestors"].([]any)
	require.Len(t, anc, 2)
	require.Equal(t, second, anc[0].(map[string]any)["id"])
	require.Equal(t, first, anc[1].(map[string]any)["id"])

	// Listing and filters.
	l := e.do("GET", "/v1/projects/acme/handoffs?task_id=T-1&status=pending", a.critic, nil)
	require.Len(t, l.list(), 2)
	l = e.do("GET", "/v1/projects/acme/handoffs?task_id=T-1&status=pending&target_role=critic", a.critic, nil)
	require.Equal(t, third, l.list()[0]["id"])
	l = e.do("GET", "/v1/projects/acme/handoffs?limit=2", a.critic, nil)
	require.Len(t, l.list(), 2)
	l = e.do("GET", "/v1/projects/acme/handoffs?limit=2&cursor="+l.json["next_cursor"].(string), a.critic, nil)
	require.Len(t, l.list(), 2)
	require.Nil(t, l.json["next_cursor"])
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/handoffs?status=done", a.critic, nil).status)

	// A retried create with the same Idempotency-Key supersedes nothing.
	r1 := e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest("T-2", "critic"), "Idempotency-Key", "h-1")
	require.Equal(t, 201, r1.status)
	r2 := e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest("T-2", "critic"), "Idempotency-Key", "h-1")
	require.Equal(t, r1.text, r2.text)
	l = e.do("GET", "/v1/projects/acme/handoffs?task_id=T-2", a.critic, nil)
	require.Len(t, l.list(), 1)
	require.Equal(t, "pending", l.list()[0]["status"])
}

func TestHundredAcceptorsOneWinner(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	id := e.handoff(a.implementer, manifest("T-race", "critic"))
	const n = 100
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do("POST", "/v1/projects/acme/handoffs/"+id+"/accept", a.critic, nil)
			statuses[i] = r.status
			if r.status == 409 {
				require.Equal(t, "accepted", r.json["current_status"])
			}
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	require.Equal(t, map[int]int{200: 1, 409: n - 1}, count)
	var accepted int
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM handoff_events WHERE handoff_id = $1 AND event = 'accepted'", id).Scan(&accepted))
	require.Equal(t, 1, accepted)
}

func TestMixedRaceOneTerminalTransition(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	for round := range 5 {
		task := fmt.Sprintf("T-mixed-%d", round)
		id := e.handoff(a.implementer, manifest(task, "critic"))
		type outcome struct {
			status int
			to     string
		}
		results := make([]outcome, 0, 40)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var r resp
				switch i % 4 {
				case 0:
					r = e.do("POST", "/v1/projects/acme/handoffs/"+id+"/accept", a.critic, nil)
				case 1:
					r = e.do("POST", "/v1/projects/acme/handoffs/"+id+"/reject", a.critic, map[string]any{"reason": "no"})
				case 2:
					r = e.do("POST", "/v1/projects/acme/handoffs/"+id+"/withdraw", a.implementer, map[string]any{"reason": "back"})
				case 3:
					r = e.do("POST", "/v1/projects/acme/handoffs", a.implementer, manifest(task, "critic"))
				}
				mu.Lock()
				defer mu.Unlock()
				if i%4 != 3 && r.status == 200 {
					results = append(results, outcome{r.status, r.json["status"].(string)})
				}
				require.Contains(t, []int{200, 201, 409}, r.status, r.text)
			}()
		}
		wg.Wait()
		d := e.do("GET", "/v1/projects/acme/handoffs/"+id, a.critic, nil)
		var terminal []string
		for _, ev := range d.json["events"].([]any) {
			m := ev.(map[string]any)
			if m["from_status"] == "pending" {
				terminal = append(terminal, m["to_status"].(string))
			}
		}
		require.Len(t, terminal, 1, "exactly one terminal transition: %v", terminal)
		require.Equal(t, terminal[0], d.json["status"])
		require.LessOrEqual(t, len(results), 1)
		if len(results) == 1 {
			require.Equal(t, results[0].to, d.json["status"], "the one 200 is the winner")
		}
		// Exactly one pending handoff remains for the task and role, or none.
		pend := e.do("GET", "/v1/projects/acme/handoffs?task_id="+task+"&status=pending&target_role=critic", a.critic, nil)
		require.LessOrEqual(t, len(pend.list()), 1)
	}
}

// sseClient reads a handoff event stream.
type sseEvent struct{ id, event, data string }

func openStream(t *testing.T, base, key, query, lastID string) (<-chan sseEvent, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/projects/acme/handoffs/events"+query, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	ch := make(chan sseEvent, 100)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.id != "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return ch, cancel
}

func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "stream closed")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return sseEvent{}
}

// TestInboxAcrossTwoServers streams from one contextd process while another
// writes, and resumes with Last-Event-ID: nothing lost, nothing repeated.
func TestInboxAcrossTwoServers(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	other := httptest.NewServer(server.New(server.Config{App: app.New(store.New(e.pool, 0))}))
	defer other.Close()
	writer := &env{t: t, url: other.URL, pool: e.pool, agents: e.agents, admin: e.admin}

	old := writer.handoff(a.implementer, manifest("T-old", "critic")) // before the stream: not delivered
	_ = old
	ch, stop := openStream(t, e.url, a.criticRO, "?target_role=critic", "")
	time.Sleep(200 * time.Millisecond)
	id1 := writer.handoff(a.implementer, manifest("T-1", "critic"))
	writer.handoff(a.implementer, manifest("T-1", "verifier")) // another role's inbox
	ev := next(t, ch)
	require.Equal(t, "created", ev.event)
	require.Contains(t, ev.data, id1)
	require.Contains(t, ev.data, `"task_id":"T-1"`)
	require.Contains(t, ev.data, `"target":{"permission":"read-only","role":"critic"}`)
	require.Contains(t, ev.data, `"source":{"agent_id"`)
	require.Equal(t, 200, writer.do("POST", "/v1/projects/acme/handoffs/"+id1+"/reject", a.critic, map[string]any{"reason": "no tests"}).status)
	ev2 := next(t, ch)
	require.Equal(t, "rejected", ev2.event)
	stop()

	// While nobody listens: a rework and its acceptance.
	id2 := writer.handoff(a.implementer, manifest("T-1", "critic", "rework_of", id1))
	require.Equal(t, 200, writer.do("POST", "/v1/projects/acme/handoffs/"+id2+"/accept", a.critic, nil).status)

	// Resume on the other server from the last id seen.
	ch, stop = openStream(t, other.URL, a.criticRO, "", ev2.id)
	defer stop()
	ev3, ev4 := next(t, ch), next(t, ch)
	require.Equal(t, []string{"created", "accepted"}, []string{ev3.event, ev4.event})
	require.Contains(t, ev3.data, id2)
	require.Less(t, ev2.id, ev3.id)
	require.Less(t, ev3.id, ev4.id)
	select {
	case extra := <-ch:
		t.Fatalf("unexpected event %+v", extra)
	case <-time.After(300 * time.Millisecond):
	}

	// Only admins listen to another role's inbox.
	r := e.do("GET", "/v1/projects/acme/handoffs/events?target_role=verifier", a.criticRO, nil)
	require.Equal(t, 403, r.status)
	require.Equal(t, 422, e.do("GET", "/v1/projects/acme/handoffs/events", a.criticRO, nil, "Last-Event-ID", "abc").status)
}
