package store

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// Handoff is a stored handoff; the manifest stays the JSON its source wrote.
type Handoff struct {
	Project, ID, TaskID, WorkflowRunID string
	ReworkOf, PacketID                 string
	SourceRole, SourceAgentID          string
	TargetRole, TargetPermission       string
	Intent                             string
	Manifest                           json.RawMessage
	CreatedBy                          string
	CreatedAt, UpdatedAt               time.Time
	Status, StatusReason, SupersededBy string
}

func handoffOf(r dbsqlc.Handoff) Handoff {
	return Handoff{
		Project: r.Project, ID: r.ID, TaskID: r.TaskID, WorkflowRunID: r.WorkflowRunID, ReworkOf: deref(r.ReworkOf),
		PacketID: deref(r.PacketID), SourceRole: r.SourceRole, SourceAgentID: r.SourceAgentID, TargetRole: r.TargetRole,
		TargetPermission: r.TargetPermission, Intent: r.Intent, Manifest: r.Manifest, CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Status: r.Status, StatusReason: r.StatusReason,
		SupersededBy: deref(r.SupersededBy),
	}
}

func handoffsOf(rows []dbsqlc.Handoff) []Handoff {
	out := make([]Handoff, len(rows))
	for i, r := range rows {
		out[i] = handoffOf(r)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nullable turns an optional value into a NULL-able argument: empty is
// NULL (for a sqlc.narg filter: no filter).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// HandoffEvent is one change of one handoff; with the handoff's task and
// sides where a listing joins them.
type HandoffEvent struct {
	Project, HandoffID string
	Seq                int64
	Event              string
	FromStatus         string // "" for creation
	ToStatus           string
	Actor, ActorRole   string
	Reason             string
	CreatedAt          time.Time
	// Joined from the handoff by the task and stream listings.
	TaskID, Intent               string
	SourceRole, SourceAgentID    string
	TargetRole, TargetPermission string
}

// HandoffGet is a handoff by id.
func (db DB) HandoffGet(ctx context.Context, project, id string) (Handoff, error) {
	r, err := q.HandoffGet(ctx, db.ex, dbsqlc.HandoffGetParams{Project: project, ID: id})
	if err != nil {
		return Handoff{}, interpret(err)
	}
	return handoffOf(r), nil
}

// HandoffGetMany is the handoffs of ids that exist in the project.
func (db DB) HandoffGetMany(ctx context.Context, project string, ids []string) ([]Handoff, error) {
	rows, err := q.HandoffGetMany(ctx, db.ex, dbsqlc.HandoffGetManyParams{Project: project, Ids: ids})
	if err != nil {
		return nil, interpret(err)
	}
	return handoffsOf(rows), nil
}

// HandoffListParams filters a listing of handoffs, newest first.
type HandoffListParams struct {
	Project                                   string
	TaskID, Status, TargetRole, WorkflowRunID string // empty: any
	HasCursor                                 bool
	CursorTime                                time.Time
	CursorID                                  string
	Max                                       int
}

// HandoffList is a page of handoffs, newest first.
func (db DB) HandoffList(ctx context.Context, p HandoffListParams) ([]Handoff, error) {
	rows, err := q.HandoffList(ctx, db.ex, dbsqlc.HandoffListParams{
		Project: p.Project, TaskID: nullable(p.TaskID), Status: nullable(p.Status), TargetRole: nullable(p.TargetRole),
		WorkflowRunID: nullable(p.WorkflowRunID), HasCursor: p.HasCursor, CursorTime: p.CursorTime, CursorID: p.CursorID, Max: int32(p.Max),
	})
	if err != nil {
		return nil, interpret(err)
	}
	return handoffsOf(rows), nil
}

// HandoffLink is a handoff in a rework chain.
type HandoffLink struct {
	ID, Status, SourceRole, TargetRole string
	CreatedAt                          time.Time
}

// HandoffReworkChain is the handoffs id reworks (oldest last) and those
// that rework it.
func (db DB) HandoffReworkChain(ctx context.Context, project, id string) (ancestors, descendants []HandoffLink, err error) {
	anc, err := q.HandoffReworkAncestors(ctx, db.ex, dbsqlc.HandoffReworkAncestorsParams{Project: project, ID: id})
	if err != nil {
		return nil, nil, interpret(err)
	}
	ancestors = make([]HandoffLink, len(anc))
	for i, a := range anc {
		ancestors[i] = HandoffLink{ID: a.ID, Status: a.Status, SourceRole: a.SourceRole, TargetRole: a.TargetRole, CreatedAt: a.CreatedAt.UTC()}
	}
	desc, err := q.HandoffReworkDescendants(ctx, db.ex, dbsqlc.HandoffReworkDescendantsParams{Project: project, ID: &id})
	if err != nil {
		return nil, nil, interpret(err)
	}
	descendants = make([]HandoffLink, len(desc))
	for i, d := range desc {
		descendants[i] = HandoffLink{ID: d.ID, Status: d.Status, SourceRole: d.SourceRole, TargetRole: d.TargetRole, CreatedAt: d.CreatedAt.UTC()}
	}
	return ancestors, descendants, nil
}

// HandoffLockTaskTarget serialises the creates of one task's handoffs to
// one target role, so each new one sees (and supersedes) the one before.
func (tx *Tx) HandoffLockTaskTarget(ctx context.Context, project, taskID, targetRole string) error {
	return interpret(q.HandoffLockTaskTarget(ctx, tx.ex, dbsqlc.HandoffLockTaskTargetParams{Project: project, TaskID: taskID, TargetRole: targetRole}))
}

// HandoffPending is every pending handoff of the task to the target role:
// the ones a create would supersede, read under HandoffLockTaskTarget so
// that its caller can check each before superseding any. The listing's
// limit is lifted, so no pending handoff escapes the check.
func (tx *Tx) HandoffPending(ctx context.Context, project, taskID, targetRole string) ([]Handoff, error) {
	return tx.HandoffList(ctx, HandoffListParams{Project: project, TaskID: taskID, TargetRole: targetRole, Status: "pending", Max: math.MaxInt32})
}

// HandoffSupersedePending supersedes every pending handoff of the task to
// the target role by newID and returns their ids.
func (tx *Tx) HandoffSupersedePending(ctx context.Context, project, taskID, targetRole, newID string) ([]string, error) {
	rows, err := q.HandoffSupersedePending(ctx, tx.ex, dbsqlc.HandoffSupersedePendingParams{NewID: newID, Project: project, TaskID: taskID, TargetRole: targetRole})
	if err != nil {
		return nil, interpret(err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		if err := tx.auditHandoff(r); err != nil {
			return nil, err
		}
		ids[i] = r.ID
	}
	return ids, nil
}

// HandoffInsert stores a new pending handoff.
func (tx *Tx) HandoffInsert(ctx context.Context, h Handoff) (Handoff, error) {
	r, err := q.HandoffInsert(ctx, tx.ex, dbsqlc.HandoffInsertParams{
		Project: h.Project, ID: h.ID, TaskID: h.TaskID, WorkflowRunID: h.WorkflowRunID, ReworkOf: nullable(h.ReworkOf),
		SourceRole: h.SourceRole, SourceAgentID: h.SourceAgentID, TargetRole: h.TargetRole,
		TargetPermission: h.TargetPermission, Intent: h.Intent, PacketID: nullable(h.PacketID), Manifest: h.Manifest, CreatedBy: h.CreatedBy,
	})
	if err != nil {
		return Handoff{}, interpret(err)
	}
	if err := tx.auditHandoff(r); err != nil {
		return Handoff{}, err
	}
	return handoffOf(r), nil
}

// HandoffTransition moves a pending handoff to status: the conditional
// update that makes exactly one of racing transitions win. A handoff that
// is not pending any more is fault.ErrNotFound here; the caller reads its
// current status.
func (tx *Tx) HandoffTransition(ctx context.Context, project, id, toStatus, reason string) (Handoff, error) {
	r, err := q.HandoffTransition(ctx, tx.ex, dbsqlc.HandoffTransitionParams{ToStatus: toStatus, Reason: reason, Project: project, ID: id})
	if err != nil {
		return Handoff{}, interpret(err)
	}
	if err := tx.auditHandoff(r); err != nil {
		return Handoff{}, err
	}
	return handoffOf(r), nil
}

// HandoffEventAppend numbers an event from the project's counter (in
// commit order), appends it with its audit entry and notifies the
// listeners on channel (delivered when the transaction commits).
func (tx *Tx) HandoffEventAppend(ctx context.Context, e HandoffEvent, channel string) (HandoffEvent, error) {
	seq, err := q.ProjectCounterNextHandoffSeq(ctx, tx.ex, e.Project)
	if err != nil {
		return HandoffEvent{}, interpret(err)
	}
	r, err := q.HandoffEventInsert(ctx, tx.ex, dbsqlc.HandoffEventInsertParams{
		Project: e.Project, Seq: seq, HandoffID: e.HandoffID, Event: e.Event, FromStatus: nullable(e.FromStatus),
		ToStatus: e.ToStatus, Actor: e.Actor, ActorRole: e.ActorRole, Reason: e.Reason,
	})
	if err != nil {
		return HandoffEvent{}, interpret(err)
	}
	body, err := audit.HandoffEventBody(handoffEventRow(r))
	if err := tx.entry(r.Project, audit.KindHandoffEvent, audit.HandoffEventSubject(r.Seq), body, err); err != nil {
		return HandoffEvent{}, err
	}
	tx.tc.entries[len(tx.tc.entries)-1].label = r.ToStatus
	if err := q.HandoffNotify(ctx, tx.ex, dbsqlc.HandoffNotifyParams{Channel: channel, Project: e.Project}); err != nil {
		return HandoffEvent{}, interpret(err)
	}
	return eventOf(r), nil
}

func eventOf(r dbsqlc.HandoffEvent) HandoffEvent {
	return HandoffEvent{Project: r.Project, Seq: r.Seq, HandoffID: r.HandoffID, Event: r.Event, FromStatus: deref(r.FromStatus),
		ToStatus: r.ToStatus, Actor: r.Actor, ActorRole: r.ActorRole, Reason: r.Reason, CreatedAt: r.CreatedAt.UTC()}
}

// HandoffEventList is every event of one handoff, oldest first.
func (db DB) HandoffEventList(ctx context.Context, project, handoffID string) ([]HandoffEvent, error) {
	rows, err := q.HandoffEventList(ctx, db.ex, dbsqlc.HandoffEventListParams{Project: project, HandoffID: handoffID})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]HandoffEvent, len(rows))
	for i, r := range rows {
		out[i] = eventOf(r)
	}
	return out, nil
}

// HandoffEventListTask is every event of every handoff of a task, oldest
// first, with each handoff's sides.
func (db DB) HandoffEventListTask(ctx context.Context, project, taskID string) ([]HandoffEvent, error) {
	rows, err := q.HandoffEventListTask(ctx, db.ex, dbsqlc.HandoffEventListTaskParams{Project: project, TaskID: taskID})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]HandoffEvent, len(rows))
	for i, r := range rows {
		e := eventOf(dbsqlc.HandoffEvent{Project: r.Project, Seq: r.Seq, HandoffID: r.HandoffID, Event: r.Event, FromStatus: r.FromStatus,
			ToStatus: r.ToStatus, Actor: r.Actor, ActorRole: r.ActorRole, Reason: r.Reason, CreatedAt: r.CreatedAt})
		e.TaskID, e.SourceRole, e.TargetRole = r.TaskID, r.SourceRole, r.TargetRole
		out[i] = e
	}
	return out, nil
}

// HandoffEventMaxSeq is the project's last event number.
func (db DB) HandoffEventMaxSeq(ctx context.Context, project string) (int64, error) {
	n, err := q.HandoffEventMaxSeq(ctx, db.ex, project)
	return n, interpret(err)
}

// HandoffEventStream is up to max events after seq for handoffs to one
// target role and from one source role ("" for any), oldest first.
func (db DB) HandoffEventStream(ctx context.Context, project string, after int64, targetRole, sourceRole string, max int) ([]HandoffEvent, error) {
	rows, err := q.HandoffEventStream(ctx, db.ex, dbsqlc.HandoffEventStreamParams{Project: project, After: after,
		TargetRole: nullable(targetRole), SourceRole: nullable(sourceRole), Max: int32(max)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]HandoffEvent, len(rows))
	for i, r := range rows {
		e := eventOf(dbsqlc.HandoffEvent{Project: r.Project, Seq: r.Seq, HandoffID: r.HandoffID, Event: r.Event, FromStatus: r.FromStatus,
			ToStatus: r.ToStatus, Actor: r.Actor, ActorRole: r.ActorRole, Reason: r.Reason, CreatedAt: r.CreatedAt})
		e.TaskID, e.Intent = r.TaskID, r.Intent
		e.SourceRole, e.SourceAgentID, e.TargetRole, e.TargetPermission = r.SourceRole, r.SourceAgentID, r.TargetRole, r.TargetPermission
		out[i] = e
	}
	return out, nil
}

// HandoffLastEvents is the last event of each of several handoffs, by
// handoff id, in one query.
func (db DB) HandoffLastEvents(ctx context.Context, project string, ids []string) (map[string]HandoffEvent, error) {
	rows, err := q.HandoffLastEvents(ctx, db.ex, dbsqlc.HandoffLastEventsParams{Project: project, HandoffIds: ids})
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[string]HandoffEvent, len(rows))
	for _, r := range rows {
		out[r.HandoffID] = eventOf(r)
	}
	return out, nil
}
