package packet

import (
	"context"
	"strings"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/item"
)

// withPending adds to a why answer about an item the item's pending
// proposals, as they are now: never served by a packet until promoted,
// they are why a change the caller expected is not in it yet, and the
// answer names the roles that may promote them. The item is the one the
// answer is about (the project's, or the _shared one it named).
func (s *Service) withPending(ctx context.Context, agent *auth.Agent, proj, key string, a *WhyAnswer) error {
	if a == nil {
		return nil
	}
	if a.Item != nil {
		proj = a.Item.Project
	}
	p, err := item.PendingIn(ctx, s.store.DB, agent, proj, key)
	if err != nil || p == nil {
		return err
	}
	a.Pending = p
	a.Detail = strings.TrimSpace(a.Detail + " " + p.Describe())
	return nil
}
