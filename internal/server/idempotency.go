package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store"
)

// replayedHeaders are the response headers kept with an idempotent answer.
var replayedHeaders = []string{echo.HeaderContentType, "ETag", echo.HeaderLocation}

// unit is the transaction of one request made with an Idempotency-Key: the
// request's writes and its stored answer commit in it together, or not at
// all. It begins lazily, at the first write (s.write), so a packet's
// snapshot is read before the request holds its write connection; it is the
// HTTP transport's own request state and never reaches a service, which
// gets the *store.Tx explicitly.
type unit struct {
	s           *Server
	agentID     string
	key         string
	fingerprint []byte
	tx          *store.Tx
	replay      *store.IdempotentAnswer // an answer that committed while we ran
	// busy: another attempt held the key (409). That answer is about this
	// moment, not the request's: it is sent, never stored.
	busy bool
}

type unitKey struct{}

// errReplay ends a handler whose request turned out to have an answer.
var errReplay = errors.New("idempotent request already answered")

// begin opens the unit's transaction and claims its key: 409 while another
// attempt holds it, errReplay if an answer committed meanwhile.
func (u *unit) begin(ctx context.Context) error {
	if u.tx != nil {
		return nil
	}
	tx, err := u.s.store.Begin(ctx, store.TxOpts{})
	if err != nil {
		return err
	}
	locked, err := tx.IdempotencyKeyTryLock(ctx, u.agentID, u.key)
	if err == nil && !locked {
		u.busy = true
		err = retryLater(problem(409, "conflict", "a request with this Idempotency-Key is still running; retry when it has finished"))
	}
	if err == nil {
		var prev store.IdempotentAnswer
		if prev, err = tx.IdempotencyKeyGet(ctx, u.agentID, u.key); err == nil {
			u.replay, err = &prev, errReplay
		} else if errors.Is(err, fault.ErrNotFound) {
			err = nil
		}
	}
	if err != nil {
		tx.Rollback(ctx)
		return err
	}
	u.tx = tx
	return nil
}

func (u *unit) rollback(ctx context.Context) {
	if u.tx != nil {
		u.tx.Rollback(ctx)
		u.tx = nil
	}
}

// write runs fn in the request's transaction: the idempotency unit's (in a
// savepoint, so a refused write still lets its 4xx answer be stored), or a
// transaction of its own with the store's retries.
func (s *Server) write(ctx context.Context, fn func(tx *store.Tx) error) error {
	if u, ok := ctx.Value(unitKey{}).(*unit); ok {
		if err := u.begin(ctx); err != nil {
			return err
		}
		return u.tx.Savepoint(ctx, fn)
	}
	return s.store.InTx(ctx, fn)
}

// inUnit reports whether the request runs in an idempotency unit, whose
// transaction its writes must join.
func inUnit(ctx context.Context) bool {
	_, ok := ctx.Value(unitKey{}).(*unit)
	return ok
}

// idempotency makes a POST or PUT with an Idempotency-Key happen at most once
// per agent and key (for 24 hours). The request runs inside one transaction
// that also stores its answer, so the write and the remembered answer commit
// together or not at all; a crash between them cannot make a retry write
// twice. A transaction-scoped advisory lock on (agent, key) tells a retry
// that the first attempt is still running (409). 5xx answers are not kept,
// so a retry after a server failure runs again. A serialization failure,
// deadlock or lost connection before COMMIT runs the request again, like
// store.InTx does.
func (s *Server) idempotency(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		key := req.Header.Get("Idempotency-Key")
		if key == "" || (req.Method != http.MethodPost && req.Method != http.MethodPut) {
			return next(c)
		}
		agent := agentFrom(req.Context())
		if agent == nil {
			return next(c)
		}
		if len(key) > 255 || !utf8.ValidString(key) || strings.IndexFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return problem(422, "validation_failed", "Idempotency-Key must be at most 255 printable characters")
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return decodeProblem(err, nil)
		}
		h := sha256.New()
		h.Write([]byte(req.Method + " " + req.URL.RequestURI() + "\n"))
		h.Write([]byte(req.Header.Get("If-Match") + "\n"))
		h.Write(body)
		u := &unit{s: s, agentID: agent.ID, key: key, fingerprint: h.Sum(nil)}
		if prev, err := s.store.IdempotencyKeyGet(req.Context(), agent.ID, key); err == nil {
			return replay(c, u, &prev)
		} else if !errors.Is(err, fault.ErrNotFound) {
			return err
		}
		for attempt := 0; ; attempt++ {
			done, err := s.attempt(c, next, u, body, attempt == store.MaxRetries)
			if done || err != nil {
				return err
			}
		}
	}
}

// attempt runs the request once in a fresh unit. It reports done=false when
// the transaction failed in a way that may be run again.
func (s *Server) attempt(c echo.Context, next echo.HandlerFunc, u *unit, body []byte, last bool) (bool, error) {
	req := c.Request()
	ctx := req.Context()
	u.tx, u.replay, u.busy = nil, nil, false
	orig := c.Response().Writer
	// The headers set so far (X-Request-Id) are the answer's: a problem
	// written in the attempt names its request, as every other does.
	rec := &bufferedResponse{header: orig.Header().Clone()}
	c.Response().Writer = rec
	req.Body = io.NopCloser(bytes.NewReader(body))
	c.SetRequest(req.WithContext(context.WithValue(ctx, unitKey{}, u)))
	herr := next(c)
	if herr != nil && !errors.Is(herr, errReplay) {
		c.Error(herr)
	}
	c.Response().Writer = orig
	// The buffered attempt marked Echo's response as written; the answer
	// is still to be sent, to orig.
	c.Response().Committed, c.Response().Status, c.Response().Size = false, 0, 0
	c.SetRequest(req)
	defer u.rollback(ctx)
	if errors.Is(herr, errReplay) {
		return true, replay(c, u, u.replay)
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	if u.busy {
		rec.flush(c.Response())
		return true, nil
	}
	if status >= 500 {
		if store.Retryable(herr) && !last {
			s.store.CountRetry()
			return false, nil
		}
		rec.flush(c.Response())
		return true, nil
	}
	err := u.begin(ctx)
	if errors.Is(err, errReplay) {
		return true, replay(c, u, u.replay)
	}
	if err == nil {
		err = u.commit(ctx, req.Method+" "+c.Path(), status, rec)
	}
	if err != nil {
		if store.Retryable(err) && !last {
			s.store.CountRetry()
			return false, nil
		}
		var p *Problem
		if errors.As(err, &p) {
			return true, p
		}
		// The answer was only buffered: tell the client the truth.
		s.log.Error("idempotent request not committed", "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "error", err)
		return true, problem(503, "unavailable", "the request could not be committed; retry with the same Idempotency-Key")
	}
	rec.flush(c.Response())
	return true, nil
}

// commit stores the buffered answer and commits the unit.
func (u *unit) commit(ctx context.Context, route string, status int, rec *bufferedResponse) error {
	hdr := map[string]string{}
	for _, k := range replayedHeaders {
		if v := rec.header.Get(k); v != "" {
			hdr[k] = v
		}
	}
	a := store.IdempotentAnswer{
		AgentID: u.agentID, Key: u.key, RequestSHA256: u.fingerprint, Status: status,
		ContentType: rec.header.Get(echo.HeaderContentType), Headers: hdr,
		Body: redact(rec.body.Bytes(), secretMembers[route]),
	}
	if u.s.keys != nil {
		a.MAC = u.s.keys.MAC(a.Message())
	}
	err := u.tx.IdempotencyKeyPut(ctx, a)
	if err != nil {
		return err
	}
	err = u.tx.Commit(ctx)
	u.tx = nil
	return err
}

// replay answers with a stored answer, or 422 if the key was used for
// another request.
func replay(c echo.Context, u *unit, prev *store.IdempotentAnswer) error {
	if k := u.s.keys; k != nil && !hmac.Equal(prev.MAC, k.MAC(prev.Message())) {
		// Written by someone without the key: never served, never run
		// again (the request may have taken effect).
		u.s.log.Error("stored idempotency answer fails its HMAC; refused", "agent", prev.AgentID, "idempotency_key", prev.Key)
		return problem(500, "idempotency_answer_tampered", "the stored answer to this Idempotency-Key fails its integrity check and is not replayed; an operator has been told")
	}
	if !bytes.Equal(prev.RequestSHA256, u.fingerprint) {
		return problem(422, "validation_failed", "this Idempotency-Key was used for a different request; use a new key")
	}
	for k, v := range prev.Headers {
		c.Response().Header().Set(k, v)
	}
	c.Response().Header().Set("Idempotent-Replayed", "true")
	body := prev.Body
	if prev.ContentType == "application/problem+json" {
		body = renamed(body, c.Response().Header().Get(echo.HeaderXRequestID))
	}
	c.Response().WriteHeader(prev.Status)
	_, _ = c.Response().Write(body)
	return nil
}

// renamed is a stored problem answered again, naming the request that is
// answered (its request_id, as every problem's), the rest as it was stored.
func renamed(body []byte, requestID string) []byte {
	var doc map[string]json.RawMessage
	if requestID == "" || json.Unmarshal(body, &doc) != nil {
		return body
	}
	id, _ := json.Marshal(requestID)
	doc["request_id"] = id
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// secretMembers are the top-level members of answers that must never be
// stored: an agent's key is kept only as its hash and shown once, so a
// replayed agent creation answers without it.
var secretMembers = map[string][]string{
	"POST /v1/agents": {"key"},
}

// redact removes members from a JSON object answer.
func redact(body []byte, members []string) []byte {
	if len(members) == 0 {
		return body
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	for _, k := range members {
		delete(m, k)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// bufferedResponse holds an answer until it may be sent.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

// flush sends the held answer.
func (b *bufferedResponse) flush(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	status := b.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(b.body.Bytes())
}
