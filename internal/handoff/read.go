package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/dbsqlc"
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
	db := store.Exec(ctx, s.pool)
	row, err := store.Q.HandoffGet(ctx, db, dbsqlc.HandoffGetParams{Project: proj, ID: id})
	if err != nil {
		if err = store.Interpret(err); errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, err
	}
	h, err := fromRow(row)
	if err != nil {
		return nil, err
	}
	d := &Detail{Handoff: h, Events: []Event{}, Ancestors: []Link{}, Descendants: []Link{}, UsedBy: []PacketUse{}}
	evs, err := store.Q.HandoffEventList(ctx, db, dbsqlc.HandoffEventListParams{Project: proj, HandoffID: id})
	if err != nil {
		return nil, store.Interpret(err)
	}
	for _, e := range evs {
		d.Events = append(d.Events, eventFromRow(e))
	}
	anc, err := store.Q.HandoffReworkAncestors(ctx, db, dbsqlc.HandoffReworkAncestorsParams{Project: proj, ID: id})
	if err != nil {
		return nil, store.Interpret(err)
	}
	for _, a := range anc {
		d.Ancestors = append(d.Ancestors, Link{ID: a.ID, Status: a.Status, SourceRole: a.SourceRole, TargetRole: a.TargetRole, CreatedAt: a.CreatedAt.UTC()})
	}
	desc, err := store.Q.HandoffReworkDescendants(ctx, db, dbsqlc.HandoffReworkDescendantsParams{Project: proj, ID: &id})
	if err != nil {
		return nil, store.Interpret(err)
	}
	for _, a := range desc {
		d.Descendants = append(d.Descendants, Link{ID: a.ID, Status: a.Status, SourceRole: a.SourceRole, TargetRole: a.TargetRole, CreatedAt: a.CreatedAt.UTC()})
	}
	uses, err := store.Q.PacketRecordHandoffUses(ctx, db, dbsqlc.PacketRecordHandoffUsesParams{Project: proj, HandoffID: id})
	if err != nil {
		return nil, store.Interpret(err)
	}
	for _, u := range uses {
		d.UsedBy = append(d.UsedBy, PacketUse{PacketID: u.PacketID, TargetRole: u.TargetRole, Agent: u.CreatedBy, CreatedAt: u.CreatedAt.UTC()})
	}
	return d, nil
}

// Resolve returns the handoffs named by ids, in that order, for a packet's
// predecessors: an unknown id (or one of another project) is a validation
// error at /predecessors/i.
func (s *Service) Resolve(ctx context.Context, proj string, ids []string) ([]*Handoff, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := store.Q.HandoffGetMany(ctx, store.Exec(ctx, s.pool), dbsqlc.HandoffGetManyParams{Project: proj, Ids: ids})
	if err != nil {
		return nil, store.Interpret(err)
	}
	byID := map[string]dbsqlc.Handoff{}
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

type listCursor struct {
	T  time.Time `json:"t"`
	ID string    `json:"id"`
}

// List returns handoffs newest first.
func (s *Service) List(ctx context.Context, agent *auth.Agent, proj string, lp ListParams) ([]*Handoff, string, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, "", err
	}
	if lp.Status != "" && !validation.OneOf(lp.Status, Pending, Accepted, Rejected, Superseded) {
		return nil, "", validation.One("status", "enum", "status must be pending, accepted, rejected or superseded")
	}
	params := dbsqlc.HandoffListParams{Project: proj, TaskID: store.Filter(lp.TaskID), Status: store.Filter(lp.Status),
		TargetRole: store.Filter(lp.TargetRole), WorkflowRunID: store.Filter(lp.WorkflowRunID), Max: int32(lp.Limit + 1)}
	var c listCursor
	ok, err := page.Decode(lp.Cursor, &c)
	if err != nil {
		return nil, "", err
	}
	if ok {
		params.HasCursor, params.CursorTime, params.CursorID = true, c.T, c.ID
	}
	rows, err := store.Q.HandoffList(ctx, store.Exec(ctx, s.pool), params)
	if err != nil {
		return nil, "", store.Interpret(err)
	}
	var out []*Handoff
	next := ""
	for i, r := range rows {
		if i == lp.Limit {
			next = page.Encode(listCursor{T: rows[i-1].CreatedAt, ID: rows[i-1].ID})
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

// TaskHistory is one chronological timeline of a task, oldest first.
func (s *Service) TaskHistory(ctx context.Context, agent *auth.Agent, proj, taskID string) ([]TimelineEntry, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	db := store.Exec(ctx, s.pool)
	evs, err := store.Q.HandoffEventListTask(ctx, db, dbsqlc.HandoffEventListTaskParams{Project: proj, TaskID: taskID})
	if err != nil {
		return nil, store.Interpret(err)
	}
	out := []TimelineEntry{}
	for _, e := range evs {
		ev := eventFromRow(dbsqlc.HandoffEvent{Project: e.Project, Seq: e.Seq, HandoffID: e.HandoffID, Event: e.Event, FromStatus: e.FromStatus,
			ToStatus: e.ToStatus, Actor: e.Actor, ActorRole: e.ActorRole, Reason: e.Reason, CreatedAt: e.CreatedAt})
		out = append(out, TimelineEntry{Type: "handoff_event", Time: ev.CreatedAt, Role: ev.ActorRole, Agent: ev.Actor, Event: &ev,
			Handoff: &Link{ID: e.HandoffID, SourceRole: e.SourceRole, TargetRole: e.TargetRole}})
	}
	pks, err := store.Q.PacketListTask(ctx, db, dbsqlc.PacketListTaskParams{Project: proj, TaskID: taskID})
	if err != nil {
		return nil, store.Interpret(err)
	}
	for _, p := range pks {
		var req struct {
			Task struct {
				StepID string `json:"step_id"`
			} `json:"task"`
		}
		_ = json.Unmarshal(p.Request, &req)
		out = append(out, TimelineEntry{Type: "packet", Time: p.CreatedAt.UTC(), Role: p.TargetRole, Agent: p.CreatedBy, PacketID: p.ID, StepID: req.Task.StepID})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no handoff or packet of task %s", ErrNotFound, taskID)
	}
	return out, nil
}

// StreamEvent is an event with what an inbox needs of its handoff.
type StreamEvent struct {
	Event
	TaskID string
	Intent string
	Source Source
	Target Target
}

// Subscribe wakes the returned channel when the project may have new
// handoff events; call the function to stop.
func (s *Service) Subscribe(proj string) (<-chan struct{}, func()) { return s.hub.subscribe(proj) }

// AuthorizeStream checks that agent may listen to targetRole's inbox:
// its own role, or any role for an admin. It returns the role to filter by
// ("" for every role, admins only).
func (s *Service) AuthorizeStream(ctx context.Context, agent *auth.Agent, proj, targetRole string) (string, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return "", err
	}
	if agent.IsAdmin() {
		return targetRole, nil
	}
	if targetRole == "" {
		return agent.Role, nil
	}
	if targetRole != agent.Role {
		return "", fmt.Errorf("%w: an agent listens to its own role's inbox (%s), not %s", auth.ErrForbidden, agent.Role, targetRole)
	}
	return targetRole, nil
}

// LatestSeq is the project's last event number: a stream without
// Last-Event-ID starts after it.
func (s *Service) LatestSeq(ctx context.Context, proj string) (int64, error) {
	n, err := store.Q.HandoffEventMaxSeq(ctx, s.pool, proj)
	return n, store.Interpret(err)
}

// EventsAfter returns up to limit events after seq, oldest first, for one
// target role ("" for all).
func (s *Service) EventsAfter(ctx context.Context, proj string, after int64, targetRole string, limit int) ([]StreamEvent, error) {
	var role *string
	if targetRole != "" {
		role = &targetRole
	}
	rows, err := store.Q.HandoffEventStream(ctx, s.pool, dbsqlc.HandoffEventStreamParams{Project: proj, After: after, TargetRole: role, Max: int32(limit)})
	if err != nil {
		return nil, store.Interpret(err)
	}
	out := make([]StreamEvent, len(rows))
	for i, r := range rows {
		out[i] = StreamEvent{
			Event: eventFromRow(dbsqlc.HandoffEvent{Project: r.Project, Seq: r.Seq, HandoffID: r.HandoffID, Event: r.Event, FromStatus: r.FromStatus,
				ToStatus: r.ToStatus, Actor: r.Actor, ActorRole: r.ActorRole, Reason: r.Reason, CreatedAt: r.CreatedAt}),
			TaskID: r.TaskID, Intent: r.Intent,
			Source: Source{Role: r.SourceRole, AgentID: r.SourceAgentID},
			Target: Target{Role: r.TargetRole, Permission: r.TargetPermission},
		}
	}
	return out, nil
}
