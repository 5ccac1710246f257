package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store"
)

// The bounds of a session: it ends after IdleTimeout without a request, or
// MaxAge after it began, whichever comes first, and at once when its
// agent's key is revoked.
const (
	IdleTimeout = 12 * time.Hour
	MaxAge      = 7 * 24 * time.Hour
	// touchEvery is how stale a session's last-seen time may get before a
	// request writes it again: a page load does not cost a write each time.
	touchEvery = time.Minute
)

// ErrNoSession means the request holds no live session: none, an unknown
// or malformed token, an expired session, or a revoked key.
var ErrNoSession = fmt.Errorf("%w: no live session", fault.ErrUnauthenticated)

// Sessions makes, resolves and ends the explorer's sessions. A session is a
// random token the browser holds in a cookie; the database holds only its
// SHA-256 (ui_sessions, migration 00021), so sessions work across
// processes and a reader of the table cannot take one over.
type Sessions struct {
	store  *store.Store
	agents *auth.Service
	now    func() time.Time
}

// NewSessions returns the sessions over st; now is the clock (nil:
// time.Now), which tests move.
func NewSessions(st *store.Store, agents *auth.Service, now func() time.Time) *Sessions {
	if now == nil {
		now = time.Now
	}
	return &Sessions{store: st, agents: agents, now: now}
}

// newToken is 32 random bytes, base64url without padding.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenHash is what the database keeps of a token; nil when the token
// cannot be one (it then matches nothing).
func tokenHash(token string) []byte {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != 32 {
		return nil
	}
	h := sha256.Sum256(raw)
	return h[:]
}

// Begin signs in with an agent key: it authenticates the key through the
// agents service and stores a new session of its agent. The key itself is
// not kept. Expired sessions of everybody are swept on the way.
func (s *Sessions) Begin(ctx context.Context, key string) (token string, agent *auth.Agent, err error) {
	agent, err = s.agents.Authenticate(ctx, key)
	if err != nil {
		return "", nil, err
	}
	now := s.now()
	if _, err := s.store.UISessionDeleteExpired(ctx, now.Add(-IdleTimeout), now.Add(-MaxAge)); err != nil {
		return "", nil, err
	}
	token = newToken()
	if err := s.store.UISessionInsert(ctx, tokenHash(token), agent.ID, now); err != nil {
		return "", nil, err
	}
	return token, agent, nil
}

// Resolve returns the agent of a session token as it is now, and records
// the use. A token that names no session, a session idle IdleTimeout or
// older than MaxAge, and one whose agent's key was revoked are all
// ErrNoSession; the expired or revoked sessions are deleted.
func (s *Sessions) Resolve(ctx context.Context, token string) (*auth.Agent, error) {
	hash := tokenHash(token)
	if hash == nil {
		return nil, ErrNoSession
	}
	row, err := s.store.UISessionGet(ctx, hash)
	if errors.Is(err, fault.ErrNotFound) {
		return nil, ErrNoSession
	}
	if err != nil {
		return nil, err
	}
	now := s.now()
	if now.Sub(row.LastSeenAt) >= IdleTimeout || now.Sub(row.CreatedAt) >= MaxAge {
		if err := s.store.UISessionDelete(ctx, hash); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the session expired", ErrNoSession)
	}
	agent, err := s.agents.Current(ctx, row.AgentID)
	if errors.Is(err, fault.ErrUnauthenticated) {
		if _, err := s.store.UISessionDeleteAgent(ctx, row.AgentID); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the key was revoked", ErrNoSession)
	}
	if err != nil {
		return nil, err
	}
	if now.Sub(row.LastSeenAt) >= touchEvery {
		if err := s.store.UISessionTouch(ctx, hash, now); err != nil {
			return nil, err
		}
	}
	return agent, nil
}

// End deletes the session of a token (signing out); an unknown token is
// not an error.
func (s *Sessions) End(ctx context.Context, token string) error {
	hash := tokenHash(token)
	if hash == nil {
		return nil
	}
	return s.store.UISessionDelete(ctx, hash)
}

// CSRFToken is the anti-forgery token of a session: an HMAC of a fixed
// label keyed with the session token, so only a holder of the cookie can
// know it, it changes with every session, and nothing more is stored.
// Every form the pages post carries it in a hidden field.
func CSRFToken(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("contextd-ui-csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// CheckCSRF reports whether got is the session's anti-forgery token.
func CheckCSRF(session, got string) bool {
	if session == "" || got == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(CSRFToken(session)), []byte(got)) == 1
}
