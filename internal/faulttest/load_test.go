package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// sharedKeys is how many item keys the PUT writers and the batches share,
// so writers of one key queue on its row and versions interleave.
const sharedKeys = 16

// loader puts concurrent writes on one server and records what it
// acknowledged in the ledger.
type loader struct {
	c       *client
	project string
	led     *ledger
	seq     *atomic.Int64 // unique numbers across every cycle of a test
	pause   time.Duration // after a failed request (default 50ms), so an outage is not a busy loop
}

// run starts the writers (two item PUT writers, one batch writer, two
// packet writers, one handoff writer) and returns a function that waits
// for them once ctx is done.
func (l *loader) run(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for _, w := range []func(context.Context){l.putItems, l.putItems, l.batchItems, l.packets, l.packets, l.handoffs} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w(ctx)
		}()
	}
	return wg.Wait
}

func (l *loader) path(rest string) string { return "/v1/projects/" + l.project + rest }

// rest pauses after a failed request.
func (l *loader) rest(ctx context.Context) {
	d := l.pause
	if d == 0 {
		d = 50 * time.Millisecond
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func itemBody(content string) map[string]any {
	return map[string]any{"content": content, "kind": "knowledge", "trigger": map[string]any{"always": true}}
}

func (l *loader) putItems(ctx context.Context) {
	for ctx.Err() == nil {
		n := l.seq.Add(1)
		key := fmt.Sprintf("shared-%02d", n%sharedKeys)
		content := fmt.Sprintf("put %d of %s", n, key)
		a, err := l.c.do(ctx, http.MethodPut, l.path("/items/"+key), itemBody(content))
		if !l.led.answered("PUT item", a, err) {
			l.rest(ctx)
			continue
		}
		var it struct {
			Key     string `json:"key"`
			Version int    `json:"version"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(a.body, &it); err != nil || it.Key != key || it.Content != content || it.Version < 1 {
			l.led.wrong("PUT item answer: %v %s", err, a)
			continue
		}
		l.led.ackItems(itemAck{key: key, version: it.Version, content: content})
	}
}

// batchItems writes batches of 8 shared keys and 4 new ones.
func (l *loader) batchItems(ctx context.Context) {
	for ctx.Err() == nil {
		n := l.seq.Add(1)
		contents := map[string]string{}
		var items []map[string]any
		for i := range 12 {
			key := fmt.Sprintf("shared-%02d", (int(n)+i)%sharedKeys)
			if i >= 8 {
				key = fmt.Sprintf("batch-%d-%d", n, i)
			}
			contents[key] = fmt.Sprintf("batch %d of %s", n, key)
			it := itemBody(contents[key])
			it["key"] = key
			items = append(items, it)
		}
		a, err := l.c.do(ctx, http.MethodPost, l.path("/items"), map[string]any{"items": items})
		if !l.led.answered("POST batch", a, err) {
			l.rest(ctx)
			continue
		}
		var res struct {
			Items []struct {
				Key     string `json:"key"`
				Version int    `json:"version"`
				Status  string `json:"status"`
			} `json:"items"`
		}
		if err := json.Unmarshal(a.body, &res); err != nil || len(res.Items) != len(items) {
			l.led.wrong("batch answer: %v %s", err, a)
			continue
		}
		var acks []itemAck
		for _, it := range res.Items {
			c, ok := contents[it.Key]
			if !ok || it.Version < 1 || it.Status == "unchanged" {
				l.led.wrong("batch answer item %+v: %s", it, a)
				continue
			}
			acks = append(acks, itemAck{key: it.Key, version: it.Version, content: c})
		}
		l.led.ackItems(acks...)
	}
}

// packets assembles packets, each for a task of its own and with an
// Idempotency-Key, so a retry is provably at most once.
func (l *loader) packets(ctx context.Context) {
	for ctx.Err() == nil {
		task := fmt.Sprintf("P%d", l.seq.Add(1))
		body, _ := json.Marshal(map[string]any{
			"target_role":  "worker",
			"task":         map[string]any{"task_id": task, "objective": "Finish " + task + "."},
			"token_budget": 1500,
		})
		key := "packet-" + task
		a, err := l.c.do(ctx, http.MethodPost, l.path("/packets"), body, "Idempotency-Key", key)
		if !l.led.answered("POST packet", a, err) {
			if retriable(a, err) {
				l.led.addRetry(retry{kind: "packet", path: l.path("/packets"), body: body, key: key, task: task})
			}
			l.rest(ctx)
			continue
		}
		l.led.ackPacket(a.body, task)
	}
}

// handoffs creates a handoff per task and then accepts it, rejects it or
// supersedes it with a second create, in turn.
func (l *loader) handoffs(ctx context.Context) {
	for ctx.Err() == nil {
		n := l.seq.Add(1)
		task := fmt.Sprintf("H%d", n)
		h := l.createHandoff(ctx, task, 1, nil)
		if h == nil {
			l.rest(ctx)
			continue
		}
		switch n % 3 {
		case 0:
			l.transition(ctx, h, "accept", "accepted", nil)
		case 1:
			l.transition(ctx, h, "reject", "rejected", map[string]any{"reason": "needs a test"})
		default:
			l.createHandoff(ctx, task, 2, h)
		}
	}
}

func (l *loader) createHandoff(ctx context.Context, task string, nth int, supersedes *handoffState) *handoffState {
	body, _ := json.Marshal(map[string]any{
		"task_id": task, "intent": "request_review", "target": map[string]any{"role": "critic"},
		"summary": fmt.Sprintf("handoff %d of %s", nth, task),
	})
	key := fmt.Sprintf("handoff-%s-%d", task, nth)
	l.led.sentCreate(task, supersedes)
	a, err := l.c.do(ctx, http.MethodPost, l.path("/handoffs"), body, "Idempotency-Key", key)
	if !l.led.answered("POST handoff", a, err) {
		if retriable(a, err) {
			l.led.addRetry(retry{kind: "handoff", path: l.path("/handoffs"), body: body, key: key, task: task, supersedes: supersedes})
		}
		return nil
	}
	return l.led.ackHandoff(a.body, task, supersedes)
}

func (l *loader) transition(ctx context.Context, h *handoffState, verb, to string, body any) {
	l.led.allow(h, to)
	a, err := l.c.do(ctx, http.MethodPost, l.path("/handoffs/"+h.id+"/"+verb), body)
	if !l.led.answered("POST "+verb, a, err) {
		return
	}
	var out struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil || out.Status != to {
		l.led.wrong("%s answer: %v %s", verb, err, a)
		return
	}
	l.led.settle(h, to)
}

// retryAll sends every unanswered idempotent write again, with its key and
// body, until it is answered 2xx or the deadline passes; four at a time,
// since each is independent of the others. An answer replayed from the
// stored one and a write run afresh both count; what must never happen is
// both, which the SQL check sees as a second row of the task.
func (l *loader) retryAll(ctx context.Context, within time.Duration) []string {
	deadline := time.Now().Add(within)
	todo := make(chan retry)
	var (
		mu       sync.Mutex
		problems []string
		wg       sync.WaitGroup
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range todo {
				if p := l.retryOne(ctx, r, deadline); p != "" {
					mu.Lock()
					problems = append(problems, p)
					mu.Unlock()
				}
			}
		}()
	}
	for _, r := range l.led.takeRetries() {
		todo <- r
	}
	close(todo)
	wg.Wait()
	return problems
}

func (l *loader) retryOne(ctx context.Context, r retry, deadline time.Time) string {
	for {
		a, err := l.c.do(ctx, http.MethodPost, r.path, r.body, "Idempotency-Key", r.key)
		if err == nil && a.ok() {
			l.ackRetry(r, a)
			return ""
		}
		if !retriable(a, err) || time.Now().After(deadline) {
			return fmt.Sprintf("retry of %s %s: %v %s", r.kind, r.key, err, a)
		}
		l.rest(ctx)
	}
}

func (l *loader) ackRetry(r retry, a answer) {
	l.led.mu.Lock()
	if a.header.Get("Idempotent-Replayed") == "true" {
		l.led.replayed++
	} else {
		l.led.redone++
	}
	l.led.mu.Unlock()
	if r.kind == "packet" {
		l.led.ackPacket(a.body, r.task)
	} else {
		l.led.ackHandoff(a.body, r.task, r.supersedes)
	}
}
