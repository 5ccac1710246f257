package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ident"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// refundSentence is the item text an answer quotes.
const refundSentence = "Refunds are paid within five business days after the returned goods arrive at the warehouse."

// outcomeWorld is acme with two items and a packet assembled by a
// read-only support agent.
type outcomeWorld struct {
	*env
	support, supportID, packet string
}

func newOutcomeWorld(t *testing.T) outcomeWorld {
	t.Helper()
	e := setup(t)
	e.project("acme")
	a, key, err := e.agents.CreateLocal(context.Background(), auth.CreateParams{Name: "support-1", Role: "support", Permission: auth.ReadOnly, Projects: []string{"acme"}})
	require.NoError(t, err)
	e.batch("acme", []api.BatchItem{
		{Key: "refund.policy", Content: refundSentence, Priority: ptr(int32(2))},
		{Key: "shipping", Content: "Shipping is free for orders over 50 EUR in every country we deliver to.", Priority: ptr(int32(1))},
	})
	p := e.do("POST", "/v1/projects/acme/packets", key, api.AssemblePacketJSONRequestBody{TargetRole: "support"})
	require.Equal(t, 201, p.status, p.text)
	return outcomeWorld{env: e, support: key, supportID: a.ID, packet: p.json["packet_id"].(string)}
}

func (w outcomeWorld) record(key string, body any, headers ...string) resp {
	return w.do("POST", "/v1/projects/acme/packets/"+w.packet+"/outcomes", key, body, headers...)
}

func usedKeys(o map[string]any) []string {
	out := []string{}
	for _, u := range o["used"].([]any) {
		out = append(out, u.(map[string]any)["key"].(string))
	}
	return out
}

// TestOutcomesRecordListAndShowOnThePacket: the packet's own read-only
// agent records outcomes with and without an answer; the one with an
// answer that quotes an item's sentence used exactly that item version;
// the list pages them oldest first, and the packet's answer shows the
// newest per source without the answer's text.
func TestOutcomesRecordListAndShowOnThePacket(t *testing.T) {
	t.Parallel()
	w := newOutcomeWorld(t)

	r := w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure", Label: ptr("wrong_refund_amount"), Score: ptr(0.25)})
	require.Equal(t, 201, r.status, r.text)
	require.True(t, strings.HasPrefix(r.json["id"].(string), "out_"), r.text)
	require.Equal(t, w.packet, r.json["packet_id"])
	require.Equal(t, w.supportID, r.json["created_by"])
	require.Equal(t, "agent", r.json["source"], "the default source")
	require.Equal(t, 0.25, r.json["score"])
	require.Equal(t, 1, r.num("seq"))
	require.Empty(t, r.json["used"])
	require.NotContains(t, r.json, "answer")

	answer := "Hello! " + refundSentence + " Anything else I can do for you today?"
	r = w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "partial", Answer: &answer, Source: ptr("evaluator")})
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, []string{"refund.policy"}, usedKeys(r.json), r.text)
	u := r.json["used"].([]any)[0].(map[string]any)
	require.Equal(t, "item", u["subject"])
	require.Equal(t, "acme", u["project"])
	require.Equal(t, 1.0, u["version"])
	require.Equal(t, "exact", u["match"], "the quoted sentence, found as such")
	require.Equal(t, 1.0, u["similarity"])
	require.Len(t, r.json["answer_sha256"], 64)

	r = w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "success", Source: ptr("human")})
	require.Equal(t, 201, r.status, r.text)

	l := w.do("GET", "/v1/projects/acme/packets/"+w.packet+"/outcomes?limit=2", w.support, nil)
	require.Equal(t, 200, l.status, l.text)
	require.Len(t, l.list(), 2)
	require.Equal(t, "failure", l.list()[0]["status"])
	require.Equal(t, answer, l.list()[1]["answer"])
	rest := w.do("GET", "/v1/projects/acme/packets/"+w.packet+"/outcomes?cursor="+l.json["next_cursor"].(string), w.support, nil)
	require.Equal(t, 200, rest.status, rest.text)
	require.Len(t, rest.list(), 1)
	require.Equal(t, "success", rest.list()[0]["status"])
	require.NotContains(t, rest.json, "next_cursor")

	p := w.do("GET", "/v1/projects/acme/packets/"+w.packet, w.support, nil)
	require.Equal(t, 200, p.status, p.text)
	requirePacketAnswer(t, p)
	latest := p.json["outcomes"].([]any)
	var sources []string
	for _, o := range latest {
		m := o.(map[string]any)
		sources = append(sources, m["source"].(string)+"/"+m["status"].(string))
		require.NotContains(t, m, "answer", "the packet's answer leaves the answers' text to the list")
	}
	require.Equal(t, []string{"agent/failure", "evaluator/partial", "human/success"}, sources)
	require.Equal(t, []string{"refund.policy"}, usedKeys(latest[1].(map[string]any)))

	// An Idempotency-Key records once.
	a := w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure"}, "Idempotency-Key", "o-1")
	b := w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure"}, "Idempotency-Key", "o-1")
	require.Equal(t, 201, b.status, b.text)
	require.Equal(t, a.json["id"], b.json["id"])
	l = w.do("GET", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.support, nil)
	require.Len(t, l.list(), 4)
}

// TestOutcomesWhoMayRecord: the packet's own agent (read-only) and an
// agent that may write the project record; another read-only agent of the
// role, which may open the packet, is 403; an agent that may not open it
// (another role, another scope) and a packet that does not exist are the
// same 404.
func TestOutcomesWhoMayRecord(t *testing.T) {
	t.Parallel()
	w := newOutcomeWorld(t)
	ctx := context.Background()
	mk := func(name, role string, perm auth.Permission, projects ...string) string {
		_, key, err := w.agents.CreateLocal(ctx, auth.CreateParams{Name: name, Role: role, Permission: perm, Projects: projects})
		require.NoError(t, err)
		return key
	}
	w.project("other")
	body := api.RecordOutcomeJSONRequestBody{Status: "failure"}
	for _, tc := range []struct {
		name, key string
		status    int
		code      string
	}{
		{"own agent, read-only", w.support, 201, ""},
		{"editor of the role", mk("support-editor", "support", auth.Edit, "acme"), 201, ""},
		{"admin", w.admin, 201, ""},
		{"other read-only agent of the role", mk("support-2", "support", auth.ReadOnly, "acme"), 403, "forbidden"},
		{"editor of another role", mk("critic", "critic", auth.Edit, "acme"), 404, "not_found"},
		{"out of scope", mk("elsewhere", "support", auth.Edit, "other"), 404, "not_found"},
	} {
		r := w.record(tc.key, body)
		require.Equal(t, tc.status, r.status, "%s: %s", tc.name, r.text)
		if tc.code != "" {
			require.Equal(t, tc.code, r.json["code"], tc.name)
		}
		l := w.do("GET", "/v1/projects/acme/packets/"+w.packet+"/outcomes", tc.key, nil)
		if tc.status == 404 {
			require.Equal(t, 404, l.status, "%s lists: %s", tc.name, l.text)
		} else {
			require.Equal(t, 200, l.status, "%s lists: %s", tc.name, l.text)
		}
	}
	r := w.do("POST", "/v1/projects/acme/packets/ctxpkt_nosuchpacket0000000/outcomes", w.admin, body)
	require.Equal(t, 404, r.status, r.text)
	require.Equal(t, "not_found", r.json["code"])
}

// TestOutcomesBadInput: each bad field is a 422 with its pointer, and
// nothing is written.
func TestOutcomesBadInput(t *testing.T) {
	t.Parallel()
	w := newOutcomeWorld(t)
	for _, tc := range []struct {
		name    string
		body    map[string]any
		pointer string
	}{
		{"no status", map[string]any{"note": "x"}, "/status"},
		{"unknown status", map[string]any{"status": "meh"}, "/status"},
		{"unknown source", map[string]any{"status": "failure", "source": "oracle"}, "/source"},
		{"score above 1", map[string]any{"status": "failure", "score": 1.5}, "/score"},
		{"score below 0", map[string]any{"status": "failure", "score": -0.1}, "/score"},
		{"answer too long", map[string]any{"status": "failure", "answer": strings.Repeat("a", 100<<10+1)}, "/answer"},
		{"label too long", map[string]any{"status": "failure", "label": strings.Repeat("l", 101)}, "/label"},
		{"note too long", map[string]any{"status": "failure", "note": strings.Repeat("n", 4001)}, "/note"},
	} {
		r := w.record(w.support, tc.body)
		require.Equal(t, 422, r.status, "%s: %s", tc.name, r.text)
		require.Equal(t, "validation_failed", r.json["code"], tc.name)
		require.Equal(t, []string{tc.pointer}, r.pointers(), tc.name)
	}
	l := w.do("GET", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.support, nil)
	require.Empty(t, l.list())
}

// TestOutcomesAreLimitedPerPacket: concurrent writers never take a packet
// past its 100 outcomes; the next is 409 conflict.
func TestOutcomesAreLimitedPerPacket(t *testing.T) {
	t.Parallel()
	w := newOutcomeWorld(t)
	const tries = 110
	statuses := make([]int, tries)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range tries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			statuses[i] = w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure", Note: ptr(fmt.Sprint(i))}).status
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	require.Equal(t, map[int]int{201: 100, 409: 10}, count)
	r := w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "success"})
	require.Equal(t, 409, r.status, r.text)
	require.Equal(t, "conflict", r.json["code"])
	var n int
	require.NoError(t, w.pool.QueryRow(context.Background(), "SELECT count(*) FROM packet_outcomes WHERE packet_id = $1", w.packet).Scan(&n))
	require.Equal(t, 100, n)
}

// TestOutcomesInTheAuditChain: every outcome is an entry the verification
// checks: it verifies after outcomes, and a changed, removed or slipped-in
// outcome row is caught.
func TestOutcomesInTheAuditChain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, sql string }{
		{"status changed", "UPDATE packet_outcomes SET status = 'success' WHERE seq = 1"},
		{"used rewritten", "UPDATE packet_outcomes SET used = '[]' WHERE seq = 2"},
		{"answer changed", "UPDATE packet_outcomes SET answer = 'something else' WHERE seq = 2"},
		{"removed", "DELETE FROM packet_outcomes WHERE seq = 1"},
		{"slipped in", "INSERT INTO packet_outcomes (project, id, packet_id, seq, created_by, status, source) SELECT project, 'out_forged', packet_id, 9, created_by, 'success', 'human' FROM packet_outcomes WHERE seq = 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newOutcomeWorld(t)
			answer := "Sure: " + refundSentence
			require.Equal(t, 201, w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure"}).status)
			require.Equal(t, 201, w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure", Answer: &answer}).status)
			v := w.verify()
			require.Equal(t, true, v.json["ok"], v.text)
			w.tamper(tc.sql)
			v = w.verify()
			require.Equal(t, false, v.json["ok"], v.text)
			require.NotNil(t, v.json["problem"], v.text)
		})
	}
}

// TestOutcomesNeverShowAHiddenEntry: an item hidden from the role after
// the answer used it disappears from used for that role (list, packet
// answer), and stays for an admin.
func TestOutcomesNeverShowAHiddenEntry(t *testing.T) {
	t.Parallel()
	w := newOutcomeWorld(t)
	answer := refundSentence + " That is what our policy says."
	r := w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure", Answer: &answer})
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, []string{"refund.policy"}, usedKeys(r.json))

	h := w.do("PUT", "/v1/projects/acme/items/refund.policy", w.admin, map[string]any{"content": refundSentence,
		"roles": map[string]any{"hidden_from": []string{"support"}}})
	require.Equal(t, 201, h.status, h.text)

	l := w.do("GET", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.support, nil)
	require.Equal(t, 200, l.status, l.text)
	require.Empty(t, l.list()[0]["used"], l.text)
	require.NotContains(t, l.text, "refund.policy")
	p := w.do("GET", "/v1/projects/acme/packets/"+w.packet, w.support, nil)
	require.NotContains(t, p.text, "refund.policy")
	require.Empty(t, p.json["outcomes"].([]any)[0].(map[string]any)["used"])
	// A new outcome quoting it does not reveal it either, but the row keeps it.
	r = w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure", Answer: &answer})
	require.Equal(t, 201, r.status, r.text)
	require.Empty(t, r.json["used"])

	l = w.do("GET", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.admin, nil)
	require.Equal(t, []string{"refund.policy"}, usedKeys(l.list()[0]))
	require.Equal(t, []string{"refund.policy"}, usedKeys(l.list()[1]))
}

// TestOutcomesInAnArchivedProject: 410 gone, and the outcomes stay
// readable.
func TestOutcomesInAnArchivedProject(t *testing.T) {
	t.Parallel()
	w := newOutcomeWorld(t)
	require.Equal(t, 201, w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure"}).status)
	a := w.do("DELETE", "/v1/projects/acme", w.admin, nil)
	require.Equal(t, 200, a.status, a.text)
	r := w.record(w.support, api.RecordOutcomeJSONRequestBody{Status: "failure"})
	require.Equal(t, 410, r.status, r.text)
	require.Equal(t, "gone", r.json["code"])
	l := w.do("GET", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.admin, nil)
	require.Equal(t, 200, l.status, l.text)
	require.Len(t, l.list(), 1)
}

// TestOutcomesAreAppendOnlyForTheServersLogin: the server's own login
// (contextd_app) records outcomes and cannot change or remove one.
func TestOutcomesAreAppendOnlyForTheServersLogin(t *testing.T) {
	t.Parallel()
	ownerURL := pgtest.NewURL(t)
	ctx := context.Background()
	appURL, err := store.EnsureLogin(ctx, ownerURL, "contextd_outcomes_"+strings.ToLower(ident.Random(8)))
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	defer pool.Close()
	a := app.New(store.New(pool, 0), app.WithKeys(testKeys))
	adoptChains(t, a.Store)
	_, key, err := a.Agents.CreateLocal(ctx, auth.CreateParams{Name: "root", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}})
	require.NoError(t, err)
	ts := httptest.NewServer(server.New(server.Config{App: a}))
	defer ts.Close()
	e := &env{t: t, url: ts.URL, pool: pool, agents: a.Agents, admin: key, app: a}
	e.project("acme")
	p := e.do("POST", "/v1/projects/acme/packets", key, api.AssemblePacketJSONRequestBody{TargetRole: "support"})
	require.Equal(t, 201, p.status, p.text)
	r := e.do("POST", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/outcomes", key, api.RecordOutcomeJSONRequestBody{Status: "failure"})
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, true, e.verify().json["ok"])
	for _, sql := range []string{
		"UPDATE packet_outcomes SET status = 'success'",
		"DELETE FROM packet_outcomes",
		"TRUNCATE packet_outcomes",
		"ALTER TABLE packet_outcomes DISABLE TRIGGER packet_outcomes_append_only",
	} {
		_, err := pool.Exec(ctx, sql)
		require.Error(t, err, sql)
	}
	var status string
	require.NoError(t, pool.QueryRow(ctx, "SELECT status FROM packet_outcomes").Scan(&status))
	require.Equal(t, "failure", status)
}
