// Package fault is the one set of error kinds every domain error wraps: not
// found, unauthenticated, forbidden, conflict, state conflict, precondition
// failed, invalid, malformed, too large, unavailable, rate limited and gone. The
// store translates database errors into them once; services wrap them with
// their own sentinels and context; each transport maps the kinds to its
// answers once (HTTP: problem+json). A new transport needs only this list.
package fault

import (
	"errors"
	"time"
)

// The kinds. Test with errors.Is: every domain error wraps exactly one.
var (
	// ErrNotFound: no such thing, or one the caller may not know exists.
	ErrNotFound = errors.New("not found")
	// ErrUnauthenticated: no valid credentials.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the caller is known but may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrConflict: a unique value is taken, or the same request is running.
	ErrConflict = errors.New("conflict")
	// ErrStateConflict: a conditional transition found another state than
	// the one it needs; the error carries the current state (see State).
	ErrStateConflict = errors.New("state conflict")
	// ErrPreconditionFailed: a precondition the caller stated (If-Match)
	// does not hold.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrInvalid: a value breaks a rule (validation).
	ErrInvalid = errors.New("invalid value")
	// ErrMalformed: input that cannot be read at all (not text, not JSON).
	ErrMalformed = errors.New("malformed")
	// ErrTooLarge: input over a limit.
	ErrTooLarge = errors.New("too large")
	// ErrUnavailable: the database cannot be reached, is shutting down,
	// or kept refusing a transaction it would retry; retry later.
	ErrUnavailable = errors.New("unavailable")
	// ErrRateLimited: the caller sent too much; retry later.
	ErrRateLimited = errors.New("rate limited")
	// ErrGone: the thing exists and its history stays readable, but it
	// takes no more writes (an archived project).
	ErrGone = errors.New("gone")
)

// StateError is a state conflict that names the state found.
type StateError struct {
	Msg     string // the whole message
	Current string // the state the subject is in now
}

func (e *StateError) Error() string { return e.Msg }

// Is makes a StateError a state conflict.
func (e *StateError) Is(target error) bool { return target == ErrStateConflict }

// State returns the current state carried by err's state conflict, if any.
func State(err error) (string, bool) {
	var se interface{ CurrentState() string }
	if errors.As(err, &se) {
		return se.CurrentState(), true
	}
	var e *StateError
	if errors.As(err, &e) {
		return e.Current, true
	}
	return "", false
}

// UnavailableError is an ErrUnavailable that says which bound was hit (a
// statement timeout, a lock timeout, no free connection), so a client and
// an operator can tell a slow query from a saturated pool. Reason is meant
// for the client; Err keeps the original for logs.
type UnavailableError struct {
	Reason string
	Err    error
}

func (e *UnavailableError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes an UnavailableError unavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Reason returns the client-facing reason carried by err's unavailability,
// if it carries one.
func Reason(err error) (string, bool) {
	var e *UnavailableError
	if errors.As(err, &e) {
		return e.Reason, true
	}
	return "", false
}

// RetryAfter is how long a client should wait after ErrUnavailable or
// ErrRateLimited when nothing more precise is known.
const RetryAfter = time.Second
