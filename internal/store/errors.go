package store

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextd/contextd/internal/fault"
)

// ErrAppendOnly means the database refused to change history. It is no
// client's fault and maps to no kind: a bug if it is ever seen.
var ErrAppendOnly = errors.New("append-only")

// retryableError marks an error after which the whole transaction may run
// again: nothing of it was committed. It is of kind fault.ErrUnavailable,
// which is what the client sees once the retries are used up.
type retryableError struct{ err error }

func (e *retryableError) Error() string        { return e.err.Error() }
func (e *retryableError) Unwrap() error        { return e.err }
func (e *retryableError) Is(target error) bool { return target == fault.ErrUnavailable }

// lostError marks a lost connection, so that Commit can tell "lost before
// COMMIT" (retryable) from "lost during COMMIT" (outcome unknown).
type lostError struct{ err error }

func (e *lostError) Error() string        { return e.err.Error() }
func (e *lostError) Unwrap() error        { return e.err }
func (e *lostError) Is(target error) bool { return target == fault.ErrUnavailable }

// Retryable reports whether err came from a transaction that may be run
// again as a whole: a serialization failure, a deadlock, or a connection
// lost before COMMIT was sent.
func Retryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r) && !errors.Is(err, errUnknownOutcome)
}

func lost(err error) bool {
	var l *lostError
	return errors.As(err, &l)
}

func retryableIfLost(err error) error {
	if lost(err) && !Retryable(err) {
		return &retryableError{err}
	}
	return err
}

// interpret translates a database error into the kinds of package fault,
// keeping the original in the chain for logs. It is called once, by the
// store's own methods; nothing above the store looks at a pgx error.
func interpret(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", fault.ErrNotFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return interpretPg(pgErr, err)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		// Nothing was sent: safe to run again.
		return &retryableError{&lostError{fmt.Errorf("cannot connect: %w", err)}}
	}
	if connectionLost(err) {
		return &lostError{fmt.Errorf("connection lost: %w", err)}
	}
	return err
}

func interpretPg(pgErr *pgconn.PgError, err error) error {
	switch pgErr.Code {
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return &retryableError{fmt.Errorf("%s: %w", pgErr.Message, err)}
	case "23505", "23P01": // unique_violation, exclusion_violation
		if pgErr.ConstraintName == "item_versions_pkey" {
			// Two writers created the same key: the second waited for the
			// first, and runs again to find the item it made.
			return &retryableError{fmt.Errorf("a concurrent write created the same item version: %w", err)}
		}
		return fmt.Errorf("%w: %s", fault.ErrConflict, pgErr.Message)
	case "23001": // restrict_violation, raised by the append-only triggers
		return fmt.Errorf("%w: %s", ErrAppendOnly, pgErr.Message)
	case "22021", "22P05": // character_not_in_repertoire, untranslatable_character
		return fmt.Errorf("%w: the request holds text that cannot be stored (NUL characters or invalid UTF-8)", fault.ErrMalformed)
	case "23514", "23502", "22P02", "22007", "22008", "23503": // check, not null, text repr, datetime, foreign key
		return fmt.Errorf("%w: %s", fault.ErrInvalid, pgErr.Message)
	case "CD410": // raised by contextd_project_writable
		return fmt.Errorf("%w: %s", fault.ErrGone, pgErr.Message)
	case "57P01", "57P02": // admin_shutdown, crash_shutdown: the server ended this connection
		return &lostError{fmt.Errorf("%w: %s", fault.ErrUnavailable, pgErr.Message)}
	case "57P03", "53300": // cannot_connect_now, too_many_connections
		return &retryableError{&lostError{fmt.Errorf("%w: %s", fault.ErrUnavailable, pgErr.Message)}}
	case "57014", "55P03": // query_canceled (statement_timeout), lock_not_available (lock_timeout)
		return &fault.UnavailableError{Reason: timeoutReason(pgErr), Err: err}
	}
	return err
}

// timeoutReason names the bound that ended a statement, for the client:
// a statement timeout (the query is slow) and a lock timeout (another
// writer holds the row) call for different fixes than a saturated pool.
func timeoutReason(pgErr *pgconn.PgError) string {
	switch {
	case pgErr.Code == "55P03":
		return "lock timeout: a database lock was not granted within the lock timeout"
	case strings.Contains(pgErr.Message, "statement timeout"):
		return "statement timeout: a database statement ran longer than the statement timeout"
	}
	return "the database cancelled a statement (" + pgErr.Message + ")"
}

// connectionLost recognises a connection that broke under a statement.
func connectionLost(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "conn closed") || pgconn.SafeToRetry(err)
}
