package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// TestTwoServersOneDatabase: two contextd processes (two app instances,
// each with its own pool) on one database, both assembling while both
// write items: every packet replays byte for byte with its records and
// cutoff; and of critics racing to accept one handoff through both, one
// wins and the rest get 409.
func TestTwoServersOneDatabase(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	pool, err := pgxpool.New(context.Background(), e.pool.Config().ConnString())
	require.NoError(t, err)
	defer pool.Close()
	other := httptest.NewServer(server.New(server.Config{App: app.New(store.New(pool, 0))}))
	defer other.Close()
	f := &env{t: t, url: other.URL, pool: e.pool, agents: e.agents, admin: e.admin}
	var items []api.BatchItem
	for i := range 200 {
		items = append(items, api.BatchItem{Key: fmt.Sprintf("k%03d", i), Kind: ptr("knowledge"), Priority: ptr(int32(i % 5)),
			Content: fmt.Sprintf("fact %d %s", i, strings.Repeat("filler words ", 10))})
	}
	e.batch("acme", items)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	for w := range 4 {
		srv := []*env{e, f}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				if w%2 == 0 {
					r := srv.do("PUT", fmt.Sprintf("/v1/projects/acme/items/k%03d", (w*8+i)%200), srv.admin,
						api.PutItemJSONRequestBody{Kind: ptr("knowledge"), Content: fmt.Sprintf("rewritten by %d at %d", w, i), Priority: ptr(int32(9))})
					require.Contains(t, []int{200, 201}, r.status, r.text)
				}
				r := srv.do("POST", "/v1/projects/acme/packets", srv.admin, api.AssemblePacketJSONRequestBody{TargetRole: "critic", TokenBudget: ptr(500)})
				require.Equal(t, 201, r.status, r.text)
				mu.Lock()
				ids = append(ids, r.json["packet_id"].(string))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, ids, 32)
	for i, id := range ids {
		srv := []*env{e, f}[i%2]
		rep := srv.do("POST", "/v1/projects/acme/packets/"+id+"/replay", srv.admin, nil)
		require.Equal(t, 200, rep.status, rep.text)
		require.Equal(t, true, rep.json["identical"], rep.text)
		require.Empty(t, rep.json["differences"], rep.text)
	}

	h := e.handoff(a.implementer, manifest("T-race", "critic"))
	codes := make(chan int, 6)
	for i := range 6 {
		srv := []*env{e, f}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- srv.do("POST", "/v1/projects/acme/handoffs/"+h+"/accept", a.critic, nil).status
		}()
	}
	wg.Wait()
	close(codes)
	won := 0
	for c := range codes {
		require.Contains(t, []int{200, 409}, c)
		if c == 200 {
			won++
		}
	}
	require.Equal(t, 1, won, "exactly one acceptor wins across both servers")
}

// TestDerivedRowsFollowEveryWrite: the rows assembly reads instead of the
// versions — the item row's rank fields, roles and window, the counters of
// open always-on and tool items, and the relevance index — agree with a
// recount from the current versions after every kind of write: creates,
// updates that change the trigger, roles, window or priority, deletes,
// revivals, batches, in both layers.
func TestDerivedRowsFollowEveryWrite(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	rng := rand.New(rand.NewPCG(11, 12))
	triggers := []*api.Trigger{nil, {Tool: ptr("lookup")}, {Tool: ptr("grep")},
		{Keywords: &[]string{"refund policy", "ledger"}}, {Relevance: ptr(true)}}
	write := func() api.ItemWrite {
		it := api.ItemWrite{Kind: ptr("knowledge"), Content: fmt.Sprintf("alpha beta %d ledger ledger", rng.IntN(5)), Priority: ptr(int32(rng.IntN(4)))}
		it.Trigger = triggers[rng.IntN(len(triggers))]
		switch rng.IntN(4) {
		case 0:
			it.Roles = &api.Roles{HiddenFrom: &[]string{"support"}}
		case 1:
			it.ValidUntil = ptr("2030-01-01T00:00:00Z")
		}
		return it
	}
	for step := range 120 {
		layer := []string{"acme", "_shared"}[rng.IntN(2)]
		key := fmt.Sprintf("k%02d", rng.IntN(12))
		switch rng.IntN(5) {
		case 0:
			r := e.do("DELETE", "/v1/projects/"+layer+"/items/"+key, e.admin, nil)
			require.Contains(t, []int{200, 204, 404}, r.status, r.text)
		case 1:
			var items []api.BatchItem
			for i := range 3 {
				it := write()
				items = append(items, api.BatchItem{Key: fmt.Sprintf("k%02d", (rng.IntN(12)+i)%12), Kind: it.Kind, Content: it.Content,
					Priority: it.Priority, Trigger: it.Trigger, Roles: it.Roles, ValidUntil: it.ValidUntil})
			}
			seen := map[string]bool{}
			var list []api.BatchItem
			for _, it := range items {
				if !seen[it.Key] {
					seen[it.Key] = true
					list = append(list, it)
				}
			}
			e.batch(layer, list)
		default:
			r := e.do("PUT", "/v1/projects/"+layer+"/items/"+key, e.admin, write())
			require.Contains(t, []int{200, 201}, r.status, r.text)
		}
		checkDerivedRows(t, e, step)
	}
}

func checkDerivedRows(t *testing.T, e *env, step int) {
	t.Helper()
	ctx := context.Background()
	var bad int
	require.NoError(t, e.pool.QueryRow(ctx, `
		SELECT count(*) FROM items i JOIN item_versions v ON (v.project, v.key, v.version) = (i.project, i.key, i.current_version)
		WHERE i.rank_priority <> -v.priority OR i.rank_time <> -(extract(epoch FROM v.created_at) * 1000000)::bigint
		   OR i.visible_to <> v.visible_to OR i.hidden_from <> v.hidden_from
		   OR i.valid_until IS DISTINCT FROM v.valid_until OR i.state_key <> v.state_key
		   OR i.open <> (cardinality(v.visible_to) = 0 AND cardinality(v.hidden_from) = 0 AND v.valid_from IS NULL AND v.valid_until IS NULL)`).Scan(&bad))
	require.Zero(t, bad, "step %d: item rows disagree with their current versions", step)
	require.NoError(t, e.pool.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT p.project, coalesce(c.always_open, 0) AS kept,
			       (SELECT count(*) FROM items i WHERE i.project = p.project AND i.live AND i.trigger_kind = 'always' AND i.open) AS real
			FROM projects p LEFT JOIN project_counters c ON c.project = p.project) x
		WHERE kept <> real`).Scan(&bad))
	require.Zero(t, bad, "step %d: always_open disagrees with a recount", step)
	require.NoError(t, e.pool.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT coalesce(c.project, r.project) AS project, coalesce(c.open, 0) AS kept, coalesce(r.n, 0) AS real
			FROM tool_counters c
			FULL JOIN (SELECT project, trigger_tool AS tool, count(*) AS n FROM items WHERE live AND open AND trigger_tool IS NOT NULL GROUP BY 1, 2) r
			  ON r.project = c.project AND r.tool = c.tool) x
		WHERE kept <> real`).Scan(&bad))
	require.Zero(t, bad, "step %d: tool_counters disagree with a recount", step)
	require.NoError(t, e.pool.QueryRow(ctx, `
		SELECT count(*) FROM (
			(SELECT project, lexeme, weight, key, version, open FROM item_terms
			 EXCEPT
			 SELECT v.project, w.lexeme, w.weight, v.key, v.version, i.open FROM items i
			 JOIN item_versions v ON (v.project, v.key, v.version) = (i.project, i.key, i.current_version)
			 CROSS JOIN LATERAL contextd_term_weights(contextd_search_vector(v.title, v.summary, v.content)) w WHERE i.live AND i.trigger_kind = 'relevance')
			UNION ALL
			(SELECT v.project, w.lexeme, w.weight, v.key, v.version, i.open FROM items i
			 JOIN item_versions v ON (v.project, v.key, v.version) = (i.project, i.key, i.current_version)
			 CROSS JOIN LATERAL contextd_term_weights(contextd_search_vector(v.title, v.summary, v.content)) w WHERE i.live AND i.trigger_kind = 'relevance'
			 EXCEPT
			 SELECT project, lexeme, weight, key, version, open FROM item_terms)) d`).Scan(&bad))
	require.Zero(t, bad, "step %d: item_terms disagree with the current relevance versions", step)
	require.NoError(t, e.pool.QueryRow(ctx, `
		SELECT count(*) FROM items i
		JOIN item_versions v ON (v.project, v.key, v.version) = (i.project, i.key, i.current_version)
		WHERE i.search IS DISTINCT FROM CASE WHEN i.live THEN contextd_search_vector(v.title, v.summary, v.content) END`).Scan(&bad))
	require.Zero(t, bad, "step %d: an item row's search vector is not its live current version's", step)
}

// TestInjectionsOfOneProject: the reverse lookup lists one project's
// packets. For a _shared item, ?project= names it; it is required when the
// caller may see more than one project, and the answer says which project
// it covers.
func TestInjectionsOfOneProject(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("p1")
	e.project("p2")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/_shared/items/house.style", e.admin, api.PutItemJSONRequestBody{Kind: ptr("instruction"), Content: "Be brief."}).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/p1/items/own", e.admin, api.PutItemJSONRequestBody{Kind: ptr("knowledge"), Content: "p1 only."}).status)
	ids := map[string][]string{}
	for _, p := range []string{"p1", "p1", "p2"} {
		r := e.do("POST", "/v1/projects/"+p+"/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "support", TokenBudget: ptr(2000)})
		require.Equal(t, 201, r.status, r.text)
		ids[p] = append([]string{r.json["packet_id"].(string)}, ids[p]...) // newest first
	}
	// An admin sees both projects: which one must be said.
	r := e.do("GET", "/v1/projects/_shared/items/house.style/injections", e.admin, nil)
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, "validation_failed", r.json["code"])
	require.Contains(t, r.text, "project")
	for _, p := range []string{"p1", "p2"} {
		r = e.do("GET", "/v1/projects/_shared/items/house.style/injections?project="+p, e.admin, nil)
		require.Equal(t, 200, r.status, r.text)
		require.Equal(t, p, r.json["project"])
		var got []string
		for _, inj := range r.list() {
			require.Equal(t, p, inj["project"])
			got = append(got, inj["packet_id"].(string))
		}
		require.Equal(t, ids[p], got, "newest first")
	}
	// Paging walks the same order.
	r = e.do("GET", "/v1/projects/_shared/items/house.style/injections?project=p1&limit=1", e.admin, nil)
	require.Equal(t, ids["p1"][:1], []string{r.list()[0]["packet_id"].(string)})
	cursor := r.json["next_cursor"].(string)
	r = e.do("GET", "/v1/projects/_shared/items/house.style/injections?project=p1&limit=1&cursor="+cursor, e.admin, nil)
	require.Equal(t, ids["p1"][1:], []string{r.list()[0]["packet_id"].(string)})
	// A cursor belongs to its listing: another project's, or another
	// item's, is refused rather than read as a position.
	r = e.do("GET", "/v1/projects/_shared/items/house.style/injections?project=p2&limit=1&cursor="+cursor, e.admin, nil)
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"cursor"}, r.pointers())
	r = e.do("GET", "/v1/projects/p1/items/own/injections?limit=1&cursor="+cursor, e.admin, nil)
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, 404, e.do("GET", "/v1/projects/_shared/items/house.style/injections?project=nope", e.admin, nil).status)
	require.Equal(t, 422, e.do("GET", "/v1/projects/_shared/items/house.style/injections?project=_shared", e.admin, nil).status)
	r = e.do("GET", "/v1/projects/_shared/items/house.style/injections?project=bad%20name!", e.admin, nil)
	require.Equal(t, 422, r.status, "a name no project can have is a malformed parameter, not a missing project")
	require.Equal(t, []string{"project"}, r.pointers())

	// An agent of one project needs not say it; a project outside its
	// scope does not exist for it.
	agent := e.agent("support", auth.ReadOnly, "p2")
	r = e.do("GET", "/v1/projects/_shared/items/house.style/injections", agent, nil)
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, "p2", r.json["project"])
	require.Len(t, r.list(), 1)
	require.Equal(t, 404, e.do("GET", "/v1/projects/_shared/items/house.style/injections?project=p1", agent, nil).status)

	// A project's own item lists that project's packets.
	r = e.do("GET", "/v1/projects/p1/items/own/injections", e.admin, nil)
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, "p1", r.json["project"])
	require.Len(t, r.list(), 2)
	require.Equal(t, 200, e.do("GET", "/v1/projects/p1/items/own/injections?project=p1", e.admin, nil).status)
	require.Equal(t, 422, e.do("GET", "/v1/projects/p1/items/own/injections?project=p2", e.admin, nil).status)
}

// TestBatchBodyLimit: a batch of items has a larger body limit than other
// requests (10,000 items of 2 KB fit), and is still bounded.
func TestBatchBodyLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	big := strings.Repeat("word ", 2<<20) // 10 MiB: over the 8 MiB default, under the batch limit
	// The batch passes the body limit and is judged: the kind is invalid, so
	// nothing is tokenized or written.
	r := e.do("POST", "/v1/projects/acme/items", e.admin, api.BatchItemsJSONRequestBody{Items: []api.BatchItem{{Key: "k", Kind: ptr("nonsense"), Content: big}}})
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, "validation_failed", r.json["code"])
	// Any other request of that size is refused.
	r = e.do("PUT", "/v1/projects/acme/items/k", e.admin, api.PutItemJSONRequestBody{Kind: ptr("knowledge"), Content: big})
	require.Equal(t, 413, r.status)
	require.Equal(t, "payload_too_large", r.json["code"])
	// A batch over its own limit is refused too.
	r = e.do("POST", "/v1/projects/acme/items", e.admin, api.BatchItemsJSONRequestBody{Items: []api.BatchItem{{Key: "k", Kind: ptr("knowledge"), Content: strings.Repeat(big, 4)}}})
	require.Equal(t, 413, r.status)
	require.Equal(t, "payload_too_large", r.json["code"])
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/k", e.admin, nil).status, "nothing was written")
}

// TestRevocationWithCachedKeys: agents of keys are kept for a second per
// process, so a revocation takes effect at once in the process that made
// it and within that second in another; a new agent's key works at once.
func TestRevocationWithCachedKeys(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	pool, err := pgxpool.New(context.Background(), e.pool.Config().ConnString())
	require.NoError(t, err)
	defer pool.Close()
	other := httptest.NewServer(server.New(server.Config{App: app.New(store.New(pool, 0))}))
	defer other.Close()
	f := &env{t: t, url: other.URL, pool: e.pool, agents: e.agents, admin: e.admin}

	mk := func() (string, string) {
		r := e.do("POST", "/v1/agents", e.admin, api.CreateAgentJSONRequestBody{Name: "r", Role: "reader", Permission: "read-only", Projects: []string{"acme"}})
		require.Equal(t, 201, r.status, r.text)
		return r.json["id"].(string), r.json["key"].(string)
	}
	id, key := mk()
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items", key, nil).status, "a new key works at once")
	require.Equal(t, 200, f.do("GET", "/v1/projects/acme/items", key, nil).status, "in every process")
	require.Equal(t, 200, e.do("DELETE", "/v1/agents/"+id, e.admin, nil).status)
	require.Equal(t, 401, e.do("GET", "/v1/projects/acme/items", key, nil).status, "revoked at once where it was revoked")
	time.Sleep(1100 * time.Millisecond)
	require.Equal(t, 401, f.do("GET", "/v1/projects/acme/items", key, nil).status, "and within a second in another process")

	// A revocation in the other process, while this one uses the key.
	id, key = mk()
	for range 5 {
		require.Equal(t, 200, e.do("GET", "/v1/projects/acme/items", key, nil).status)
	}
	require.Equal(t, 200, f.do("DELETE", "/v1/agents/"+id, f.admin, nil).status)
	require.Equal(t, 401, f.do("GET", "/v1/projects/acme/items", key, nil).status)
	time.Sleep(1100 * time.Millisecond)
	require.Equal(t, 401, e.do("GET", "/v1/projects/acme/items", key, nil).status)
}

// TestRevocationReachesWatchingProcesses: with Watch running, as serve
// runs it, a process keeps an agent beyond the one-second TTL and still
// learns of its revocation elsewhere as the revoking transaction commits;
// and a reconnect of its LISTEN connection drops everything it kept.
func TestRevocationReachesWatchingProcesses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, e.pool.Config().ConnString())
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(pool, 0)
	b := app.New(st)
	other := httptest.NewServer(server.New(server.Config{App: b}))
	defer other.Close()
	go b.Agents.Watch(ctx)
	go e.app.Agents.Watch(ctx)
	f := &env{t: t, url: other.URL, pool: e.pool, agents: e.agents, admin: e.admin}
	listening := func() int {
		var n int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`, store.ListenerName(store.AgentsChannel)).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return listening() == 2 }, 5*time.Second, 20*time.Millisecond)

	r := e.do("POST", "/v1/agents", e.admin, api.CreateAgentJSONRequestBody{Name: "r", Role: "reader", Permission: "read-only", Projects: []string{"acme"}})
	require.Equal(t, 201, r.status, r.text)
	id, key := r.json["id"].(string), r.json["key"].(string)
	require.Equal(t, 200, f.do("GET", "/v1/projects/acme/items", key, nil).status)
	lookups := func() int64 { return st.RoundTrips() }
	// Past the TTL the agent still comes from the cache, since changes are
	// heard: the GET is the listing alone. On a loaded machine a heartbeat
	// can come late, and then the entry rightly falls back to the TTL and is
	// read again; so up to three tries, each past the TTL of the last read.
	var before int64
	hit := false
	for try := 0; try < 3 && !hit; try++ {
		time.Sleep(1200 * time.Millisecond)
		before = lookups()
		require.Equal(t, 200, f.do("GET", "/v1/projects/acme/items", key, nil).status)
		hit = lookups()-before == 1
	}
	require.True(t, hit, "the agent came from the cache after its TTL while changes are heard")

	require.Equal(t, 200, e.do("DELETE", "/v1/agents/"+id, e.admin, nil).status)
	start := time.Now()
	require.Eventually(t, func() bool { return f.do("GET", "/v1/projects/acme/items", key, nil).status == 401 }, time.Second, 10*time.Millisecond)
	t.Logf("revocation seen by the other process after %v", time.Since(start))
	require.Less(t, time.Since(start), 500*time.Millisecond, "through NOTIFY, not the TTL")

	// A revocation made outside contextd (an operator's UPDATE) is heard too.
	r = e.do("POST", "/v1/agents", e.admin, api.CreateAgentJSONRequestBody{Name: "q", Role: "reader", Permission: "read-only", Projects: []string{"acme"}})
	require.Equal(t, 201, r.status, r.text)
	id, key = r.json["id"].(string), r.json["key"].(string)
	require.Equal(t, 200, f.do("GET", "/v1/projects/acme/items", key, nil).status)
	_, err = e.pool.Exec(ctx, `UPDATE agents SET revoked_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	start = time.Now()
	require.Eventually(t, func() bool { return f.do("GET", "/v1/projects/acme/items", key, nil).status == 401 }, time.Second, 10*time.Millisecond)
	require.Less(t, time.Since(start), 500*time.Millisecond, "through the trigger's NOTIFY, not the TTL")

	// So is an operator's DELETE of the agent's row (a leaked key removed).
	r = e.do("POST", "/v1/agents", e.admin, api.CreateAgentJSONRequestBody{Name: "d", Role: "reader", Permission: "read-only", Projects: []string{"acme"}})
	require.Equal(t, 201, r.status, r.text)
	id, key = r.json["id"].(string), r.json["key"].(string)
	require.Equal(t, 200, f.do("GET", "/v1/projects/acme/items", key, nil).status)
	_, err = e.pool.Exec(ctx, `DELETE FROM agents WHERE id = $1`, id)
	require.NoError(t, err)
	start = time.Now()
	require.Eventually(t, func() bool { return f.do("GET", "/v1/projects/acme/items", key, nil).status == 401 }, time.Second, 10*time.Millisecond)
	require.Less(t, time.Since(start), 500*time.Millisecond, "through the delete trigger's NOTIFY, not the TTL")

	// A reconnect drops what was kept: the next request looks the agent up,
	// though the entry is still within keyMaxAge and changes are heard
	// again.
	r = e.do("POST", "/v1/agents", e.admin, api.CreateAgentJSONRequestBody{Name: "s", Role: "reader", Permission: "read-only", Projects: []string{"acme"}})
	require.Equal(t, 201, r.status, r.text)
	key = r.json["key"].(string)
	require.Equal(t, 200, f.do("GET", "/v1/projects/acme/items", key, nil).status)
	time.Sleep(1200 * time.Millisecond) // kept only because changes are heard
	pids := func() []int32 {
		var ps []int32
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT coalesce(array_agg(pid ORDER BY pid), '{}') FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`,
			store.ListenerName(store.AgentsChannel)).Scan(&ps))
		return ps
	}
	old := pids()
	_, err = e.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`, store.ListenerName(store.AgentsChannel))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		now := pids()
		return len(now) == 2 && !slices.Contains(now, old[0]) && !slices.Contains(now, old[1])
	}, 10*time.Second, 20*time.Millisecond, "both listeners reconnect")
	time.Sleep(400 * time.Millisecond) // connected and heard again
	before = lookups()
	require.Equal(t, 200, f.do("GET", "/v1/projects/acme/items", key, nil).status)
	require.Equal(t, int64(2), lookups()-before, "the agent is read again after the reconnect, then the listing")
}
