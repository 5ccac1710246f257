package store

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txConn runs a transaction's statements on its connection, in as few
// round trips as the statements allow. Two things wait to be sent with the
// next statement instead of costing a round trip of their own:
//
//   - BEGIN: a transaction opens with its first statement, in one pipeline
//     (a transaction that runs none sends nothing at all);
//   - inside Tx.Pipeline, statements whose answer the caller does not read
//     (Exec): they go with the next statement that has rows, with COMMIT, or
//     at the end of the pipeline, whichever comes first.
//
// PostgreSQL runs a pipeline's statements in order and skips the rest after
// the first error, so the order and the all-or-nothing of a transaction
// stay what they were; only the error of a waiting statement is reported
// by the call that sent it. pgx's own transaction type sends BEGIN at once,
// which is why this one exists: an item PUT is BEGIN with its read, its
// writes, and COMMIT, three round trips.
type txConn struct {
	c       *pgxpool.Conn
	trips   *atomic.Int64 // the store's count of round trips
	begin   []string      // BEGIN and the transaction's settings, until sent
	begun   bool          // BEGIN has been sent: COMMIT and ROLLBACK mean something
	waiting []queued
	defers  int // > 0 inside Pipeline: Exec waits
	// savepoints numbers the savepoints taken, for their names.
	savepoints int
	// atCommit waits for COMMIT itself (Tx.atCommit): the writes of rows
	// every writer of a project must lock, so the lock is held only as long
	// as the commit (and a bulk append of the chain's entries before it,
	// Tx.appendSealed).
	atCommit []queued
	// entries are the audit chain entries of the transaction's writes,
	// appended with COMMIT (Tx.Commit), each chain under its head's lock.
	entries []pendingEntry
	// unread is a batch sent without its answers read (Tx.pipelineUnread),
	// and unreadN the number of its statements: every call reads them
	// first (settle).
	unread  pgx.BatchResults
	unreadN int
	// at is the time of the transaction's item versions (Tx.writeTime),
	// zero until the first is written.
	at time.Time
}

type pendingEntry struct {
	chain, kind, subject string
	body                 []byte
	// rows and label are for Stats: a packet's records, a handoff
	// event's new status.
	rows  int
	label string
}

type queued struct {
	sql  string
	args []any
	// ctx is the context of the call that queued a statement which waits
	// (nil for BEGIN and what waits for COMMIT): its span is parented
	// there, under the stage that wrote it, not under the call that
	// happened to send it.
	ctx context.Context
	// exec: its answer is read as a command tag, not rows (Tx.Reads).
	exec bool
}

// beginStatements open a transaction. (Forcing generic plans in write
// transactions was tried and dropped: a plan made while a table was small
// stays cached on the connection until statistics change, and on a new
// database that made a 10,000-item batch take 16 s instead of 4.)
func beginStatements(opts TxOpts) []string {
	if opts.ReadOnlySnapshot {
		return []string{"begin isolation level repeatable read read only"}
	}
	if opts.GenericPlans {
		return []string{"begin", setGenericPlans}
	}
	return []string{"begin"}
}

// setGenericPlans runs the rest of a transaction's prepared statements
// with their generic plans (TxOpts.GenericPlans, Tx.GenericPlans).
const setGenericPlans = "set local plan_cache_mode = force_generic_plan"

// pending is what must go before the next statement.
func (t *txConn) pending() []queued {
	var out []queued
	if !t.begun {
		for _, b := range t.begin {
			out = append(out, queued{sql: b})
		}
	}
	return append(out, t.waiting...)
}

// send sends the pending statements with last (which may be empty) in one
// batch, reads the pending ones' results and returns the batch positioned
// at last's result; the caller reads it and closes the batch.
func (t *txConn) send(ctx context.Context, last *queued) (pgx.BatchResults, error) {
	var lasts []queued
	if last != nil {
		lasts = append(lasts, *last)
	}
	br, pend := t.sendPending(ctx, lasts...)
	for range pend {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	return br, nil
}

// sendPending sends the pending statements and then last in one batch,
// unread; pend is how many pending statements lead it.
func (t *txConn) sendPending(ctx context.Context, last ...queued) (br pgx.BatchResults, pend int) {
	b := &pgx.Batch{}
	var parents []context.Context
	for _, q := range t.pending() {
		b.Queue(q.sql, q.args...)
		parents = append(parents, q.ctx)
	}
	pend = b.Len()
	for _, q := range last {
		b.Queue(q.sql, q.args...)
		parents = append(parents, nil)
	}
	t.begun, t.waiting = true, nil
	t.trips.Add(1)
	return t.c.SendBatch(withStatementParents(ctx, parents), b), pend
}

func (t *txConn) quiet() bool { return t.begun && len(t.waiting) == 0 }

// sendUnread sends what waits and leaves its answers to be read by the
// next call (settle).
func (t *txConn) sendUnread(ctx context.Context) error {
	if err := t.settle(); err != nil {
		return err
	}
	if t.quiet() {
		return nil
	}
	t.unread, t.unreadN = t.sendPending(ctx)
	return nil
}

// settle reads the answers of the batch sent unread, if any: the error of
// the first statement that failed, or of the batch.
func (t *txConn) settle() error {
	if t.unread == nil {
		return nil
	}
	br, n := t.unread, t.unreadN
	t.unread, t.unreadN = nil, 0
	var err error
	for range n {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	return errors.Join(err, br.Close())
}

func (t *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.defers > 0 {
		t.waiting = append(t.waiting, queued{sql: sql, args: args, ctx: ctx})
		return pgconn.CommandTag{}, nil
	}
	if err := t.settle(); err != nil {
		return pgconn.CommandTag{}, err
	}
	if t.quiet() {
		t.trips.Add(1)
		return t.c.Exec(ctx, sql, args...)
	}
	br, err := t.send(ctx, &queued{sql: sql, args: args})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

func (t *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.settle(); err != nil {
		return nil, err
	}
	if t.quiet() {
		t.trips.Add(1)
		return t.c.Query(ctx, sql, args...)
	}
	br, err := t.send(ctx, &queued{sql: sql, args: args})
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return rowOf{rows}
}

func (t *txConn) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	t.trips.Add(2)
	return t.c.CopyFrom(ctx, table, cols, src)
}

// flush sends what waits, if anything.
func (t *txConn) flush(ctx context.Context) error {
	if err := t.settle(); err != nil {
		return err
	}
	if t.quiet() {
		return nil
	}
	br, err := t.send(ctx, nil)
	if err != nil {
		return err
	}
	return br.Close()
}

// commit sends COMMIT with what waits; a transaction that never sent BEGIN
// has nothing to commit. pgx reports a failed transaction's COMMIT (its
// answer is ROLLBACK) as pgx.ErrTxCommitRollback; so does this.
func (t *txConn) commit(ctx context.Context) error {
	if !t.begun && len(t.waiting) == 0 && len(t.atCommit) == 0 {
		return nil
	}
	t.defers = 0
	t.sendAtCommitNext()
	tag, err := t.Exec(ctx, "commit")
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// sendAtCommitNext moves what waits for COMMIT to go with the next
// statement, after what waits already.
func (t *txConn) sendAtCommitNext() {
	t.waiting, t.atCommit = append(t.waiting, t.atCommit...), nil
}

// rollback drops what waits and rolls back what was sent.
func (t *txConn) rollback(ctx context.Context) error {
	_ = t.settle() // the transaction is undone whatever its answers were
	t.waiting, t.atCommit, t.defers = nil, nil, 0
	if !t.begun {
		return nil
	}
	t.trips.Add(1)
	_, err := t.c.Exec(ctx, "rollback")
	return err
}

// atCommitExec queues the statements run through it for COMMIT.
type atCommitExec struct{ t *txConn }

func (a atCommitExec) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	a.t.atCommit = append(a.t.atCommit, queued{sql: sql, args: args})
	return pgconn.CommandTag{}, nil
}

var errNotAtCommit = errors.New("store: only statements without rows can wait for COMMIT")

func (a atCommitExec) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errNotAtCommit
}

func (a atCommitExec) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{errNotAtCommit}
}

func (a atCommitExec) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errNotAtCommit
}

// batchRows closes its batch with its rows.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		_ = r.br.Close()
		r.br = nil
	}
}

// rowOf is pgx.Row over rows: the first row, or pgx.ErrNoRows.
type rowOf struct{ rows pgx.Rows }

func (r rowOf) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
