package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/dbsqlc"
)

// replayedHeaders are the response headers kept with an idempotent answer.
var replayedHeaders = []string{echo.HeaderContentType, "ETag", echo.HeaderLocation}

// idempotency makes a POST or PUT with an Idempotency-Key happen at most once
// per agent and key (for 24 hours). The request runs inside one transaction
// that also stores its answer, so the write and the remembered answer commit
// together or not at all; a crash between them cannot make a retry write
// twice. A transaction-scoped advisory lock on (agent, key) tells a retry
// that the first attempt is still running (409). 5xx answers are not kept,
// so a retry after a server failure runs again.
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
		req.Body = io.NopCloser(bytes.NewReader(body))
		h := sha256.New()
		h.Write([]byte(req.Method + " " + req.URL.RequestURI() + "\n"))
		h.Write([]byte(req.Header.Get("If-Match") + "\n"))
		h.Write(body)
		fingerprint := h.Sum(nil)

		ctx := req.Context()
		opts := pgx.TxOptions{}
		if snapshotRoutes[req.Method+" "+c.Path()] {
			opts.IsoLevel = pgx.RepeatableRead
		}
		tx, err := s.pool.BeginTx(ctx, opts)
		if err != nil {
			return store.Interpret(err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

		var locked bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))", agent.ID+"/"+key).Scan(&locked); err != nil {
			return store.Interpret(err)
		}
		if !locked {
			return problem(409, "conflict", "a request with this Idempotency-Key is still running; retry when it has finished")
		}
		prev, err := store.Q.IdempotencyKeyGet(ctx, tx, dbsqlc.IdempotencyKeyGetParams{AgentID: agent.ID, Key: key})
		switch err = store.Interpret(err); {
		case err == nil:
			if !bytes.Equal(prev.RequestSha256, fingerprint) {
				return problem(422, "validation_failed", "this Idempotency-Key was used for a different request; use a new key")
			}
			var hdr map[string]string
			_ = json.Unmarshal(prev.Headers, &hdr)
			for k, v := range hdr {
				c.Response().Header().Set(k, v)
			}
			c.Response().Header().Set("Idempotent-Replayed", "true")
			c.Response().WriteHeader(int(prev.Status))
			_, _ = c.Response().Write(prev.Body)
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}

		// Run the request in the transaction, with its answer held back
		// until the transaction has committed.
		rec := &bufferedResponse{header: http.Header{}}
		orig := c.Response().Writer
		c.Response().Writer = rec
		c.SetRequest(req.WithContext(store.WithAmbientTx(ctx, tx)))
		if err := next(c); err != nil {
			c.Error(err)
		}
		c.Response().Writer = orig
		c.SetRequest(req)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		if status < 500 {
			hdr := map[string]string{}
			for _, k := range replayedHeaders {
				if v := rec.header.Get(k); v != "" {
					hdr[k] = v
				}
			}
			hb, _ := json.Marshal(hdr)
			err := store.Q.IdempotencyKeyUpsert(ctx, tx, dbsqlc.IdempotencyKeyUpsertParams{
				AgentID: agent.ID, Key: key, RequestSha256: fingerprint, Status: int32(status),
				ContentType: rec.header.Get(echo.HeaderContentType), Headers: hb,
				Body: redact(rec.body.Bytes(), secretMembers[req.Method+" "+c.Path()]),
			})
			if err == nil {
				err = tx.Commit(ctx)
			}
			if err != nil {
				// The answer was only buffered: tell the client the truth.
				p := toProblem(store.Interpret(err))
				if p.Status < 500 {
					p = problem(503, "unavailable", "the request could not be committed; retry with the same Idempotency-Key")
				}
				s.log.Error("idempotent request not committed", "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "error", err)
				b, _ := json.Marshal(p.body(req.URL.Path))
				orig.Header().Set(echo.HeaderContentType, "application/problem+json")
				orig.WriteHeader(p.Status)
				_, _ = orig.Write(b)
				return nil
			}
		}
		for k, v := range rec.header {
			orig.Header()[k] = v
		}
		orig.WriteHeader(status)
		_, _ = orig.Write(rec.body.Bytes())
		return nil
	}
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

// snapshotRoutes read a consistent snapshot and write only new rows, so
// their idempotency transaction runs at repeatable read and the request
// reads through it, on the one connection it already holds.
var snapshotRoutes = map[string]bool{
	"POST /v1/projects/:project/packets": true,
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
