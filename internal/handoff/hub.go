package handoff

import (
	"context"
	"sync"

	"github.com/contextd/contextd/internal/store"
)

// Hub holds one LISTEN connection per process while anybody listens, and
// wakes the subscribers of a project when a handoff event of it commits —
// in this process or any other on the same database. A wake-up only says
// "look again": the events themselves are always read from the table, so
// nothing is lost when a notification is.
type Hub struct {
	store *store.Store

	mu     sync.Mutex
	subs   map[string]map[chan struct{}]struct{} // project → subscribers
	cancel context.CancelFunc
	done   chan struct{}
}

// NewHub returns the process's hub; the composition root makes one and
// hands it to every handoff service, so every event stream of the process
// shares one LISTEN connection.
func NewHub(st *store.Store) *Hub {
	return &Hub{store: st, subs: map[string]map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives a value whenever the project
// may have new events, and a function to unsubscribe. The listener runs
// while there is at least one subscriber.
func (h *Hub) subscribe(project string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs[project] == nil {
		h.subs[project] = map[chan struct{}]struct{}{}
	}
	h.subs[project][ch] = struct{}{}
	if h.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		go h.listen(ctx, h.done)
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[project], ch)
		if len(h.subs[project]) == 0 {
			delete(h.subs, project)
		}
		var done chan struct{}
		if len(h.subs) == 0 && h.cancel != nil {
			h.cancel()
			done = h.done
			h.cancel, h.done = nil, nil
		}
		h.mu.Unlock()
		if done != nil {
			<-done
		}
	}
}

func (h *Hub) wake(project string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, subs := range h.subs {
		if project != "" && p != project {
			continue
		}
		for ch := range subs {
			select {
			case ch <- struct{}{}:
			default: // already woken
			}
		}
	}
}

// listen keeps the LISTEN connection open until ctx ends; after every
// (re)connect it wakes everybody, since notifications sent while it was
// away are gone.
func (h *Hub) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	h.store.Listen(ctx, NotifyChannel, func() { h.wake("") }, h.wake, nil)
}
