package store

import (
	"context"
	"sync"
	"time"
)

// replayProbe shares the questions "how far has the replica replayed?"
// among the reads that wait for it at once. A read joins the next
// question to be sent, never one already sent: an answer from before the
// read began may predate a restart after which the standby is behind what
// it showed (see Replica). So N reads waiting together cost one question
// per poll, not N; before, under a steady stream of writes, when most
// reads wait a millisecond or two, each asked on its own every poll (and
// back to back, the questions of 40 reads waiting ran ~1 a millisecond).
type replayProbe struct {
	mu sync.Mutex
	// next is the question the reads arriving now join; asking says one
	// is on its way (next then waits for it to come back).
	next   *replayAnswer
	asking bool
}

type replayAnswer struct {
	ready chan struct{}
	lsn   int64
	err   error
}

// sharedReplayLSN is replayLSN asked after the call began, shared with
// the calls waiting at the same time. The question runs under the
// replica's own bound (probe), so a caller that leaves does not cut it
// short for the others; the caller waits at most until its ctx is done.
func (r *Replica) sharedReplayLSN(ctx context.Context) (int64, error) {
	p := &r.replay
	p.mu.Lock()
	a := p.next
	if a == nil {
		a = &replayAnswer{ready: make(chan struct{})}
		p.next = a
	}
	if !p.asking {
		p.asking, p.next = true, nil
		go r.askReplay(a)
	}
	p.mu.Unlock()
	select {
	case <-a.ready:
		return a.lsn, a.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// askReplay sends a's question, then the one the reads that came
// meanwhile joined, until none is waiting: at most one question every
// replicaPoll, so the standby is asked at most ~500 times a second however
// many reads wait.
func (r *Replica) askReplay(a *replayAnswer) {
	p := &r.replay
	var last time.Time
	for a != nil {
		if wait := time.Until(last.Add(replicaPoll)); wait > 0 {
			time.Sleep(wait)
		}
		last = time.Now()
		ctx, cancel := context.WithTimeout(r.ctx, r.probe)
		a.lsn, a.err = r.replayLSN(ctx)
		cancel()
		close(a.ready)
		p.mu.Lock()
		a, p.next = p.next, nil
		p.asking = a != nil
		p.mu.Unlock()
	}
}

// ReplayQuestions is how many times the replica was asked how far it has
// replayed, for tests.
func (r *Replica) ReplayQuestions() int64 { return r.questions.Load() }
