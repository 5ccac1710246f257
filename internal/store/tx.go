package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextd/contextd/internal/fault"
)

// TxOpts choose a transaction's isolation. The default, read committed, is
// what every write uses: a per-project head row updated by concurrent
// writers then waits for its lock instead of failing with serialization
// errors. Packet reads use Snapshot instead.
type TxOpts struct {
	// ReadOnlySnapshot runs the transaction at repeatable read, read only:
	// every statement sees the one snapshot taken by the first.
	ReadOnlySnapshot bool
	// GenericPlans makes PostgreSQL run the transaction's prepared
	// statements with their generic plans, never planning them again for
	// their parameters. Only for statements whose generic plan is right
	// whatever the statistics say: the item write path's, which probe by
	// key by construction (TestItemWritesProbeByKey), and whose planning
	// was about a quarter of PostgreSQL's time in a small write. (A
	// packet's assembly turns them on part way: Tx.GenericPlans.)
	GenericPlans bool
}

// InTxOpts is InTx with opts.
func (s *Store) InTxOpts(ctx context.Context, opts TxOpts, fn func(tx *Tx) error) error {
	return s.run(ctx, opts, fn)
}

// InTx runs fn in a transaction and commits when fn returns nil; any error
// rolls back (with a context that outlives the request's, so a cancelled
// request still rolls back cleanly). A serialization failure, a deadlock
// or a connection lost before COMMIT was sent runs fn again in a new
// transaction, up to MaxRetries times; fn must therefore only touch
// state it resets itself.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	return s.run(ctx, TxOpts{}, fn)
}

// Snapshot runs fn in a read-only repeatable-read transaction: one
// consistent view of the database for every statement fn runs.
func (s *Store) Snapshot(ctx context.Context, fn func(tx *Tx) error) error {
	return s.run(ctx, TxOpts{ReadOnlySnapshot: true}, fn)
}

func (s *Store) run(ctx context.Context, opts TxOpts, fn func(tx *Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.once(ctx, opts, fn)
		if err == nil {
			return nil
		}
		if !Retryable(err) || ctx.Err() != nil {
			return err
		}
		if attempt == MaxRetries {
			return gaveUp(err)
		}
		s.retries.Add(1)
	}
}

// gaveUp turns a retryable error that kept coming into the unavailable it
// is for the client.
func gaveUp(err error) error {
	return fmt.Errorf("%w: the database refused the transaction %d times: %v", fault.ErrUnavailable, MaxRetries+1, err)
}

func (s *Store) once(ctx context.Context, opts TxOpts, fn func(tx *Tx) error) error {
	tx, err := s.Begin(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback(ctx)
		// A connection lost under fn lost the whole transaction before
		// COMMIT: running it again is safe.
		return retryableIfLost(err)
	}
	return tx.Commit(ctx)
}

// Begin opens a transaction the caller ends with Commit or Rollback. Use it
// only where the end cannot be one closure (the idempotency layer, which
// stores the answer with the effect); InTx is the rule.
func (s *Store) Begin(ctx context.Context, opts TxOpts) (*Tx, error) {
	conn, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	tc := &txConn{c: conn, trips: &s.trips, begin: beginStatements(opts)}
	t := &Tx{DB: DB{ex: tc}, tc: tc, conn: conn, writes: &s.writes}
	if sl := s.sealer.Load(); sl != nil {
		t.seal = *sl
	}
	return t, nil
}

// Pipeline runs fn with the statements it sends without reading an answer
// (every :exec query) waiting to go with the next statement that returns
// rows, or at the end of fn: one round trip for a run of writes. An error
// of such a statement is reported by the call that sends it, so fn must not
// branch on those errors; the transaction stays all or nothing.
func (t *Tx) Pipeline(ctx context.Context, fn func() error) error {
	return t.pipeline(ctx, fn, t.tc.flush)
}

// GenericPlans makes the rest of the transaction run its prepared
// statements with their generic plans. The setting waits to go with the
// transaction's next statement, in its round trip. For a packet's
// assembly: its statements are planned by their shape, the same with
// statistics and without, custom or generic
// (TestAssemblyPlansNeedNoStatistics), so planning them again for each
// packet's arguments bought nothing, and in a project of 100,000 items it
// cost ~0.5 ms of a packet (bind, mostly estimating the rank cursor's
// selectivity from the index's ends). The reads before it (the read
// point, the role's policies, the predecessors) keep PostgreSQL's choice:
// a generic plan made while a table is small stays on the connection.
func (t *Tx) GenericPlans() {
	t.tc.waiting = append(t.tc.waiting, queued{sql: setGenericPlans, exec: true})
}

// pipelineUnread is Pipeline whose statements are sent at its end without
// waiting for their answers: the transaction's next statement, or COMMIT,
// reads them first and reports their error, if any, as its own.
// PostgreSQL works on them meanwhile, while the caller prepares what it
// sends next; the write path of a large batch overlaps its chunks so.
func (t *Tx) pipelineUnread(ctx context.Context, fn func() error) error {
	return t.pipeline(ctx, fn, t.tc.sendUnread)
}

// pipeline runs fn with its Execs waiting and, at the end of the outermost
// pipeline, sends them with send (inside another, they wait for its end).
func (t *Tx) pipeline(ctx context.Context, fn func() error, send func(context.Context) error) error {
	t.tc.defers++
	err := fn()
	t.tc.defers--
	if err != nil {
		t.tc.waiting = nil // never sent: the transaction or savepoint rolls back
		return err
	}
	if t.tc.defers > 0 {
		return nil
	}
	return retryableIfLost(interpret(send(ctx)))
}

// Commit commits. A serialization failure or deadlock at commit (nothing
// was committed) is retryable; a connection lost while committing is not,
// because the outcome is unknown: that is fault.ErrUnavailable, and a
// client retries through its Idempotency-Key.
func (t *Tx) Commit(ctx context.Context) error {
	defer t.release()
	entries := t.tc.entries
	if err := t.appendEntries(ctx); err != nil {
		// A bulk append has sent statements: undo them.
		_ = t.tc.rollback(context.WithoutCancel(ctx))
		return retryableIfLost(err)
	}
	// The answers of a pipeline sent unread come before COMMIT is sent: a
	// connection lost while reading them lost the transaction, not its
	// commit, so that is retryable like any loss before COMMIT.
	if err := t.tc.settle(); err != nil {
		_ = t.tc.rollback(context.WithoutCancel(ctx))
		return retryableIfLost(interpret(err))
	}
	if err := t.tc.commit(ctx); err != nil {
		err = interpret(err)
		if lost(err) {
			return fmt.Errorf("%w: the connection was lost while committing; the outcome is unknown", errUnknownOutcome)
		}
		return fmt.Errorf("commit: %w", err)
	}
	t.writes.committed(entries)
	return nil
}

var errUnknownOutcome = fmt.Errorf("%w: commit outcome unknown", fault.ErrUnavailable)

// Rollback rolls back; it is safe after Commit and twice.
func (t *Tx) Rollback(ctx context.Context) {
	if t.conn == nil {
		return
	}
	_ = t.tc.rollback(context.WithoutCancel(ctx))
	t.release()
}

func (t *Tx) release() {
	if t.conn != nil {
		t.conn.Release()
		t.conn = nil
	}
}

// Savepoint runs fn in a savepoint of t: an error of fn undoes only what
// fn did, and t stays usable (the idempotency layer still stores a 4xx
// answer after a refused write).
func (t *Tx) Savepoint(ctx context.Context, fn func(tx *Tx) error) error {
	// What waits belongs to the caller, not to fn: send it before the
	// savepoint (a BEGIN not yet sent goes with the savepoint itself), so
	// that undoing fn drops only fn's statements.
	if len(t.tc.waiting) > 0 {
		if err := t.tc.flush(ctx); err != nil {
			return retryableIfLost(interpret(err))
		}
	}
	defers := t.tc.defers
	t.tc.defers = 0 // the savepoint's own statements go at once
	defer func() { t.tc.defers = defers }()
	atCommit, entries := len(t.tc.atCommit), len(t.tc.entries)
	t.tc.savepoints++
	name := fmt.Sprintf("contextd_sp_%d", t.tc.savepoints)
	if _, err := t.tc.Exec(ctx, "savepoint "+name); err != nil {
		return retryableIfLost(interpret(err))
	}
	err := fn(t)
	if err == nil {
		// The answers fn's last pipeline left unread are fn's: an error
		// there undoes fn, as its own would.
		if serr := t.tc.settle(); serr != nil {
			err = retryableIfLost(interpret(serr))
		}
	}
	if err == nil && len(t.tc.waiting) > 0 {
		// What fn left waiting for a next statement (Tx.waitForNext) is
		// fn's too: sent before the release, so that its error undoes fn
		// rather than surfacing at the release, with the transaction
		// aborted and nothing rolled back.
		if ferr := t.tc.flush(ctx); ferr != nil {
			err = retryableIfLost(interpret(ferr))
		}
	}
	if err != nil {
		_ = t.tc.settle() // fn's own error is the one to report
		t.tc.waiting = nil
		t.tc.atCommit = t.tc.atCommit[:atCommit] // what fn left for COMMIT is undone with it
		t.tc.entries = t.tc.entries[:entries]
		t.tc.trips.Add(1)
		if _, rbErr := t.tc.c.Exec(context.WithoutCancel(ctx), "rollback to savepoint "+name); rbErr != nil {
			return errors.Join(err, retryableIfLost(interpret(rbErr)))
		}
		return err
	}
	if _, err := t.tc.Exec(ctx, "release savepoint "+name); err != nil {
		return retryableIfLost(interpret(err))
	}
	return nil
}

// CountRetry counts a transaction run again by a caller that manages its
// own (the idempotency layer), so Retries counts every one.
func (s *Store) CountRetry() { s.retries.Add(1) }
