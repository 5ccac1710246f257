package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Problem is an answer that is not 2xx: contextd's application/problem+json
// document (RFC 9457) with its stable Code, and the HTTP status. Every call
// of Client, and ReadAnswer, returns one for such an answer; match it with
// errors.As.
type Problem struct {
	// Status is the HTTP status of the answer.
	Status int
	// Code is stable: unauthenticated, forbidden, not_found, conflict,
	// precondition_failed, payload_too_large, malformed, validation_failed,
	// rate_limited, unavailable, internal (or an operation's own).
	Code     string
	Type     string
	Title    string
	Detail   string
	Instance string
	// Errors are the field errors of a validation_failed answer (and of
	// some others): each names where, by JSON Pointer into the request
	// body or, for a path, query or header parameter, by its name.
	Errors []ProblemField
	// RequestID is the request's id (the document's request_id, or its
	// X-Request-Id header): quote it to the operator.
	RequestID string
	// RetryAfter is how long the server asks to wait (Retry-After, on 429,
	// 503, and the 409 of an Idempotency-Key whose first request is still
	// running), zero when it did not say.
	RetryAfter time.Duration
	// Extra holds the document's members besides those above (some
	// problems carry more, e.g. the current version of a conflict).
	Extra map[string]json.RawMessage
}

// ProblemField is one member of a Problem's errors.
type ProblemField struct {
	// Pointer is a JSON Pointer into the request body ("" for the whole
	// body, or when Parameter is set).
	Pointer string `json:"pointer"`
	// Parameter names the path, query or header parameter at fault, when
	// the error is not in the body.
	Parameter string `json:"parameter,omitempty"`
	Code      string `json:"code"`
	Detail    string `json:"detail"`
}

// Error is "STATUS CODE: DETAIL", e.g. "404 not_found: no item k".
func (p *Problem) Error() string {
	if p.Code == "" && p.Detail == "" {
		return fmt.Sprintf("%d %s", p.Status, http.StatusText(p.Status))
	}
	return fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail)
}

// Temporary reports whether the same request may succeed later: the
// server was busy (429), briefly unavailable (502, 503, 504), or still
// running the first request of the same Idempotency-Key (409 with
// Retry-After; a retry then gets that request's answer).
func (p *Problem) Temporary() bool {
	switch p.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		return p.RetryAfter > 0
	}
	return false
}

// problemOf reads a problem from an answer that is not 2xx. A body that
// is not a problem document (a proxy's page) leaves the members empty.
func problemOf(res *http.Response, body []byte) *Problem {
	p := &Problem{Status: res.StatusCode, RequestID: res.Header.Get("X-Request-Id")}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
		p.RetryAfter = time.Duration(s) * time.Second
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return p
	}
	str := func(name string, into *string) {
		if raw, ok := members[name]; ok {
			_ = json.Unmarshal(raw, into)
			delete(members, name)
		}
	}
	str("code", &p.Code)
	str("type", &p.Type)
	str("title", &p.Title)
	str("detail", &p.Detail)
	str("instance", &p.Instance)
	str("request_id", &p.RequestID)
	if raw, ok := members["errors"]; ok {
		_ = json.Unmarshal(raw, &p.Errors)
		delete(members, "errors")
	}
	delete(members, "status") // the answer's own status is the one that counts
	if len(members) > 0 {
		p.Extra = members
	}
	return p
}
