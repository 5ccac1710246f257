package auth

import (
	"context"
	"slices"
	"time"
)

// Bounds of Follow. liveCheck is how often a followed agent is read again
// while changes may go unheard; liveHeard is how recently Watch's
// connection must have answered (its heartbeat is 300 ms) for changes to
// count as heard. Both are tighter than keyTTL: a revocation ends a stream
// within liveHeard + liveCheck (one second) even when the watch has just
// gone quiet.
const (
	liveCheck = 500 * time.Millisecond
	liveHeard = 500 * time.Millisecond
)

// Follow watches the agent a long-lived request (an event stream) was
// authorized as, for as long as ctx lasts. The channel it returns is
// closed when the agent's key is revoked, the agent is gone, its
// authority changed (role, permission, projects: the stream was
// authorized for the old one), or it cannot be read; and when ctx ends.
//
// While Watch hears every change, the agent is read again only when a
// change of it is heard (and every keyMaxAge); otherwise every liveCheck.
// Either way a stream selecting on the channel ends within a second of a
// revocation made by any process.
func (s *Service) Follow(ctx context.Context, a *Agent) <-chan struct{} {
	gone := make(chan struct{})
	wake, stop := s.keys.follow(a.ID)
	go func() {
		defer close(gone)
		defer stop()
		t := time.NewTicker(liveCheck)
		defer t.Stop()
		// The first look is at once: a change made between authentication
		// (perhaps from the cache) and follow woke nobody.
		for s.unchanged(ctx, a) {
			if !s.keys.awaitChange(ctx, wake, t.C, time.Now()) {
				return
			}
		}
	}()
	return gone
}

// unchanged reports whether the stored agent still is a, unrevoked.
func (s *Service) unchanged(ctx context.Context, a *Agent) bool {
	row, err := s.store.AgentGet(ctx, a.ID)
	if err != nil {
		return false // gone, or not checkable: the client reconnects and authenticates again
	}
	return row.RevokedAt == nil && row.Role == a.Role && Permission(row.Permission) == a.Permission && slices.Equal(row.Projects, a.Projects)
}

// awaitChange waits until the agent followed through wake may have
// changed since checked: a change of it was heard, or a tick finds the
// watch not hearing (or keyMaxAge gone by). It reports false when ctx
// ended first.
func (c *keyCache) awaitChange(ctx context.Context, wake <-chan struct{}, tick <-chan time.Time, checked time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-wake:
			return true
		case now := <-tick:
			if !c.hearing(now) || now.Sub(checked) >= keyMaxAge {
				return true
			}
		}
	}
}

// hearing reports whether Watch's connection answered less than liveHeard
// before now, so that every change of an agent reaches forget.
func (c *keyCache) hearing(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.since.IsZero() && now.Sub(c.lastHeard) < liveHeard
}

// follow registers a wake-up for agent id, woken by forget(id) and by
// every reset; the function returned unregisters it.
func (c *keyCache) follow(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.followers[id] == nil {
		c.followers[id] = map[chan struct{}]struct{}{}
	}
	c.followers[id][ch] = struct{}{}
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.followers[id], ch)
		if len(c.followers[id]) == 0 {
			delete(c.followers, id)
		}
	}
}

// wakeLocked wakes agent id's followers; c.mu is held.
func (c *keyCache) wakeLocked(id string) {
	for ch := range c.followers[id] {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
}
