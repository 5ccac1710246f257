package auth

import (
	"context"
	"fmt"
	"slices"
)

// maxNames bounds one Names call: a page names at most this many agents.
const maxNames = 1000

// Names is the name of each agent of ids, by id, for a transport that
// shows who did what (the explorer): ids it already shows, so a name tells
// a reader nothing an id did not, beyond the word an admin chose for it.
// An id of no agent is left out; the caller shows the id.
func (s *Service) Names(ctx context.Context, ids []string) (map[string]string, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(ids) == 0 {
		return map[string]string{}, nil
	}
	if len(ids) > maxNames {
		ids = ids[:maxNames]
	}
	out, err := s.store.AgentNames(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read agent names: %w", err)
	}
	return out, nil
}
