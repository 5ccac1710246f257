package faulttest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// itemAck is one item version a server acknowledged.
type itemAck struct {
	key     string
	version int
	content string
}

// packetAck is one packet a server acknowledged.
type packetAck struct {
	id, task, sha, rendered string
	entries                 int // the section entries of the answer: its included records
}

// handoffState is a handoff a server acknowledged creating, with the
// statuses it may have now: exactly the last acknowledged one, plus the
// target of a transition that was sent but not answered.
type handoffState struct {
	id, task string
	allowed  map[string]bool
}

func (h *handoffState) allowedList() string {
	var s []string
	for k := range h.allowed {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(s, "|")
}

// retry is a write sent with an Idempotency-Key that got no answer, or a
// 503: sent again after the restart, it must land exactly once.
type retry struct {
	kind       string // "packet" or "handoff"
	path       string
	body       []byte
	key        string
	task       string
	supersedes *handoffState // a second create of a task: once answered, the first is superseded
}

// ledger is what the servers acknowledged, written by the load and read by
// the checks (which run while no load runs).
type ledger struct {
	mu       sync.Mutex
	items    []itemAck
	packets  []packetAck
	handoffs []*handoffState
	retries  []retry
	creates  map[string]int // handoff creates sent, by task
	// seen* are how far the API checks have got.
	seenItems, seenPackets, seenHandoffs int

	requests, acked, unanswered, unavailable int
	replayed, redone                         int // retries answered from the stored answer, or run again
	settled                                  int // acknowledged accepts and rejects
	unexpected                               []string
}

func newLedger() *ledger { return &ledger{creates: map[string]int{}} }

// answered classifies an answer. It reports whether the request was
// acknowledged; an answer that is neither 2xx nor 503 is recorded as
// unexpected (a 500 is a bug, and so is a 4xx for these valid requests).
func (l *ledger) answered(what string, a answer, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	switch {
	case err != nil:
		l.unanswered++
		return false
	case a.ok():
		l.acked++
		return true
	case a.status == 503 && a.code() == "unavailable":
		l.unavailable++
		return false
	}
	l.unexpected = append(l.unexpected, what+": "+a.String())
	return false
}

// retriable reports whether a failed request may have committed unseen.
func retriable(a answer, err error) bool { return err != nil || a.status == 503 }

func (l *ledger) wrong(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unexpected = append(l.unexpected, fmt.Sprintf(format, args...))
}

func (l *ledger) ackItems(acks ...itemAck) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, acks...)
}

func (l *ledger) addRetry(r retry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retries = append(l.retries, r)
}

func (l *ledger) takeRetries() []retry {
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.retries
	l.retries = nil
	return rs
}

// ackPacket records a packet answer; the answer must be the packet asked for.
func (l *ledger) ackPacket(body []byte, task string) {
	var p struct {
		ID       string `json:"packet_id"`
		Task     string `json:"task_id"`
		Rendered string `json:"rendered"`
		SHA      string `json:"rendered_sha256"`
		Sections []struct {
			Entries []json.RawMessage `json:"entries"`
		} `json:"sections"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.ID == "" || p.Task != task {
		l.wrong("packet answer for task %s: %v %s", task, err, body)
		return
	}
	ack := packetAck{id: p.ID, task: task, sha: p.SHA, rendered: p.Rendered}
	for _, s := range p.Sections {
		ack.entries += len(s.Entries)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.packets = append(l.packets, ack)
}

// sentCreate records a handoff create about to be sent; a second create of
// a task may supersede the first.
func (l *ledger) sentCreate(task string, supersedes *handoffState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.creates[task]++
	if supersedes != nil {
		supersedes.allowed["superseded"] = true
	}
}

// ackHandoff records a created handoff, pending, and settles the one it
// superseded.
func (l *ledger) ackHandoff(body []byte, task string, supersedes *handoffState) *handoffState {
	var h struct {
		ID     string `json:"id"`
		Task   string `json:"task_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &h); err != nil || h.ID == "" || h.Task != task || h.Status != "pending" {
		l.wrong("handoff create answer for task %s: %v %s", task, err, body)
		return nil
	}
	st := &handoffState{id: h.ID, task: task, allowed: map[string]bool{"pending": true}}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handoffs = append(l.handoffs, st)
	if supersedes != nil {
		supersedes.allowed = map[string]bool{"superseded": true}
	}
	return st
}

// allow notes a transition about to be sent; settle, its acknowledgement.
func (l *ledger) allow(h *handoffState, status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.allowed[status] = true
}

func (l *ledger) settle(h *handoffState, status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.allowed = map[string]bool{status: true}
	l.settled++
}

// unchecked returns the acknowledgements the API checks have not seen yet
// and moves the cursors past them.
func (l *ledger) unchecked() ([]itemAck, []packetAck, []*handoffState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	items, packets, handoffs := l.items[l.seenItems:], l.packets[l.seenPackets:], l.handoffs[l.seenHandoffs:]
	l.seenItems, l.seenPackets, l.seenHandoffs = len(l.items), len(l.packets), len(l.handoffs)
	return items, packets, handoffs
}

// writes is the number of acknowledged writes: item versions (a batch
// counts each of its items), packets and handoff creates and transitions.
func (l *ledger) writes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items) + len(l.packets) + len(l.handoffs) + l.settled
}

func (l *ledger) unexpectedAnswers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.unexpected...)
}
