package server

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/validation"
)

// Problem is an error that already knows its HTTP answer. Handlers and
// middleware return it for conditions only the HTTP layer knows about
// (a malformed body, a bad header); services return domain errors.
type Problem struct {
	Status int
	Code   string
	Detail string
	Fields []validation.Field
	Extra  map[string]any // more members, e.g. current_status
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter int
}

func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

func problem(status int, code, format string, args ...any) *Problem {
	return &Problem{Status: status, Code: code, Detail: sprintf(format, args...)}
}

// problemBody is the RFC 9457 document. It is built by hand rather than
// from api.Problem so that Extra members can sit at the top level.
func (p *Problem) body(instance, requestID string) map[string]any {
	b := map[string]any{
		"type":   "https://contextd.dev/problems/" + strings.ReplaceAll(p.Code, "_", "-"),
		"title":  http.StatusText(p.Status),
		"status": p.Status,
		"code":   p.Code,
		"detail": p.Detail,
	}
	if instance != "" {
		b["instance"] = instance
	}
	if requestID != "" {
		b["request_id"] = requestID // the X-Request-Id of the answer, and of the log lines
	}
	if len(p.Fields) > 0 {
		errs := make([]map[string]string, len(p.Fields))
		for i, f := range p.Fields {
			e := map[string]string{"code": f.Code, "detail": f.Detail}
			if strings.HasPrefix(f.Pointer, "/") || f.Pointer == "" {
				e["pointer"] = f.Pointer
			} else {
				// Not in the body: a path, query or header parameter.
				e["pointer"] = ""
				e["parameter"] = f.Pointer
			}
			errs[i] = e
		}
		b["errors"] = errs
	}
	for k, v := range p.Extra {
		b[k] = v
	}
	return b
}

var _ = api.Problem{} // the contract's schema of the document built above

// toProblem maps any error to its answer. This is the one place where
// domain errors become HTTP statuses.
func toProblem(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if errors.Is(err, io.EOF) {
		// The generated strict handlers pass a missing required body up as io.EOF.
		return problem(400, "malformed", "a JSON request body is required")
	}
	var mal *validation.Malformed
	if errors.As(err, &mal) {
		return &Problem{Status: 400, Code: "malformed", Detail: mal.Detail, Fields: []validation.Field{{Pointer: mal.Pointer, Code: "type", Detail: mal.Detail}}}
	}
	var verr *validation.Error
	if errors.As(err, &verr) {
		return &Problem{Status: 422, Code: "validation_failed", Detail: "the request has invalid values; see errors", Fields: verr.Fields}
	}
	var tnf *packet.TextNotFound
	if errors.As(err, &tnf) {
		return &Problem{Status: 404, Code: "not_found", Detail: tnf.Error(), Extra: map[string]any{"reason": "text_not_found"}}
	}
	var gerr *auth.GrantError
	if errors.As(err, &gerr) {
		return &Problem{Status: 403, Code: "authority_exceeds_grant", Detail: gerr.Error(), Fields: gerr.Fields}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := sprintf("%v", he.Message)
		switch he.Code {
		case http.StatusNotFound:
			return problem(404, "not_found", "no such resource")
		case http.StatusMethodNotAllowed:
			return problem(405, "method_not_allowed", "method not allowed on this resource")
		case http.StatusRequestEntityTooLarge:
			return problem(413, "payload_too_large", "request body is over the limit")
		case http.StatusUnauthorized:
			return problem(401, "unauthenticated", "%s", msg)
		case http.StatusBadRequest:
			if p := parameterProblem(msg); p != nil {
				return p
			}
			return problem(400, "malformed", "%s", msg)
		case http.StatusServiceUnavailable:
			return retryLater(problem(503, "unavailable", "%s", msg))
		}
		if he.Code >= 400 && he.Code < 500 {
			return problem(he.Code, "malformed", "%s", msg)
		}
	}
	return codedProblem(err, kindProblem(err))
}

// codedError is a domain error that names its problem's code (and further
// members) itself, beyond its kind's: a proposal's self_promotion,
// stale_proposal, too_many_proposals (item.ProposalError).
type codedError interface {
	ProblemCode() string
	ProblemExtra() map[string]any
}

// codedProblem is p with err's own code and members, when it has them.
func codedProblem(err error, p *Problem) *Problem {
	var c codedError
	if !errors.As(err, &c) || p.Status >= 500 {
		return p
	}
	if code := c.ProblemCode(); code != "" {
		p.Code = code
	}
	for k, v := range c.ProblemExtra() {
		if p.Extra == nil {
			p.Extra = map[string]any{}
		}
		p.Extra[k] = v
	}
	return p
}

// kindProblem maps the error kinds of package fault: the one list a
// transport needs.
func kindProblem(err error) *Problem {
	switch {
	case errors.Is(err, fault.ErrStateConflict):
		cur, _ := fault.State(err)
		return &Problem{Status: 409, Code: "invalid_transition", Detail: err.Error(), Extra: map[string]any{"current_status": cur}}
	case errors.Is(err, fault.ErrUnauthenticated):
		return problem(401, "unauthenticated", "%s", err.Error())
	case errors.Is(err, fault.ErrForbidden):
		return problem(403, "forbidden", "%s", err.Error())
	case errors.Is(err, fault.ErrNotFound):
		return problem(404, "not_found", "%s", err.Error())
	case errors.Is(err, fault.ErrPreconditionFailed):
		return problem(412, "precondition_failed", "%s", err.Error())
	case errors.Is(err, fault.ErrConflict):
		return problem(409, "conflict", "%s", err.Error())
	case errors.Is(err, fault.ErrGone):
		return problem(410, "gone", "%s", err.Error())
	case errors.Is(err, fault.ErrMalformed):
		return problem(400, "malformed", "the request holds text that cannot be stored (NUL characters or invalid UTF-8)")
	case errors.Is(err, fault.ErrTooLarge):
		return problem(413, "payload_too_large", "%s", err.Error())
	case errors.Is(err, fault.ErrInvalid):
		return problem(422, "validation_failed", "%s", err.Error())
	case errors.Is(err, fault.ErrRateLimited):
		return retryLater(problem(429, "rate_limited", "too many requests; retry later"))
	case errors.Is(err, fault.ErrUnavailable):
		if reason, ok := fault.Reason(err); ok {
			return retryLater(problem(503, "unavailable", "%s; retry later", reason))
		}
		return retryLater(problem(503, "unavailable", "the database is unavailable; retry later"))
	}
	return &Problem{Status: 500, Code: "internal", Detail: "internal error; it has been logged with this request's id"}
}

// retryLater adds the Retry-After a client should wait.
func retryLater(p *Problem) *Problem {
	p.RetryAfter = int(fault.RetryAfter.Seconds())
	return p
}

// errorHandler writes every error as application/problem+json and logs each
// 5xx once, with the request id.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := toProblem(err)
	reqID := c.Response().Header().Get(echo.HeaderXRequestID)
	if p.Status >= 500 {
		s.log.ErrorContext(c.Request().Context(), "request failed", slog.String("request_id", reqID), slog.String("method", c.Request().Method),
			slog.String("path", c.Request().URL.Path), slog.Any("error", err))
	}
	if p.Status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="contextd"`)
	}
	writeProblem(c, p)
}

func writeProblem(c echo.Context, p *Problem) {
	b, _ := json.Marshal(p.body(c.Request().URL.Path, c.Response().Header().Get(echo.HeaderXRequestID)))
	if p.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	if p.Status == http.StatusRequestTimeout {
		// Only a body cut off part way is answered 408 (readProblem): what
		// is left of it on the wire cannot be told from a next request.
		c.Response().Header().Set(echo.HeaderConnection, "close")
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.Status)
	_, _ = c.Response().Write(b)
}

// parameterProblem is the answer to a parameter the generated binder could
// not read ("Invalid format for parameter limit: ... strconv.ParseInt:
// ..."), in the contract's terms: the parameter named, what it must be,
// and none of Go's wording. nil for any other message.
func parameterProblem(msg string) *Problem {
	rest, ok := strings.CutPrefix(msg, "Invalid format for parameter ")
	if !ok {
		return nil
	}
	name, why, ok := strings.Cut(rest, ": ")
	if !ok || name == "" {
		return nil
	}
	status, code, what := 400, "malformed", "has an invalid format"
	switch {
	case strings.Contains(why, "multiple values"):
		what = "must be given once"
	case strings.Contains(why, "overflows") || strings.Contains(why, "value out of range"):
		status, code, what = 422, "validation_failed", "is out of range"
	case strings.Contains(why, "strconv.ParseInt"):
		what = "must be a whole number"
	}
	fieldCode := "type"
	if status == 422 {
		fieldCode = "range"
	}
	p := problem(status, code, "parameter %s %s", name, what)
	p.Fields = []validation.Field{{Pointer: name, Code: fieldCode, Detail: p.Detail}}
	return p
}
