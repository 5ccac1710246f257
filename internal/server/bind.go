package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/strictjson"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// strictBinder decodes a JSON request body strictly: an unknown field, a value
// of the wrong JSON type or trailing data is 400 malformed (with a pointer
// where one is known), an empty body is io.EOF (the generated code treats it
// as absent for optional bodies; required ones get 400 from requireBody).
// Values of the right type but out of range are left to the services (422).
type strictBinder struct{}

func (strictBinder) Bind(i any, c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		if p := readProblem(err); p != nil {
			return p
		}
		return problem(400, "malformed", "cannot read request body: %v", err)
	}
	return decodeStrict(body, i)
}

// decodeStrict is the strict decoding of Bind, of a body already read: for
// a part of a request that is itself in the contract's shape (the items of
// an import in contextd's format).
func decodeStrict(body []byte, i any) error {
	var more strictjson.More
	if _, ok := i.(*api.BatchRequest); ok {
		more = batchValueProblems // its items' value problems too (items_batch.go)
	}
	return strictProblem(strictjson.Decode(body, i, more))
}

// strictProblem is the answer to an error of strictjson.Decode; the others
// (io.EOF for an empty body, the *validation.Error of NUL characters, nil)
// pass as they are.
func strictProblem(err error) error {
	var e *strictjson.Error
	if errors.As(err, &e) {
		return fromStrict(e)
	}
	return err
}

// decodeProblem explains a decoding error; body, when known, lets a type
// error name its exact place (encoding/json names struct fields but not
// array indices).
func decodeProblem(err error, body []byte) *Problem {
	return fromStrict(strictjson.Explain(err, body))
}

// fromStrict is a strictjson.Error's answer: 400 malformed, or 422
// validation_failed when every problem is a value out of range; an error
// of the reader's own is readProblem's.
func fromStrict(e *strictjson.Error) *Problem {
	if p := readProblem(e.Err); p != nil {
		return p
	}
	if e.OutOfRange {
		return &Problem{Status: 422, Code: "validation_failed", Detail: e.Detail, Fields: e.Fields}
	}
	return &Problem{Status: 400, Code: "malformed", Detail: e.Detail, Fields: e.Fields}
}

// readProblem is the answer to a body that could not be read to its end
// for a reason of its own: over the body limit (413), or arriving too
// slowly, under --min-body-rate or past --read-timeout (408; the rest of
// the body is not coming, so writeProblem closes the connection). nil for
// any other read error.
func readProblem(err error) *Problem {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return problem(413, "payload_too_large", "request body is over the %d-byte limit", mbe.Limit)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	var slow *app.SlowBodyError
	if errors.As(err, &slow) {
		return problem(408, "request_timeout", "%s", slow.Error())
	}
	return problem(408, "request_timeout", "the request body did not arrive within the server's read timeout")
}

// requireBody turns a missing required body into 400.
func requireBody[T any](b *T) (*T, error) {
	if b == nil {
		return nil, problem(400, "malformed", "a JSON request body is required")
	}
	return b, nil
}
