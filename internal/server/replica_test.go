package server_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// replicaWorld is a primary with a hot standby and two servers on the
// primary, as two processes: via reads history from the standby, direct
// from the primary alone.
type replicaWorld struct {
	sb          *pgtest.Standby
	via, direct *env
	viaStore    *store.Store
	replica     *store.Replica
	planner     string
}

func newReplicaWorld(t *testing.T) *replicaWorld {
	t.Helper()
	sb := pgtest.NewStandby(t)
	open := func() *store.Store {
		st, err := store.Open(t.Context(), store.Config{URL: sb.PrimaryURL, AcquireTimeout: pgtest.AcquireTimeout})
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	}
	viaStore, directStore := open(), open()
	adoptChains(t, viaStore)
	// A short recheck, so that the stopped standby is found back within
	// the test. A longer wait than the default: every read waits for the
	// standby to replay what the primary had committed (the server's own
	// background writes too), and on a machine busy with other tests that
	// once took longer than 100 ms; a paused standby costs each read the
	// wait.
	replica, err := store.OpenReplica(t.Context(), store.ReplicaConfig{Store: store.Config{URL: sb.StandbyURL},
		Recheck: 100 * time.Millisecond, Wait: time.Second})
	require.NoError(t, err)
	t.Cleanup(replica.Close)
	serve := func(a *app.App) *env {
		ts := httptest.NewServer(server.New(server.Config{App: a}))
		t.Cleanup(ts.Close)
		return &env{t: t, url: ts.URL, agents: a.Agents, app: a}
	}
	w := &replicaWorld{sb: sb, viaStore: viaStore, replica: replica,
		via:    serve(app.New(viaStore, app.WithKeys(testKeys), app.WithReplica(replica))),
		direct: serve(app.New(directStore, app.WithKeys(testKeys)))}
	_, key, err := w.via.agents.Bootstrap(context.Background())
	require.NoError(t, err)
	w.via.admin, w.direct.admin = key, key
	w.via.project("acme")
	w.planner = w.via.agent("planner", auth.Edit, "acme")
	require.Equal(t, 201, w.via.do("PUT", "/v1/projects/acme/items/style", w.via.admin, map[string]any{"content": "Small commits, each with its test."}).status)
	return w
}

// assemble makes a packet of task T-r through e and returns its id.
func (w *replicaWorld) assemble(e *env, step string) string {
	w.via.t.Helper()
	r := e.do("POST", "/v1/projects/acme/packets", w.planner, map[string]any{
		"target_role": "planner", "task": map[string]any{"task_id": "T-r", "step_id": step, "objective": "Fix the refund rounding bug."}})
	require.Equal(w.via.t, 201, r.status, r.text)
	return r.json["packet_id"].(string)
}

// historyReads are the reads of history about packet id: each goes to
// the replica.
func historyReads(id string) [][3]string {
	return [][3]string{
		{"GET", "/v1/projects/acme/packets/" + id},
		{"GET", "/v1/projects/acme/packets/" + id + "/records"},
		{"GET", "/v1/projects/acme/packets/" + id + "/why?item=style"},
		{"POST", "/v1/projects/acme/packets/" + id + "/attribute", "Small commits"},
		{"POST", "/v1/projects/acme/packets/" + id + "/replay"},
		{"GET", "/v1/projects/acme/packets?task_id=T-r"},
		{"GET", "/v1/projects/acme/items/style/injections"},
		{"GET", "/v1/projects/acme/tasks/T-r/history"},
		{"POST", "/v1/projects/acme/tasks/T-r/attribute", "Small commits"},
		{"GET", "/v1/projects/acme/audit/entries?limit=1000"},
	}
}

// same asks both servers every read of history about id and requires the
// same 200 answer, byte for byte.
func (w *replicaWorld) same(t *testing.T, id string) {
	t.Helper()
	for _, rd := range historyReads(id) {
		var body any
		if rd[2] != "" {
			body = map[string]any{"text": rd[2]}
		}
		got, want := w.via.do(rd[0], rd[1], w.via.admin, body), w.direct.do(rd[0], rd[1], w.direct.admin, body)
		require.Equal(t, 200, want.status, "%s %s: %s", rd[0], rd[1], want.text)
		require.Equal(t, want.status, got.status, "%s %s: %s", rd[0], rd[1], got.text)
		require.Equal(t, want.text, got.text, "%s %s", rd[0], rd[1])
	}
}

// status is the replica's status as via's store reports it.
func (w *replicaWorld) status(t *testing.T) store.ReplicaStatus {
	st, ok := w.viaStore.ReplicaStatus(t.Context())
	require.True(t, ok)
	return st
}

// TestReadReplica serves the reads of history from a real hot standby
// (pg_basebackup -R of a throwaway primary): the answers are the
// primary's; a packet written a moment ago, by this process or another,
// is never a 404 while the standby is paused; with the standby stopped
// everything still answers, and it is used again once it is back.
func TestReadReplica(t *testing.T) {
	// Not parallel: its reads wait on a paused standby for ~25 s, asking
	// it where it is every poll, beside a primary and a standby of its
	// own; run with the package's other tests, that slowed timing tests
	// (a paced body's rate) on two busy cores.
	w := newReplicaWorld(t)
	first := w.assemble(w.via, "plan")
	require.Equal(t, 201, w.via.do("POST", "/v1/projects/acme/handoffs", w.planner, manifest("T-r", "implementer", "packet_id", first)).status)

	t.Run("answers through the replica are the primary's", func(t *testing.T) {
		// Once the standby has replayed all the primary wrote, no read
		// need wait (but for what the server writes in the background).
		require.Equal(t, 200, w.via.do("GET", "/v1/projects/acme/packets/"+first, w.via.admin, nil).status)
		w.sb.CatchUp(t)
		before := w.status(t)
		w.same(t, first)
		after := w.status(t)
		require.True(t, after.InUse)
		require.GreaterOrEqual(t, after.Reads-before.Reads, int64(len(historyReads(first))), "every read of history was answered by the standby")
		require.Equal(t, before.Fallbacks, after.Fallbacks, "none went to the primary")
		ready := w.via.do("GET", "/readyz", "", nil)
		require.Equal(t, 200, ready.status, ready.text)
		replica := ready.json["replica"].(map[string]any)
		require.Equal(t, true, replica["in_use"], ready.text)
		require.Contains(t, replica, "lag_bytes")
		require.NotContains(t, w.direct.do("GET", "/readyz", "", nil).json, "replica", "a server without a replica says nothing of one")
		metrics := w.via.do("GET", "/metrics", w.via.admin, nil)
		require.Contains(t, metrics.text, "contextd_db_replica_in_use 1")
		require.Contains(t, metrics.text, "contextd_db_replica_lag_bytes ")
	})

	t.Run("a quiet primary past a segment switch does not hold reads back", func(t *testing.T) { w.quietPrimaryPastASwitch(t, first) })

	t.Run("with replay paused a packet just written still answers", func(t *testing.T) {
		w.sb.PauseReplay(t)
		defer w.sb.ResumeReplay(t)
		// Another process's packet: the standby has not replayed it, so
		// via's reads wait for it (at most the wait) and then go to the
		// primary. Its listing holds the packet as much as its GET and its
		// why do: no read of via's answers without what the primary had
		// committed when the read began, whoever wrote it.
		theirs := w.assemble(w.direct, "theirs")
		before := w.status(t)
		viaList := w.via.do("GET", "/v1/projects/acme/packets?task_id=T-r", w.via.admin, nil)
		require.Equal(t, 200, viaList.status, viaList.text)
		require.Contains(t, viaList.text, theirs, "a listing read a moment after another process wrote the packet")
		require.Equal(t, w.direct.do("GET", "/v1/projects/acme/packets?task_id=T-r", w.direct.admin, nil).text, viaList.text)
		for _, path := range []string{"/v1/projects/acme/packets/" + theirs, "/v1/projects/acme/packets/" + theirs + "/why?item=style"} {
			got, want := w.via.do("GET", path, w.via.admin, nil), w.direct.do("GET", path, w.direct.admin, nil)
			require.Equal(t, 200, got.status, got.text)
			require.Equal(t, want.text, got.text)
		}
		after := w.status(t)
		require.Greater(t, after.Fallbacks["behind"], before.Fallbacks["behind"], "the paused standby was behind: the primary answered")
		require.Equal(t, before.Reads, after.Reads, "no read was answered by the paused standby")
		// The audit chain too: a page never ends before the primary's head
		// (a checkpoint taken there a moment ago names it).
		const entries = "/v1/projects/acme/audit/entries?limit=1000"
		got, want := w.via.do("GET", entries, w.via.admin, nil), w.direct.do("GET", entries, w.direct.admin, nil)
		require.Equal(t, 200, got.status, got.text)
		require.Contains(t, want.text, theirs)
		require.Equal(t, want.text, got.text, "the entries of the paused standby's chain are behind: the primary answers")

		// This process's packet: read your writes sends its reads to the
		// primary once the standby has not replayed it within the wait.
		mine := w.assemble(w.via, "mine")
		before = w.status(t)
		w.same(t, mine)
		require.Greater(t, w.status(t).Fallbacks["behind"], before.Fallbacks["behind"])
		// Not only a packet's GET, which the primary would answer after a
		// miss anyway: its listing too, which no miss sends there.
		require.Contains(t, w.via.do("GET", "/v1/projects/acme/packets?task_id=T-r", w.via.admin, nil).text, mine)
	})

	t.Run("a redaction by another process is never read from the standby", w.redactionNeverFromTheStandby)
	t.Run("reads waiting together share their questions to the standby", w.waitingReadsShareQuestions)

	t.Run("with the standby stopped everything still answers", func(t *testing.T) {
		w.sb.CatchUp(t)
		w.sb.StopStandby(t)
		w.same(t, first)
		down := w.assemble(w.via, "down")
		w.same(t, down)
		st := w.status(t)
		require.False(t, st.InUse, "the stopped standby is set aside")
		require.NotEmpty(t, st.Error)
		ready := w.via.do("GET", "/readyz", "", nil)
		require.Equal(t, 200, ready.status, "a replica down leaves the server ready: %s", ready.text)
		require.Equal(t, false, ready.json["replica"].(map[string]any)["in_use"], ready.text)

		w.sb.StartStandby(t)
		require.Eventually(t, func() bool { return w.status(t).InUse }, 30*time.Second, 50*time.Millisecond, "the standby is probed again and used")
		w.sb.CatchUp(t)
		before := w.status(t)
		w.same(t, down)
		require.Greater(t, w.status(t).Reads, before.Reads, "reads went to the standby again")
	})
}

// redactionNeverFromTheStandby: another process redacts a secret that a
// packet showed while the standby is paused; reads of that packet through
// via must not come from the standby, which still holds the secret.
func (w *replicaWorld) redactionNeverFromTheStandby(t *testing.T) {
	const secret = "sk-live-4242-replica"
	require.Equal(t, 201, w.direct.do("PUT", "/v1/projects/acme/items/leak", w.direct.admin, map[string]any{"content": "Deploy key " + secret + "."}).status)
	leaked := w.assemble(w.direct, "leak")
	w.sb.CatchUp(t)
	require.Contains(t, w.via.do("GET", "/v1/projects/acme/packets/"+leaked, w.via.admin, nil).text, secret, "the standby holds the packet")
	w.sb.PauseReplay(t)
	defer w.sb.ResumeReplay(t)
	r := w.direct.do("POST", "/v1/projects/acme/items/leak/versions/1/redact", w.direct.admin, map[string]any{"reason": "a key was pasted"})
	require.Equal(t, 202, r.status, r.text)
	require.Eventually(t, func() bool {
		return w.direct.do("GET", "/v1/projects/acme/redactions/"+r.json["id"].(string), w.direct.admin, nil).json["status"] == "done"
	}, 10*time.Second, 20*time.Millisecond)
	before := w.status(t)
	for _, path := range []string{"/v1/projects/acme/packets/" + leaked, "/v1/projects/acme/packets/" + leaked + "/why?item=leak"} {
		got, want := w.via.do("GET", path, w.via.admin, nil), w.direct.do("GET", path, w.direct.admin, nil)
		require.Equal(t, 200, got.status, got.text)
		require.NotContains(t, want.text, secret, path)
		require.NotContains(t, got.text, secret, "%s: the paused standby still holds the secret; the read must not come from it", path)
		require.Equal(t, want.text, got.text, path)
	}
	require.Greater(t, w.status(t).Fallbacks["behind"], before.Fallbacks["behind"], "the reads went to the primary")
}

// quietPrimaryPastASwitch: after pg_switch_wal the primary's insert
// position lies past the next segment's page header, where the standby's
// replay position never reaches; compared as they were, every read waited
// the whole wait and went to the primary until the next write.
func (w *replicaWorld) quietPrimaryPastASwitch(t *testing.T, first string) {
	w.sb.SwitchWAL(t)
	w.sb.CatchUp(t)
	before := w.status(t)
	start := time.Now()
	got := w.via.do("GET", "/v1/projects/acme/packets/"+first, w.via.admin, nil)
	require.Equal(t, 200, got.status, got.text)
	after := w.status(t)
	require.Equal(t, before.Fallbacks, after.Fallbacks, "the caught-up standby answered")
	require.Greater(t, after.Reads, before.Reads)
	require.Less(t, time.Since(start), time.Second, "the read did not wait for the standby")
}

// waitingReadsShareQuestions: reads that wait for the standby at the same
// time ask it how far it has replayed together, not each on its own: how
// often the standby is asked no longer grows with the reads waiting (40
// reads waiting the whole wait, the standby paused behind a packet just
// written, asked ~40,000 questions each on its own).
func (w *replicaWorld) waitingReadsShareQuestions(t *testing.T) {
	w.sb.CatchUp(t)
	w.sb.PauseReplay(t)
	defer w.sb.ResumeReplay(t)
	id := w.assemble(w.direct, "shared")
	before, asked, start := w.status(t), w.replica.ReplayQuestions(), time.Now()
	const reads = 40
	var wg sync.WaitGroup
	status := make([]int, reads)
	for i := range reads {
		wg.Go(func() { status[i] = w.via.do("GET", "/v1/projects/acme/packets/"+id, w.via.admin, nil).status })
	}
	wg.Wait()
	took := time.Since(start)
	for i, s := range status {
		require.Equal(t, 200, s, "read %d", i)
	}
	require.GreaterOrEqual(t, w.status(t).Fallbacks["behind"]-before.Fallbacks["behind"], int64(reads), "every read waited for the paused standby")
	questions := w.replica.ReplayQuestions() - asked
	require.Positive(t, questions)
	// Each on its own, every read asks every poll (2 ms and the question's
	// own time): 20,523 questions in 2.6 s here. Shared, at most one
	// question a poll whatever the number of reads waiting (back to back,
	// before that cap, ~1.1 a ms: 2,527 in 2.3 s). The bound, 40 reads ×
	// took / 14 ms (~2.9 a ms), lies well away from both.
	require.Less(t, questions, int64(reads)*took.Milliseconds()/14, "the waiting reads shared their questions (%s)", took)
	t.Logf("%d reads waiting together for %s asked %d questions", reads, took, questions)
}
