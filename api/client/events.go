package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Event is one Server-Sent Event of a project's handoff event stream.
type Event struct {
	// ID is the event's id, the project's event sequence number: give it
	// as EventsOptions.LastEventID to resume after it.
	ID string
	// Type is the event's name, the transition: created, accepted,
	// rejected, withdrawn or superseded; for a proposal's event,
	// proposal_created, proposal_promoted or proposal_rejected.
	Type string
	// Data is the event's data as sent: an EventData.
	Data json.RawMessage
}

// EventData is an event's data: the event with its handoff's id, task,
// source and target.
type EventData struct {
	Seq        int64         `json:"seq"`
	HandoffID  string        `json:"handoff_id"`
	TaskID     string        `json:"task_id"`
	Event      string        `json:"event"`
	FromStatus *string       `json:"from_status"`
	ToStatus   string        `json:"to_status"`
	Actor      string        `json:"actor"`
	ActorRole  string        `json:"actor_role"`
	Reason     string        `json:"reason"`
	Intent     string        `json:"intent"`
	Source     HandoffSource `json:"source"`
	Target     HandoffTarget `json:"target"`
	CreatedAt  time.Time     `json:"created_at"`
	// A proposal's event has Kind "proposal" and these members instead of
	// the handoff's: the item's key, the proposal's number, the authority
	// it asks for, the roles that could promote it when it was made, its
	// author and the author's role, and for a promotion the version it
	// became (docs/proposals.md).
	Kind          string   `json:"type,omitempty"`
	Key           string   `json:"key,omitempty"`
	Proposal      int      `json:"proposal,omitempty"`
	Authority     string   `json:"authority,omitempty"`
	PromoterRoles []string `json:"promoter_roles,omitempty"`
	Author        string   `json:"author,omitempty"`
	AuthorRole    string   `json:"author_role,omitempty"`
	Version       int      `json:"version,omitempty"`
}

// Decode decodes the event's data.
func (e Event) Decode() (*EventData, error) {
	var d EventData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// EventsOptions choose the events of a stream and how it resumes.
type EventsOptions struct {
	// TargetRole follows an inbox: the handoffs to this role (an agent's
	// own; admins any). Without it and SourceRole, the caller's own inbox.
	TargetRole string
	// SourceRole follows the answers to this role's handoffs.
	SourceRole string
	// LastEventID resumes after this event id ("0": from the project's
	// first event); empty starts from now.
	LastEventID string
	// Once reads one connection and ends with it, instead of reconnecting.
	Once bool
	// RetryWait is the pause before reconnecting, doubled after each
	// failed attempt up to 30 seconds (default 1 second, or what the
	// stream's retry field or a Retry-After said).
	RetryWait time.Duration
	// MaxRetries is how many failed connection attempts in a row are tried
	// again before the last error is yielded (0: without end).
	MaxRetries int
}

// Events follows a project's handoff events: each event, in order, as the
// server commits them. When the connection drops it reconnects (after
// EventsOptions.RetryWait) with Last-Event-ID set to the last id it
// yielded, so nothing is missed or repeated. It ends when ctx is done or
// the loop breaks; an error is yielded (and ends it) when the stream is
// refused (a *Problem: a bad key, a role the key may not follow; 429 and
// 5xx are tried again), or when MaxRetries attempts in a row failed, or
// with Once, when the connection fails.
func (c *Client) Events(ctx context.Context, project string, opts EventsOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		s := &stream{c: c, ctx: ctx, project: project, opts: opts, last: opts.LastEventID, base: opts.RetryWait}
		if s.base <= 0 {
			s.base = time.Second
		}
		s.wait = s.base
		s.run(yield)
	}
}

// Watch calls fn with each event of Events until ctx is done (it then
// returns nil), fn returns an error (returned), or the stream's error.
func (c *Client) Watch(ctx context.Context, project string, opts EventsOptions, fn func(Event) error) error {
	for ev, err := range c.Events(ctx, project, opts) {
		if err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	return nil
}

// stream is the state of one Events loop across its connections.
type stream struct {
	c       *Client
	ctx     context.Context
	project string
	opts    EventsOptions
	last    string        // the id to resume after
	base    time.Duration // the pause after a connection that was answered
	wait    time.Duration // the next pause before reconnecting
	failed  int           // failed attempts in a row
}

const maxRetryWait = 30 * time.Second

func (s *stream) run(yield func(Event, error) bool) {
	for {
		connected, more, err := s.connect(yield)
		if !more || s.ctx.Err() != nil {
			return
		}
		if connected {
			s.failed, s.wait = 0, s.base
		} else {
			s.failed++
		}
		if s.opts.Once || (s.opts.MaxRetries > 0 && s.failed > s.opts.MaxRetries) || !retryable(err) {
			if err != nil {
				yield(Event{}, err)
			}
			return
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(s.wait):
		}
		if !connected {
			s.wait = min(2*s.wait, maxRetryWait)
		}
	}
}

// retryable reports whether a stream that ended with err may be opened
// again: it ended (err nil), the network failed, or the server was busy.
func retryable(err error) bool {
	var p *Problem
	if errors.As(err, &p) {
		return p.Temporary()
	}
	return true
}

// connect opens one connection and yields its events. connected reports
// that the server answered 200, more that the loop may go on (the caller
// did not break), and err why the connection ended, nil at its end.
func (s *stream) connect(yield func(Event, error) bool) (connected, more bool, err error) {
	params := &StreamHandoffEventsParams{}
	if s.opts.TargetRole != "" {
		params.TargetRole = &s.opts.TargetRole
	}
	if s.opts.SourceRole != "" {
		params.SourceRole = &s.opts.SourceRole
	}
	if s.last != "" {
		params.LastEventID = &s.last
	}
	res, err := s.c.stream.StreamHandoffEvents(s.ctx, s.project, params)
	if err != nil {
		return false, true, s.c.ReadAnswer(nil, err, nil)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		err := s.c.ReadAnswer(res, nil, nil)
		var p *Problem
		if errors.As(err, &p) && p.RetryAfter > 0 {
			s.wait = p.RetryAfter
		}
		if err == nil { // a 2xx that is not the stream
			err = &Problem{Status: res.StatusCode}
		}
		return false, true, err
	}
	more, err = s.read(res.Body, yield)
	return true, more, err
}

// read yields the events of one connection's body until it ends.
func (s *stream) read(body io.Reader, yield func(Event, error) bool) (more bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	ev := Event{ID: s.last}
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				if ev.Type == "" {
					ev.Type = "message"
				}
				if ev.ID != "" {
					s.last = ev.ID
				}
				if !yield(ev, nil) {
					return false, nil
				}
			}
			ev, data = Event{ID: s.last}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Type = value
		case "data":
			data = append(data, value)
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms > 0 {
				s.base = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if s.ctx.Err() != nil {
		return false, nil
	}
	return true, sc.Err()
}
