package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/contextd/contextd/internal/fault"
)

// MaxQueueWait is the longest a request waits in the pool's queue while the
// pool keeps handing out connections (queue); past it the pool is taken to
// be exhausted whatever it does. It is the statement timeout's default: a
// request that waited that long has lost its client's patience anyway.
const MaxQueueWait = DefaultStatementTimeout

// errPoolStalled cancels a wait in the queue when the pool stopped moving.
var errPoolStalled = errors.New("pool stalled")

// queue takes a pooled connection for a request. It waits its turn (pgxpool
// hands connections out in the order they were asked for) for as long as
// the pool keeps handing them out to anyone: a busy pool is not an
// exhausted one, and 64 agents on a pool of 4 connections must queue, not
// fail (contextd bench --sweep). It answers ErrUnavailable, "pool
// exhausted", once no connection at all was handed out for acquire (they
// are all held: long statements, lock waits, a database that stopped
// answering), or after MaxQueueWait in all.
func (s *Store) queue(ctx context.Context, acquire time.Duration) (*pgxpool.Conn, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start, last := time.Now(), s.pool.Stat().AcquireCount()
	var timer atomic.Pointer[time.Timer]
	var check func()
	check = func() {
		if actx.Err() != nil {
			return // acquired or given up: no more checks
		}
		n := s.pool.Stat().AcquireCount()
		if n == last || time.Since(start) >= MaxQueueWait {
			cancel(errPoolStalled)
			return
		}
		last = n
		timer.Store(time.AfterFunc(acquire, check))
	}
	timer.Store(time.AfterFunc(acquire, check))
	defer func() { timer.Load().Stop() }()
	c, err := s.pool.Acquire(actx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(actx), errPoolStalled) {
			// Not wrapping err: a cancellation reads as a lost connection
			// to interpret, which would make this retryable.
			return nil, &fault.UnavailableError{Reason: fmt.Sprintf("pool exhausted: no database connection handed out within %s", acquire)}
		}
		return nil, interpret(err)
	}
	return c, nil
}

// poolExec runs single statements on the pool, taking each connection
// through the queue (pgxpool alone would wait forever).
type poolExec struct{ s *Store }

func (p *poolExec) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := p.s.conn(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	p.s.trips.Add(1)
	return c.Exec(ctx, sql, args...)
}

func (p *poolExec) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := p.s.conn(ctx)
	if err != nil {
		return nil, err
	}
	p.s.trips.Add(1)
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &releasingRows{Rows: rows, c: c}, nil
}

func (p *poolExec) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.s.conn(ctx)
	if err != nil {
		return errRow{err}
	}
	p.s.trips.Add(1)
	return &releasingRow{row: c.QueryRow(ctx, sql, args...), c: c}
}

func (p *poolExec) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	c, err := p.s.conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	p.s.trips.Add(2)
	return c.CopyFrom(ctx, table, cols, src)
}

// releasingRows gives the connection back when the rows are closed.
type releasingRows struct {
	pgx.Rows
	c *pgxpool.Conn
}

func (r *releasingRows) Close() {
	r.Rows.Close()
	if r.c != nil {
		r.c.Release()
		r.c = nil
	}
}

// releasingRow gives the connection back once the row is scanned.
type releasingRow struct {
	row pgx.Row
	c   *pgxpool.Conn
}

func (r *releasingRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	r.c.Release()
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
