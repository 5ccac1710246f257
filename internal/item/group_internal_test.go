package item

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
)

func call(key string) *putCall {
	return &putCall{p: prepared{key: key}, done: make(chan struct{})}
}

// gatedGroups is writeGroups whose first group waits at a gate: writes
// that arrive meanwhile queue, so the groups after it are known.
type gatedGroups struct {
	gate   chan struct{}
	mu     sync.Mutex
	groups [][]string
}

func (g *gatedGroups) run(inner func(string, []*putCall)) func(string, []*putCall) {
	return func(proj string, calls []*putCall) {
		g.mu.Lock()
		first := len(g.groups) == 0
		var keys []string
		for _, c := range calls {
			keys = append(keys, c.p.key)
		}
		g.groups = append(g.groups, keys)
		g.mu.Unlock()
		if first {
			<-g.gate
		}
		if inner != nil {
			inner(proj, calls)
		}
	}
}

// waitQueued waits until n writes wait in proj's queue.
func waitQueued(t *testing.T, wg *writeGroups, proj string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		wg.mu.Lock()
		defer wg.mu.Unlock()
		q := wg.projects[proj]
		return q != nil && len(q.calls) == n
	}, 5*time.Second, time.Millisecond)
}

func TestWriteGroupsTakeWhatQueuedEachKeyOnce(t *testing.T) {
	g := &gatedGroups{gate: make(chan struct{})}
	wg := newWriteGroups(g.run(nil), 1)
	ctx := context.Background()
	var done sync.WaitGroup
	submit := func(c *putCall) {
		done.Add(1)
		go func() { defer done.Done(); require.NoError(t, wg.await(ctx, "p", c)) }()
	}
	submit(call("a"))
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.groups) == 1 }, 5*time.Second, time.Millisecond)
	for i, k := range []string{"b", "c", "b", "d"} {
		submit(call(k))
		waitQueued(t, wg, "p", i+1)
	}
	// Another project's writes do not wait for this one's.
	other := call("x")
	require.NoError(t, wg.await(ctx, "q", other))
	close(g.gate)
	done.Wait()
	// The group after the first holds every write that queued, in arrival
	// order, each key once; the second write of b goes in the next group.
	require.Equal(t, [][]string{{"a"}, {"x"}, {"b", "c", "d"}, {"b"}}, g.groups)
	// The goroutine that drained a queue removes it after answering its
	// last group.
	require.Eventually(t, func() bool {
		wg.mu.Lock()
		defer wg.mu.Unlock()
		return len(wg.projects) == 0
	}, 5*time.Second, time.Millisecond, "an idle project keeps no queue")
}

// TestWriteGroupsLanesKeepAKeyInOneGroup: with two lanes a second group of
// the project runs while the first is held, but a write of a key the held
// group has waits for it, while a write of another key passes it.
func TestWriteGroupsLanesKeepAKeyInOneGroup(t *testing.T) {
	g := &gatedGroups{gate: make(chan struct{})}
	wg := newWriteGroups(g.run(nil), 2)
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- wg.await(ctx, "p", call("a")) }()
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.groups) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, wg.await(ctx, "p", call("b")), "the second lane runs b while a's group is held")
	again := make(chan error, 1)
	go func() { again <- wg.await(ctx, "p", call("a")) }()
	waitQueued(t, wg, "p", 1)
	require.NoError(t, wg.await(ctx, "p", call("c")), "c passes the second write of a")
	select {
	case err := <-again:
		t.Fatalf("the second write of a ran while the first was held: %v", err)
	default:
	}
	g.mu.Lock()
	require.Equal(t, [][]string{{"a"}, {"b"}, {"c"}}, g.groups)
	g.mu.Unlock()
	close(g.gate)
	require.NoError(t, <-first)
	require.NoError(t, <-again)
	require.Equal(t, [][]string{{"a"}, {"b"}, {"c"}, {"a"}}, g.groups)
	require.Eventually(t, func() bool {
		wg.mu.Lock()
		defer wg.mu.Unlock()
		return len(wg.projects) == 0
	}, 5*time.Second, time.Millisecond, "an idle project keeps no queue")
}

func TestWriteGroupsWithdrawAWriteWhoseCallerLeft(t *testing.T) {
	g := &gatedGroups{gate: make(chan struct{})}
	wg := newWriteGroups(g.run(nil), 1)
	first := make(chan error, 1)
	go func() { first <- wg.await(context.Background(), "p", call("a")) }()
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.groups) == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { left <- wg.await(ctx, "p", call("b")) }()
	waitQueued(t, wg, "p", 1)
	cancel()
	require.ErrorIs(t, <-left, context.Canceled)
	close(g.gate)
	require.NoError(t, <-first)
	require.Equal(t, [][]string{{"a"}}, g.groups, "a withdrawn write is never run")
}

// TestAGroupIsOneTransactionAndEachWriteAnswersAlone runs a group of
// writes through the database: new keys, an update, an unchanged write, a
// write of an item hidden from its writer and one whose If-Match fails.
// Each gets the answer it would have had alone, the refused ones change
// nothing, and the group takes the three round trips of one PUT.
func TestAGroupIsOneTransactionAndEachWriteAnswersAlone(t *testing.T) {
	st := pgtest.NewStore(t)
	ctx := context.Background()
	projects := project.NewService(st)
	s := NewService(st, projects)
	admin := &auth.Agent{ID: "agt_admin", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}}
	planner := &auth.Agent{ID: "agt_planner", Role: "planner", Permission: auth.Edit, Projects: []string{"acme"}}
	_, _, err := projects.Put(ctx, admin, "acme", "")
	require.NoError(t, err)
	_, err = s.Put(ctx, admin, "acme", Input{Key: "old", Content: "refunds take five days"}, PutOpts{})
	require.NoError(t, err)
	_, err = s.Put(ctx, admin, "acme", Input{Key: "same", Content: "same as before"}, PutOpts{})
	require.NoError(t, err)
	_, err = s.Put(ctx, admin, "acme", Input{Key: "secret", Content: "for reviewers", Roles: &ctxtype.Roles{VisibleTo: []string{"reviewer"}}}, PutOpts{})
	require.NoError(t, err)

	g := &gatedGroups{gate: make(chan struct{})}
	var trips int64
	s.groups = newWriteGroups(g.run(func(proj string, calls []*putCall) { // one lane: what queues behind the first group is the next
		before := st.RoundTrips()
		s.runGroup(proj, calls)
		if len(calls) > 1 {
			trips = st.RoundTrips() - before
		}
	}), 1)
	type answer struct {
		res PutResult
		err error
	}
	put := func(agent *auth.Agent, in Input, opts PutOpts) chan answer {
		ch := make(chan answer, 1)
		go func() {
			res, err := s.Put(ctx, agent, "acme", in, opts)
			ch <- answer{res, err}
		}()
		return ch
	}
	warm := put(admin, Input{Key: "warm", Content: "opens the gate"}, PutOpts{})
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.groups) == 1 }, 5*time.Second, time.Millisecond)
	var answers []chan answer
	for i, w := range []struct {
		agent *auth.Agent
		in    Input
		opts  PutOpts
	}{
		{planner, Input{Key: "new-1", Content: "first new"}, PutOpts{}},
		{planner, Input{Key: "old", Content: "refunds take three days"}, PutOpts{IfMatch: &Precondition{Versions: []int{1}}}},
		{admin, Input{Key: "same", Content: "same as before"}, PutOpts{}},
		{planner, Input{Key: "secret", Content: "overwritten?"}, PutOpts{}},
		{planner, Input{Key: "new-2", Content: "second new"}, PutOpts{IfMatch: &Precondition{Any: true}}},
		{admin, Input{Key: "new-3", Content: "third new"}, PutOpts{}},
	} {
		answers = append(answers, put(w.agent, w.in, w.opts))
		waitQueued(t, s.groups, "acme", i+1)
	}
	close(g.gate)
	require.NoError(t, (<-warm).err)
	got := make([]answer, len(answers))
	for i, ch := range answers {
		got[i] = <-ch
	}
	require.Len(t, g.groups, 2)
	require.Len(t, g.groups[1], 6, "the six writes that queued are one group")
	require.LessOrEqual(t, trips, int64(3), "a group takes the round trips of one PUT")

	require.NoError(t, got[0].err)
	require.Equal(t, Created, got[0].res.Status)
	require.Equal(t, 1, got[0].res.Version.Version)
	require.Equal(t, "agt_planner", got[0].res.Version.CreatedBy)
	require.NoError(t, got[1].err)
	require.Equal(t, Updated, got[1].res.Status)
	require.Equal(t, 2, got[1].res.Version.Version)
	require.Equal(t, "refunds take three days", got[1].res.Version.Content)
	require.NoError(t, got[2].err)
	require.Equal(t, Unchanged, got[2].res.Status)
	require.Equal(t, 1, got[2].res.Version.Version)
	require.ErrorIs(t, got[3].err, ErrNotFound, "an item hidden from its writer does not exist for it")
	require.ErrorIs(t, got[4].err, fault.ErrPreconditionFailed)
	require.NoError(t, got[5].err)
	require.Equal(t, "agt_admin", got[5].res.Version.CreatedBy)

	// The refused writes changed nothing.
	v, err := s.Get(ctx, admin, "acme", "secret", nil)
	require.NoError(t, err)
	require.Equal(t, "for reviewers", v.Content)
	require.Equal(t, 1, v.Version)
	_, err = s.Get(ctx, admin, "acme", "new-2", nil)
	require.ErrorIs(t, err, ErrNotFound)
	for _, k := range []string{"new-1", "new-3"} {
		v, err := s.Get(ctx, admin, "acme", k, nil)
		require.NoError(t, err, k)
		require.Equal(t, 1, v.Version)
	}
}

// TestConcurrentPutsOfOneKeyAllLand: writers of one key through the
// groups make one version each, numbered without a gap.
func TestConcurrentPutsOfOneKeyAllLand(t *testing.T) {
	st := pgtest.NewStore(t)
	ctx := context.Background()
	projects := project.NewService(st)
	s := NewService(st, projects)
	admin := &auth.Agent{ID: "agt_admin", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}}
	_, _, err := projects.Put(ctx, admin, "acme", "")
	require.NoError(t, err)
	const writers = 16
	errs := make(chan error, writers*2)
	for w := range writers {
		go func() {
			_, err := s.Put(ctx, admin, "acme", Input{Key: "shared", Content: fmt.Sprintf("writer %d", w)}, PutOpts{})
			errs <- err
			_, err = s.Put(ctx, admin, "acme", Input{Key: fmt.Sprintf("own-%d", w), Content: "mine"}, PutOpts{})
			errs <- err
		}()
	}
	var all error
	for range writers * 2 {
		all = errors.Join(all, <-errs)
	}
	require.NoError(t, all)
	v, err := s.Get(ctx, admin, "acme", "shared", nil)
	require.NoError(t, err)
	require.Equal(t, writers, v.Version, "one version per writer")
	page, err := s.Versions(ctx, admin, "acme", "shared", "", 100)
	require.NoError(t, err)
	require.Len(t, page.Versions, writers)
}

// TestLanesKeepCountersAndOrder: 8 writers move 12 keys between always-on,
// two tools and relevance, through the Service's lanes. Every write lands
// (no deadlock between the lanes' commits, which take the counters and the
// head), each key's versions are dense, and the counters of open items
// that the lanes added up equal a count of the items as they are.
func TestLanesKeepCountersAndOrder(t *testing.T) {
	pool := pgtest.New(t)
	st := store.New(pool, pgtest.AcquireTimeout)
	ctx := context.Background()
	projects := project.NewService(st)
	s := NewService(st, projects)
	require.Equal(t, writeLanes, s.groups.lanes)
	admin := &auth.Agent{ID: "agt_admin", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}}
	_, _, err := projects.Put(ctx, admin, "acme", "")
	require.NoError(t, err)
	tools := []string{"deploy", "search"}
	trigger := func(n int) *ctxtype.Trigger {
		switch n % 4 {
		case 0:
			return &ctxtype.Trigger{Always: true}
		case 1, 2:
			return &ctxtype.Trigger{Tool: &tools[n%2]}
		}
		return &ctxtype.Trigger{Relevance: true}
	}
	const writers, rounds, keys = 8, 25, 12
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		all  error
		made = map[string]int{} // versions written per key
	)
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				key := fmt.Sprintf("k%d", (w*7+i)%keys)
				res, err := s.Put(ctx, admin, "acme", Input{Key: key, Content: fmt.Sprintf("fact %d-%d about refunds", w, i), Trigger: trigger(w + i)}, PutOpts{})
				mu.Lock()
				all = errors.Join(all, err)
				if err == nil && res.Status != Unchanged {
					made[key]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, all)
	for key, n := range made {
		page, err := s.Versions(ctx, admin, "acme", key, "", 100)
		require.NoError(t, err)
		require.Len(t, page.Versions, n, key)
		for i, v := range page.Versions {
			require.Equal(t, i+1, v.Version, "%s: versions are dense", key)
		}
	}
	var counted, always int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT always_open FROM project_counters WHERE project = 'acme'`).Scan(&counted))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM items WHERE project = 'acme' AND live AND open AND trigger_kind = 'always'`).Scan(&always))
	require.Equal(t, always, counted, "always-on counter")
	for _, tool := range tools {
		var counted, open int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce((SELECT open FROM tool_counters WHERE project = 'acme' AND tool = $1), 0)`, tool).Scan(&counted))
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM items WHERE project = 'acme' AND live AND open AND trigger_tool = $1`, tool).Scan(&open))
		require.Equal(t, open, counted, "counter of tool %s", tool)
	}
}
