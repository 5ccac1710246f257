package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextd/contextd/internal/fault"
)

// Current is the agent of id as stored now, for a transport that
// authenticated the agent's key once and holds a session of its own (the
// explorer at /ui): it reads the agent on every call, bypassing the key
// cache, so a revocation made by any process ends the session at once,
// and a change of role, permission or scope applies to its next request.
// A revoked or unknown agent is fault.ErrUnauthenticated.
func (s *Service) Current(ctx context.Context, id string) (*Agent, error) {
	row, err := s.store.AgentGet(ctx, id)
	if err != nil {
		if errors.Is(err, fault.ErrNotFound) {
			return nil, fmt.Errorf("%w: unknown agent", fault.ErrUnauthenticated)
		}
		return nil, fmt.Errorf("read agent: %w", err)
	}
	if row.RevokedAt != nil {
		return nil, fmt.Errorf("%w: key revoked", fault.ErrUnauthenticated)
	}
	return fromRow(row), nil
}
