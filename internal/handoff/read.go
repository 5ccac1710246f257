package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// Link is a handoff in a rework chain.
type Link struct {
	ID, Status, SourceRole, TargetRole string
	CreatedAt                          time.Time
}

// PacketUse is a packet that used a handoff as a predecessor.
type PacketUse struct {
	PacketID, TargetRole, Agent string
	CreatedAt                   time.Time
}

// Detail is a handoff with its history.
type Detail struct {
	*Handoff
	Events      []Event
	Ancestors   []Link // oldest last: the handoff it reworks, then that one's, ...
	Descendants []Link
	UsedBy      []PacketUse
}

// Get returns a handoff with its events, rework chain and packets.
// Handoffs are readable by every agent of the project.
func (s *Service) Get(ctx context.Context, agent *auth.Agent, proj, id string) (*Detail, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	row, err := s.store.HandoffGet(ctx, proj, id)
	if err != nil {
		if errors.Is(err, fault.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, err
	}
	h, err := fromRow(row)
	if err != nil {
		return nil, err
	}
	d := &Detail{Handoff: h, Events: []Event{}, Ancestors: []Link{}, Descendants: []Link{}, UsedBy: []PacketUse{}}
	evs, err := s.store.HandoffEventList(ctx, proj, id)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		d.Events = append(d.Events, eventFromRow(e))
	}
	anc, desc, err := s.store.HandoffReworkChain(ctx, proj, id)
	if err != nil {
		return nil, err
	}
	for _, a := range anc {
		d.Ancestors = append(d.Ancestors, Link(a))
	}
	for _, a := range desc {
		d.Descendants = append(d.Descendants, Link(a))
	}
	uses, err := s.store.PacketHandoffUses(ctx, proj, id)
	if err != nil {
		return nil, err
	}
	for _, u := range uses {
		d.UsedBy = append(d.UsedBy, PacketUse{PacketID: u.PacketID, TargetRole: u.TargetRole, Agent: u.CreatedBy, CreatedAt: u.CreatedAt})
	}
	return d, nil
}

// Resolve returns the handoffs named by ids, in that order, for a packet's
// predecessors: an unknown id (or one of another project) is a validation
// error at /predecessors/i.
// It reads through db, so a packet's snapshot sees them as of its snapshot.
func (s *Service) Resolve(ctx context.Context, db store.DB, proj string, ids []string) ([]*Handoff, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := db.HandoffGetMany(ctx, proj, ids)
	if err != nil {
		return nil, err
	}
	byID := map[string]store.Handoff{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	var errs validation.List
	out := make([]*Handoff, 0, len(ids))
	seen := map[string]bool{}
	for i, id := range ids {
		r, ok := byID[id]
		switch {
		case !ok:
			errs.Add(fmt.Sprintf("/predecessors/%d", i), "unknown_handoff", "no handoff %q in this project", id)
			continue
		case seen[id]:
			errs.Add(fmt.Sprintf("/predecessors/%d", i), "duplicate", "handoff %q is named twice", id)
			continue
		}
		seen[id] = true
		h, err := fromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ListParams filters a listing of handoffs.
type ListParams struct {
	TaskID, Status, TargetRole, WorkflowRunID string
	Cursor                                    string
	Limit                                     int
}

// handoffsListing names the listing a cursor belongs to: a project's handoffs.
func handoffsListing(proj string) string { return page.Listing("handoffs", proj) }

// List returns handoffs newest first.
func (s *Service) List(ctx context.Context, agent *auth.Agent, proj string, lp ListParams) ([]*Handoff, string, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, "", err
	}
	if lp.Status != "" && !validation.OneOf(lp.Status, Statuses...) {
		return nil, "", validation.One("status", "enum", "status must be pending, accepted, rejected, superseded or withdrawn")
	}
	params := store.HandoffListParams{Project: proj, TaskID: lp.TaskID, Status: lp.Status,
		TargetRole: lp.TargetRole, WorkflowRunID: lp.WorkflowRunID, Max: lp.Limit + 1}
	c, err := page.DecodeAt(lp.Cursor, handoffsListing(proj))
	if err != nil {
		return nil, "", err
	}
	if c != nil {
		params.HasCursor, params.CursorTime, params.CursorID = true, c.T, c.ID
	}
	rows, err := s.store.HandoffList(ctx, params)
	if err != nil {
		return nil, "", err
	}
	var out []*Handoff
	next := ""
	for i, r := range rows {
		if i == lp.Limit {
			next = page.Encode(handoffsListing(proj), page.At{T: rows[i-1].CreatedAt, ID: rows[i-1].ID})
			break
		}
		h, err := fromRow(r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, h)
	}
	return out, next, nil
}

// TimelineEntry is one moment in a task's history: a handoff event or a
// packet assembled for the task.
type TimelineEntry struct {
	Type     string // handoff_event or packet
	Time     time.Time
	Role     string
	Agent    string
	Event    *Event // for handoff events
	Handoff  *Link  // the event's handoff: source and target roles
	PacketID string
	StepID   string
}

// TaskHistory is one chronological timeline of a task, oldest first. Its
// handoff events and packets are history, read through the store's reader
// (store.Read: the replica, when one serves and has what this process
// wrote; a task it knows nothing of yet is asked of the primary before the
// answer is not found). Handoffs themselves, whose status changes, and
// their listings stay on the primary.
func (s *Service) TaskHistory(ctx context.Context, agent *auth.Agent, proj, taskID string) ([]TimelineEntry, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	var out []TimelineEntry
	err := s.store.Read(ctx, func(db store.DB) error {
		var err error
		out, err = taskHistoryIn(ctx, db, proj, taskID)
		return err
	})
	return out, err
}

// taskHistoryIn reads a task's timeline through db; not found when it has
// neither a handoff event nor a packet.
func taskHistoryIn(ctx context.Context, db store.DB, proj, taskID string) ([]TimelineEntry, error) {
	evs, err := db.HandoffEventListTask(ctx, proj, taskID)
	if err != nil {
		return nil, err
	}
	out := []TimelineEntry{}
	for _, e := range evs {
		ev := eventFromRow(e)
		out = append(out, TimelineEntry{Type: "handoff_event", Time: ev.CreatedAt, Role: ev.ActorRole, Agent: ev.Actor, Event: &ev,
			Handoff: &Link{ID: e.HandoffID, SourceRole: e.SourceRole, TargetRole: e.TargetRole}})
	}
	pks, err := db.PacketListTask(ctx, proj, taskID)
	if err != nil {
		return nil, err
	}
	for _, p := range pks {
		var req struct {
			Task struct {
				StepID string `json:"step_id"`
			} `json:"task"`
		}
		_ = json.Unmarshal(p.Request, &req)
		out = append(out, TimelineEntry{Type: "packet", Time: p.CreatedAt, Role: p.TargetRole, Agent: p.CreatedBy, PacketID: p.ID, StepID: req.Task.StepID})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no handoff or packet of task %s", ErrNotFound, taskID)
	}
	return out, nil
}

// StreamEvent is an event with what an inbox needs of its handoff; or,
// with Proposal set, an event of a proposal (proposals.go), numbered in
// the same sequence.
type StreamEvent struct {
	Event
	TaskID   string
	Intent   string
	Source   Source
	Target   Target
	Proposal *store.ProposalEvent
}

// Subscribe wakes the returned channel when the project may have new
// handoff events; call the function to stop.
func (s *Service) Subscribe(proj string) (<-chan struct{}, func()) { return s.hub.subscribe(proj) }

// StreamFilter is which handoffs' events a stream carries: those to
// TargetRole and from SourceRole ("" for any). Its listener's role (set
// by AuthorizeStream only) keeps out the proposal events of items and
// proposals hidden from that role: an inbox is no way round an item's
// roles.
type StreamFilter struct {
	TargetRole, SourceRole string
	viewer                 string
	seesAll                bool
}

// AuthorizeStream checks that agent may listen to the stream it asks for
// and returns the filter to apply. A target's inbox (target_role) and an
// author's answers (source_role) are open to agents of that role; admins
// listen to any. Without either, an agent listens to its own inbox (an
// admin to every event). A non-admin naming its own source role may narrow
// it by any target role.
func (s *Service) AuthorizeStream(ctx context.Context, agent *auth.Agent, proj string, f StreamFilter) (StreamFilter, error) {
	f, err := s.streamFilter(ctx, agent, proj, f)
	f.viewer, f.seesAll = agent.Role, agent.SeesAllRoles()
	return f, err
}

func (s *Service) streamFilter(ctx context.Context, agent *auth.Agent, proj string, f StreamFilter) (StreamFilter, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return StreamFilter{}, err
	}
	if agent.IsAdmin() {
		return f, nil
	}
	if f.SourceRole != "" {
		if f.SourceRole != agent.Role {
			return StreamFilter{}, fmt.Errorf("%w: an agent listens to the answers to its own role's handoffs (%s), not %s's", fault.ErrForbidden, agent.Role, f.SourceRole)
		}
		return f, nil
	}
	if f.TargetRole == "" {
		return StreamFilter{TargetRole: agent.Role}, nil
	}
	if f.TargetRole != agent.Role {
		return StreamFilter{}, fmt.Errorf("%w: an agent listens to its own role's inbox (%s), not %s", fault.ErrForbidden, agent.Role, f.TargetRole)
	}
	return f, nil
}

// LatestSeq is the project's last event number: a stream without
// Last-Event-ID starts after it.
func (s *Service) LatestSeq(ctx context.Context, proj string) (int64, error) {
	h, err := s.store.HandoffEventMaxSeq(ctx, proj)
	if err != nil {
		return 0, err
	}
	p, err := s.store.ProposalEventMaxSeq(ctx, proj)
	return max(h, p), err
}

// EventsAfter returns up to limit events after seq, oldest first, of the
// handoffs the filter names.
func (s *Service) EventsAfter(ctx context.Context, proj string, after int64, f StreamFilter, limit int) ([]StreamEvent, error) {
	rows, err := s.store.HandoffEventStream(ctx, proj, after, f.TargetRole, f.SourceRole, limit)
	if err != nil {
		return nil, err
	}
	out := make([]StreamEvent, len(rows))
	for i, r := range rows {
		out[i] = StreamEvent{
			Event: eventFromRow(r), TaskID: r.TaskID, Intent: r.Intent,
			Source: Source{Role: r.SourceRole, AgentID: r.SourceAgentID},
			Target: Target{Role: r.TargetRole, Permission: r.TargetPermission},
		}
	}
	props, err := s.store.ProposalEventStream(ctx, proj, after, store.ProposalStreamFilter{TargetRole: f.TargetRole,
		SourceRole: f.SourceRole, Viewer: f.viewer, SeesAll: f.seesAll}, limit)
	if err != nil {
		return nil, err
	}
	return mergeEvents(out, len(rows) == limit, props, len(props) == limit, limit), nil
}
