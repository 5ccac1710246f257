// Package validation carries a request's invalid fields, all of them at once,
// by JSON Pointer, from the service that finds them to the HTTP layer that
// answers 422 with one entry per problem.
package validation

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/fault"
)

// Field is one problem with one value of a request.
type Field struct {
	Pointer string // JSON Pointer into the request body (or a parameter name)
	Code    string // stable: required, enum, format, range, duplicate, forbidden_key, ...
	Detail  string
}

// Error lists every invalid field of one request.
type Error struct{ Fields []Field }

func (e *Error) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Pointer + ": " + f.Detail
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Is makes an Error of kind fault.ErrInvalid.
func (e *Error) Is(target error) bool { return target == fault.ErrInvalid }

// List collects field problems.
type List struct{ fields []Field }

// Add records a problem at pointer.
func (l *List) Add(pointer, code, format string, args ...any) {
	l.fields = append(l.fields, Field{Pointer: pointer, Code: code, Detail: fmt.Sprintf(format, args...)})
}

// EscapePointer escapes a member name as one JSON Pointer token (RFC
// 6901: "~" as "~0", "/" as "~1").
func EscapePointer(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

// Len is the number of problems so far.
func (l *List) Len() int { return len(l.fields) }

// Err is nil when there is no problem, else an *Error with all of them.
func (l *List) Err() error {
	if len(l.fields) == 0 {
		return nil
	}
	return &Error{Fields: l.fields}
}

// One is an *Error with a single problem.
func One(pointer, code, format string, args ...any) error {
	var l List
	l.Add(pointer, code, format, args...)
	return l.Err()
}

// Malformed is a request that is not of the contract's shape (a value of
// the wrong JSON type) as found after the HTTP layer's own decoding: 400,
// not 422.
type Malformed struct {
	Pointer string
	Detail  string
}

func (e *Malformed) Error() string { return "malformed request: " + e.Detail }

// Is makes a Malformed of kind fault.ErrMalformed.
func (e *Malformed) Is(target error) bool { return target == fault.ErrMalformed }

// OneOf reports whether v is one of the allowed values of an enum.
func OneOf(v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// QuoteShort quotes a refused value for its problem's detail, cut to its
// first 64 characters: an answer does not echo 100 KB back.
func QuoteShort(v string) string {
	cut, n := 0, 0
	for i := range v { // rune starts
		if n == 64 {
			cut = i
			break
		}
		n++
	}
	if cut == 0 {
		return strconv.Quote(v)
	}
	return strconv.Quote(v[:cut]) + fmt.Sprintf(" (%d characters in all)", utf8.RuneCountInString(v))
}
