package auth

import (
	"sync"
	"time"
)

// keyCache keeps the agents of keys that authenticated, for keyTTL: every
// request authenticates, and a key's agent changes only when it is
// revoked. A revocation takes effect at once in the process that made it
// (Revoke forgets the agent, and a lookup that began before the forgetting
// is not kept) and within keyTTL in every other process (their entries
// expire). Unknown and revoked keys are never kept: a new key works at
// once, and a wrong one always costs a lookup.
type keyCache struct {
	mu      sync.Mutex
	entries map[string]keyEntry  // by key hash
	forgot  map[string]time.Time // agent id → when it was last forgotten
	// While Watch's connection answers, every change is heard: since is
	// when it last (re)connected (entries fetched before are dropped then),
	// lastHeard when it last proved itself.
	since, lastHeard time.Time
	// followers are woken when their agent is forgotten, and all of them
	// when the watch (re)connects: see Service.Follow.
	followers map[string]map[chan struct{}]struct{} // agent id → wake-ups
}

type keyEntry struct {
	agent   Agent
	fetched time.Time
}

// keyTTL bounds how stale another process's view of an agent may be;
// maxKeys bounds the cache.
const (
	keyTTL  = time.Second
	maxKeys = 10000
	// keyMaxAge bounds an entry while changes are heard: a missed
	// notification (which LISTEN does not promise against) costs at most
	// this long.
	keyMaxAge = 5 * time.Minute
)

func newKeyCache() *keyCache {
	return &keyCache{entries: map[string]keyEntry{}, forgot: map[string]time.Time{}, followers: map[string]map[chan struct{}]struct{}{}}
}

// get returns a copy of the agent of a key hash read less than keyTTL ago.
func (c *keyCache) get(hash []byte, now time.Time) (*Agent, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[string(hash)]
	if !ok || !c.fresh(e, now) {
		return nil, false
	}
	a := e.agent
	a.Projects = append([]string(nil), e.agent.Projects...)
	return &a, true
}

// fresh reports whether e may still be used at now: read less than keyTTL
// ago, or, while changes are heard (the watch answered less than keyTTL
// ago), read since the watch connected and less than keyMaxAge ago.
func (c *keyCache) fresh(e keyEntry, now time.Time) bool {
	age := now.Sub(e.fetched)
	if age < keyTTL {
		return true
	}
	hearing := !c.since.IsZero() && now.Sub(c.lastHeard) < keyTTL
	return hearing && !e.fetched.Before(c.since) && age < keyMaxAge
}

// reset drops every entry: the watch (re)connected and may have missed
// changes.
func (c *keyCache) reset(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.since, c.lastHeard = now, now
	for id := range c.followers {
		c.wakeLocked(id)
	}
}

// heard records that the watch's connection just answered.
func (c *keyCache) heard(now time.Time) {
	c.mu.Lock()
	c.lastHeard = now
	c.mu.Unlock()
}

// put keeps an agent read by a lookup that began at started, unless the
// agent was forgotten since.
func (c *keyCache) put(hash []byte, a *Agent, started time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.forgot[a.ID]; ok && !started.After(f) {
		return
	}
	if len(c.entries) >= maxKeys {
		for k := range c.entries {
			delete(c.entries, k)
			if len(c.entries) < maxKeys/2 {
				break
			}
		}
	}
	cp := *a
	cp.Projects = append([]string(nil), a.Projects...)
	c.entries[string(hash)] = keyEntry{agent: cp, fetched: started}
}

// forget drops an agent's entries, and keeps lookups in flight from
// keeping it again.
func (c *keyCache) forget(id string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if e.agent.ID == id {
			delete(c.entries, k)
		}
	}
	for other, at := range c.forgot {
		if now.Sub(at) > time.Minute {
			delete(c.forgot, other)
		}
	}
	c.forgot[id] = now
	c.wakeLocked(id)
}
