package store

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reads runs reads, each a function that sends at most one statement
// through the DB it is given (one of the store's read methods), with all
// their statements, and whatever waits to be sent (BEGIN included), in
// one round trip. Each read then scans its own answer exactly as it would
// have alone, in the order given: the store's methods and sqlc's code are
// used unchanged, each in its own goroutine that waits for its answer.
// A read that sends a second statement fails with errOneStatement. The
// error returned is the first read's error, in the order given.
//
// It exists for packet assembly, whose snapshot opens with a dozen
// independent reads (the lanes' first pages, the relevance lists, the
// counters): one trip instead of one each.
func (t *Tx) Reads(ctx context.Context, reads ...func(DB) error) error {
	if len(reads) == 0 {
		return nil
	}
	if err := t.tc.settle(); err != nil {
		return retryableIfLost(interpret(err))
	}
	slots := make([]*readSlot, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		s := &readSlot{ready: make(chan struct{}), answer: make(chan readAnswer, 1), closed: make(chan struct{})}
		slots[i] = s
		wg.Go(func() {
			s.err = read(DB{ex: s})
			s.finish()
		})
	}
	var sent []queued
	var who []*readSlot
	for _, s := range slots {
		<-s.ready
		if s.stmt != nil {
			sent = append(sent, *s.stmt)
			who = append(who, s)
		}
	}
	var sendErr error
	if len(sent) > 0 {
		sendErr = t.tc.answer(ctx, sent, who)
	}
	wg.Wait()
	if sendErr != nil {
		return retryableIfLost(interpret(sendErr))
	}
	for _, s := range slots {
		if s.err != nil {
			return retryableIfLost(s.err)
		}
	}
	return nil
}

// answer sends what waits and stmts in one batch and hands each slot its
// answer in turn, after the one before it has read its own.
func (t *txConn) answer(ctx context.Context, stmts []queued, slots []*readSlot) error {
	br, pend := t.sendPending(ctx, stmts...)
	var err error
	for range pend {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	for i, s := range slots {
		if err != nil {
			s.answer <- readAnswer{err: err}
			<-s.closed
			continue
		}
		var a readAnswer
		if stmts[i].exec {
			a.tag, a.err = br.Exec()
		} else {
			a.rows, a.err = br.Query()
		}
		s.answer <- a
		<-s.closed
		if a.err != nil {
			err = a.err
		}
	}
	return errors.Join(err, br.Close())
}

// errOneStatement is the error of a read of Tx.Reads that sends more than
// one statement: its second would wait for an answer the batch never has.
var errOneStatement = errors.New("store: a read of Tx.Reads sends one statement at most")

// readSlot is one read of Tx.Reads, and the sqlc executor it reads
// through: its statement waits for the batch, its answer for the reads
// before it.
type readSlot struct {
	once  sync.Once // closes ready
	ready chan struct{}
	// stmt is the statement the read sent (nil: none), set before ready
	// closes.
	stmt   *queued
	answer chan readAnswer
	// closed is closed when the read has its answer no more: its rows
	// closed, or the read returned.
	closeOnce sync.Once
	closed    chan struct{}
	err       error
}

type readAnswer struct {
	rows pgx.Rows
	tag  pgconn.CommandTag
	err  error
}

func (s *readSlot) send(q queued) readAnswer {
	if s.stmt != nil {
		return readAnswer{err: errOneStatement}
	}
	s.stmt = &q
	s.once.Do(func() { close(s.ready) })
	return <-s.answer
}

// finish tells the batch that the read is over: it sent no statement, or
// it is done with its answer.
func (s *readSlot) finish() {
	s.once.Do(func() { close(s.ready) })
	s.closeOnce.Do(func() { close(s.closed) })
}

func (s *readSlot) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	a := s.send(queued{sql: sql, args: args, ctx: ctx})
	if a.err != nil {
		return nil, a.err
	}
	return &slotRows{Rows: a.rows, s: s}, nil
}

func (s *readSlot) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := s.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return rowOf{rows}
}

func (s *readSlot) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	a := s.send(queued{sql: sql, args: args, ctx: ctx, exec: true})
	return a.tag, a.err
}

func (s *readSlot) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errOneStatement
}

// slotRows lets the next read of the batch have its answer once these
// rows are closed.
type slotRows struct {
	pgx.Rows
	s *readSlot
}

func (r *slotRows) Close() {
	r.Rows.Close()
	r.s.closeOnce.Do(func() { close(r.s.closed) })
}
