package handoff

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// hub holds one LISTEN connection per process while anybody listens, and
// wakes the subscribers of a project when a handoff event of it commits —
// in this process or any other on the same database. A wake-up only says
// "look again": the events themselves are always read from the table, so
// nothing is lost when a notification is.
type hub struct {
	pool *pgxpool.Pool

	mu     sync.Mutex
	subs   map[string]map[chan struct{}]struct{} // project → subscribers
	cancel context.CancelFunc
	done   chan struct{}
}

func newHub(pool *pgxpool.Pool) *hub {
	return &hub{pool: pool, subs: map[string]map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives a value whenever the project
// may have new events, and a function to unsubscribe. The listener runs
// while there is at least one subscriber.
func (h *hub) subscribe(project string) (<-chan struct{}, func()) {
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

func (h *hub) wake(project string) {
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

// listen keeps a LISTEN connection open until ctx ends, reconnecting with
// backoff; after every (re)connect it wakes everybody, since notifications
// sent while it was away are gone.
func (h *hub) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, h.pool.Config().ConnConfig)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+NotifyChannel)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			h.wake("")
			for {
				n, werr := conn.WaitForNotification(ctx)
				if werr != nil {
					err = werr
					break
				}
				h.wake(n.Payload)
			}
		}
		if conn != nil {
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}
