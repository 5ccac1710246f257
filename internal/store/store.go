// Package store is contextd's one door to PostgreSQL: the sqlc-generated
// queries (kept inside, in dbsqlc), transactions, and the translation of
// database errors into domain errors. Nothing above it imports pgx to look
// at an error.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/contextd/contextd/internal/store/dbsqlc"
)

// Domain errors. Services wrap them with context; the HTTP layer maps them
// to problem+json once.
var (
	// ErrNotFound means the row does not exist (or, one layer up, that the
	// caller may not know it exists).
	ErrNotFound = errors.New("not found")
	// ErrConflict is a unique or exclusion violation.
	ErrConflict = errors.New("conflict")
	// ErrAppendOnly means the database refused to change history.
	ErrAppendOnly = errors.New("append-only")
	// ErrInvalid is a value the database's own constraints refused.
	ErrInvalid = errors.New("invalid value")
	// ErrUnavailable means the database could not be reached.
	ErrUnavailable = errors.New("database unavailable")
	// ErrEncoding is text the database cannot store: NUL characters or
	// invalid UTF-8 that got past validation.
	ErrEncoding = errors.New("text cannot be stored")
)

// Queries is the generated query set. Every method takes its executor
// (a pool or a transaction) as its first argument.
type Queries = dbsqlc.Queries

// Q is the shared, stateless query set.
var Q = dbsqlc.New()

// DBTX is what a query runs on: a pool, a connection or a transaction.
type DBTX = dbsqlc.DBTX

// Interpret translates a database error into a domain error, keeping the
// original in the chain for logs.
func Interpret(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505", "23P01": // unique_violation, exclusion_violation
			return fmt.Errorf("%w: %s", ErrConflict, pgErr.Message)
		case "23001": // restrict_violation, raised by the append-only triggers
			return fmt.Errorf("%w: %s", ErrAppendOnly, pgErr.Message)
		case "22021", "22P05": // character_not_in_repertoire, untranslatable_character
			return fmt.Errorf("%w: %s", ErrEncoding, pgErr.Message)
		case "23514", "23502", "22P02", "22007", "22008", "23503": // check, not null, text repr, datetime
			return fmt.Errorf("%w: %s", ErrInvalid, pgErr.Message)
		case "57P01", "57P02", "57P03", "53300": // shutdown, cannot connect now, too many connections
			return fmt.Errorf("%w: %s", ErrUnavailable, pgErr.Message)
		}
		return err
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

type txKey struct{}

// WithAmbientTx returns a context whose WithTx calls run inside tx (as
// savepoints) instead of opening their own transaction. The idempotency
// layer uses it so that a request's writes and the stored answer to it
// commit together, or not at all.
func WithAmbientTx(ctx context.Context, tx pgx.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// AmbientTx returns the transaction set by WithAmbientTx, if any.
func AmbientTx(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// Beginner is what WithTx needs: a pool or a transaction.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction on db and commits when fn returns nil. Any
// error rolls back, with a context that outlives the request's own, so a
// cancelled request still rolls back cleanly. Inside an ambient transaction
// (see WithAmbientTx) it uses a savepoint of that one instead.
func WithTx(ctx context.Context, db Beginner, fn func(tx pgx.Tx) error) error {
	if amb, ok := AmbientTx(ctx); ok {
		db = amb
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", Interpret(err))
	}
	if err := fn(tx); err != nil {
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			return errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", Interpret(err))
	}
	return nil
}

// Exec returns the executor a read should use: the ambient transaction when
// there is one (so it sees the request's own writes), else the pool.
func Exec(ctx context.Context, pool *pgxpool.Pool) DBTX {
	if tx, ok := AmbientTx(ctx); ok {
		return tx
	}
	return pool
}

// Filter turns an optional filter value into a sqlc.narg argument: an
// empty string is no filter (NULL), anything else filters.
func Filter(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
