package item

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/store"
)

// maxGroup is the most single-item writes one transaction takes, and
// groupTimeout the longest a group's transactions may take together.
const (
	maxGroup     = 64
	groupTimeout = time.Minute
)

// putCall is one single-item write waiting for, or done by, a group.
type putCall struct {
	agent   *auth.Agent
	p       prepared
	ifMatch *Precondition
	// res and err are the write's own answer: err is what refused this
	// write alone (not found, precondition); a failed transaction is
	// handled by runGroup.
	res  PutResult
	err  error
	done chan struct{} // closed when res and err are final
}

// writeGroups commits concurrent single-item writes of one project
// together: while one transaction of a project runs, the writes that
// arrive queue, and the next transaction takes all of them (up to
// maxGroup). Every write of a project moves the project's head under its
// row lock, held until COMMIT is durable, so one project's transactions
// commit one after the other whatever their number; a group pays that
// wait, its round trips and its commit once for all its writes. A write
// that arrives while nothing runs starts at once, so a lone writer waits
// for nobody.
//
// Up to lanes groups of a project are in flight at once, so that one
// group's statements run while another waits for its COMMIT to be durable
// and for the project's head: with one, a single backend did a project's
// writes and the two cores stood 40% idle (vmstat) during 8 clients' PUTs.
// Two lanes measured 814–841/s against 576–679/s with one, in turns on one
// database; three no better, four worse (contextd bench --only put). A key
// is in one group at a time in all lanes, so writes of one key keep their
// order; the lanes' commits take the counter and head rows in one order,
// as every other writer does, so they cannot deadlock.
//
// Each write is still all or nothing: a write the group refuses (a hidden
// item, a failed If-Match) changes nothing and is answered alone, and a
// group whose transaction fails runs each of its writes again in a
// transaction of its own, so no write fails because another one did. A
// group holds a key once: a second write of the key waits for the next
// group, so writes of one key keep their order.
type writeGroups struct {
	run   func(proj string, calls []*putCall)
	lanes int

	mu       sync.Mutex
	projects map[string]*queue
}

type queue struct {
	calls    []*putCall
	draining int             // goroutines draining this queue, at most writeGroups.lanes
	inflight map[string]bool // keys of the groups being written
}

// writeLanes is the most groups of one project a Service has in flight at
// once (see writeGroups).
const writeLanes = 2

func newWriteGroups(run func(proj string, calls []*putCall), lanes int) *writeGroups {
	return &writeGroups{run: run, lanes: max(lanes, 1), projects: map[string]*queue{}}
}

// await queues c and waits until a group has done it. If ctx ends while c
// still waits in the queue, c is withdrawn (nothing written) and the
// context's error returned; once a group holds c, await waits for its
// answer, so the caller never reports a failure for a write that commits.
func (g *writeGroups) await(ctx context.Context, proj string, c *putCall) error {
	g.mu.Lock()
	q := g.projects[proj]
	if q == nil {
		q = &queue{inflight: map[string]bool{}}
		g.projects[proj] = q
	}
	q.calls = append(q.calls, c)
	if q.draining < g.lanes {
		q.draining++
		go g.drain(proj, q)
	}
	g.mu.Unlock()
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	i := slices.Index(q.calls, c)
	if i >= 0 {
		q.calls = slices.Delete(q.calls, i, i+1)
	}
	g.mu.Unlock()
	if i >= 0 {
		return ctx.Err()
	}
	<-c.done
	return nil
}

// drain runs groups of proj's queue until it is empty.
func (g *writeGroups) drain(proj string, q *queue) {
	for {
		g.mu.Lock()
		group := take(q)
		if len(group) == 0 {
			q.draining--
			if q.draining == 0 && len(q.calls) == 0 {
				delete(g.projects, proj)
			}
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.run(proj, group)
		g.mu.Lock()
		for _, c := range group {
			delete(q.inflight, c.p.key)
		}
		g.mu.Unlock()
		for _, c := range group {
			close(c.done)
		}
	}
}

// take removes the next group from q: the waiting writes in arrival order,
// each key once, at most maxGroup.
func take(q *queue) []*putCall {
	var group, rest []*putCall
	for _, c := range q.calls {
		if len(group) == maxGroup || q.inflight[c.p.key] {
			rest = append(rest, c)
			continue
		}
		q.inflight[c.p.key] = true
		group = append(group, c)
	}
	q.calls = rest
	return group
}

// writeTx is a group's transaction: its statements are the write path's
// alone, whose generic plans probe by key (store.TxOpts.GenericPlans).
var writeTx = store.TxOpts{GenericPlans: true}

// runGroup does a group's writes in one transaction, or, when that
// transaction fails, each in one of its own.
func (s *Service) runGroup(proj string, calls []*putCall) {
	// The group belongs to no one request: a client that goes away does
	// not undo the others' writes.
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	err := s.store.InTxOpts(ctx, writeTx, func(tx *store.Tx) error { return s.putMany(ctx, tx, proj, calls) })
	if err == nil {
		return
	}
	if len(calls) == 1 {
		calls[0].err = err
		return
	}
	for _, c := range calls {
		c := c
		if err := s.store.InTxOpts(ctx, writeTx, func(tx *store.Tx) error { return s.putMany(ctx, tx, proj, []*putCall{c}) }); err != nil {
			c.err = err
		}
	}
}

// putMany writes calls (distinct keys) in tx: it locks their item rows,
// decides each write as decide does, appends the new versions and reads
// the items as they now are. Its writes wait in the transaction's pipeline
// and go with that read: with BEGIN and the lock before and COMMIT after,
// any number of writes take three round trips. A write refused by decide
// gets its error in its call; the error returned is the transaction's.
func (s *Service) putMany(ctx context.Context, tx *store.Tx, proj string, calls []*putCall) error {
	keys := make([]string, len(calls))
	for i, c := range calls {
		keys[i] = c.p.key
		c.res, c.err = PutResult{}, nil // a transaction run again decides again
	}
	slices.Sort(keys)
	if err := s.projects.Writable(ctx, tx, proj); err != nil {
		return err
	}
	current, err := tx.ItemLockCurrent(ctx, proj, keys)
	if err != nil {
		return err
	}
	var news []store.NewVersion
	written := keys[:0:0]
	for _, c := range calls {
		cur, exists := current[c.p.key]
		e, changed, err := decide(c.agent, c.p, cur, exists, c.ifMatch)
		if err != nil {
			c.err = err
			continue
		}
		c.res.Status = e.Status
		written = append(written, c.p.key)
		if changed {
			nv := newVersion(c.p, e.Version)
			nv.Was, nv.CreatedBy, nv.After = cur.Counted, c.agent.ID, cur.CreatedAt
			news = append(news, nv)
		}
	}
	if len(written) == 0 {
		return nil
	}
	return tx.Pipeline(ctx, func() error {
		if err := tx.ItemVersionsAppend(ctx, proj, news); err != nil {
			return err
		}
		now, err := currentVersions(ctx, tx, proj, written)
		if err != nil {
			return err
		}
		for _, c := range calls {
			if c.err != nil {
				continue
			}
			v, ok := now[c.p.key]
			if !ok {
				return fmt.Errorf("item %s/%s has no current version after its write", proj, c.p.key)
			}
			c.res.Version = v.Version
		}
		return nil
	})
}

// currentVersions reads the current versions of keys; one key, the common
// case, by the single-key statement, whose plan is generic and cached.
func currentVersions(ctx context.Context, tx *store.Tx, proj string, keys []string) (map[string]store.CurrentVersion, error) {
	if len(keys) != 1 {
		return tx.ItemVersionCurrentMany(ctx, proj, keys)
	}
	v, err := tx.ItemVersionCurrent(ctx, proj, keys[0])
	if err != nil {
		return nil, err
	}
	return map[string]store.CurrentVersion{keys[0]: {Version: v}}, nil
}
