package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/kxm"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// toHandoffAPI is a stored handoff as the API's Handoff, member by member.
// The API's members are pointers where its schema makes them optional: a
// list the handoff has (even empty) is sent, a nil one is left out; every
// member of source, target, an artifact and a verdict is sent, empty or
// not; a next step's empty members are left out.
func toHandoffAPI(h *handoff.Handoff) api.Handoff {
	src, ev := h.Source, h.VerificationEvidence
	out := api.Handoff{
		Id: h.ID, Project: h.Project, Status: h.Status, StatusReason: ptrIf(h.StatusReason), SupersededBy: ptrIf(h.SupersededBy),
		CreatedBy: h.CreatedBy, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt,
		TaskId: h.TaskID, WorkflowRunId: h.WorkflowRunID, ReworkOf: ptrIf(h.ReworkOf), PacketId: ptrIf(h.PacketID),
		Source: api.HandoffSource{Role: &src.Role, AgentId: &src.AgentID, Harness: &src.Harness, Model: &src.Model,
			StepId: &src.StepID, AttemptId: &src.AttemptID},
		Target: api.HandoffTarget{Role: &h.Target.Role, Permission: &h.Target.Permission},
		Intent: h.Intent, BaseCommit: h.BaseCommit, CandidateTreeHash: h.CandidateTreeHash,
		Deliverables:         api.HandoffDeliverables{Patches: listIf(h.Deliverables.Patches), Reports: listIf(h.Deliverables.Reports)},
		VerificationEvidence: api.HandoffEvidence{WitnessExitCode: ev.WitnessExitCode, WitnessPassed: ev.WitnessPassed},
		OpenQuestions:        h.OpenQuestions, Summary: h.Summary, Decisions: h.Decisions,
	}
	if as := h.Deliverables.Artifacts; as != nil {
		arts := make([]apiArtifact, len(as))
		for i, a := range as {
			arts[i] = apiArtifact{Name: &a.Name, ArtifactRef: &a.ArtifactRef, Kind: &a.Kind, ContentSnippet: &a.ContentSnippet}
		}
		out.Deliverables.Artifacts = &arts
	}
	if vs := ev.CriticVerdicts; vs != nil {
		verdicts := make([]apiVerdict, len(vs))
		for i, v := range vs {
			verdicts[i] = apiVerdict{Critic: &v.Critic, Verdict: &v.Verdict, Summary: &v.Summary}
		}
		out.VerificationEvidence.CriticVerdicts = &verdicts
	}
	if n := h.SuggestedNextStep; n != nil {
		out.SuggestedNextStep = &api.HandoffNextStep{StepId: ptrIf(n.StepID), Action: ptrIf(n.Action)}
	}
	if len(h.Warnings) > 0 {
		ws := make([]api.HandoffWarning, len(h.Warnings))
		for i, w := range h.Warnings {
			ws[i] = api.HandoffWarning{Code: w.Code, Detail: w.Detail}
		}
		out.Warnings = &ws
	}
	return out
}

// apiArtifact and apiVerdict name the element types the generated API
// leaves anonymous (HandoffDeliverables.Artifacts, HandoffEvidence.CriticVerdicts).
type (
	apiArtifact = struct {
		ArtifactRef    *string `json:"artifact_ref,omitempty"`
		ContentSnippet *string `json:"content_snippet,omitempty"`
		Kind           *string `json:"kind,omitempty"`
		Name           *string `json:"name,omitempty"`
	}
	apiVerdict = struct {
		Critic  *string `json:"critic,omitempty"`
		Summary *string `json:"summary,omitempty"`
		Verdict *string `json:"verdict,omitempty"`
	}
)

// listIf is a list as an optional API member: nil when the list is nil.
func listIf(s []string) *[]string {
	if s == nil {
		return nil
	}
	return &s
}

// fromHandoffAPI is a HandoffCreate as contextd's create input, member by
// member: an optional member not sent is its zero value.
func fromHandoffAPI(c api.HandoffCreate) handoff.Manifest {
	m := handoff.Manifest{
		TaskID: c.TaskId, WorkflowRunID: deref(c.WorkflowRunId), ReworkOf: deref(c.ReworkOf),
		Target: handoff.Target{Role: deref(c.Target.Role), Permission: deref(c.Target.Permission)},
		Intent: c.Intent, BaseCommit: deref(c.BaseCommit), CandidateTreeHash: deref(c.CandidateTreeHash),
		OpenQuestions: deref(c.OpenQuestions), Summary: deref(c.Summary), Decisions: deref(c.Decisions), PacketID: deref(c.PacketId),
	}
	if src := c.Source; src != nil {
		m.Source = handoff.Source{Role: deref(src.Role), AgentID: deref(src.AgentId), Harness: deref(src.Harness), Model: deref(src.Model),
			StepID: deref(src.StepId), AttemptID: deref(src.AttemptId)}
	}
	if d := c.Deliverables; d != nil {
		m.Deliverables.Patches, m.Deliverables.Reports = deref(d.Patches), deref(d.Reports)
		if as := deref(d.Artifacts); as != nil {
			m.Deliverables.Artifacts = make([]handoff.Artifact, len(as))
			for i, a := range as {
				m.Deliverables.Artifacts[i] = handoff.Artifact{Name: deref(a.Name), ArtifactRef: deref(a.ArtifactRef), Kind: deref(a.Kind),
					ContentSnippet: deref(a.ContentSnippet)}
			}
		}
	}
	if ev := c.VerificationEvidence; ev != nil {
		m.VerificationEvidence.WitnessExitCode, m.VerificationEvidence.WitnessPassed = ev.WitnessExitCode, ev.WitnessPassed
		if vs := deref(ev.CriticVerdicts); vs != nil {
			m.VerificationEvidence.CriticVerdicts = make([]handoff.Verdict, len(vs))
			for i, v := range vs {
				m.VerificationEvidence.CriticVerdicts[i] = handoff.Verdict{Critic: deref(v.Critic), Verdict: deref(v.Verdict), Summary: deref(v.Summary)}
			}
		}
	}
	if n := c.SuggestedNextStep; n != nil {
		m.SuggestedNextStep = &handoff.NextStep{StepID: deref(n.StepId), Action: deref(n.Action)}
	}
	return m
}

func toEvent(e handoff.Event) api.HandoffEvent {
	return api.HandoffEvent{Seq: e.Seq, HandoffId: e.HandoffID, Event: e.Event, FromStatus: ptrIf(e.FromStatus), ToStatus: e.ToStatus,
		Actor: e.Actor, ActorRole: e.ActorRole, Reason: e.Reason, CreatedAt: e.CreatedAt}
}

func toLinks(ls []handoff.Link) []api.HandoffLink {
	out := make([]api.HandoffLink, len(ls))
	for i, l := range ls {
		out[i] = api.HandoffLink{Id: l.ID, Status: l.Status, SourceRole: l.SourceRole, TargetRole: l.TargetRole, CreatedAt: l.CreatedAt}
	}
	return out
}

// CreateHandoff implements api.StrictServerInterface. The body is
// contextd's HandoffCreate or, told by its schema member, KXM's handoff
// manifest v1 (see createInput).
func (s *Server) CreateHandoff(ctx context.Context, r api.CreateHandoffRequestObject) (api.CreateHandoffResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	m, fromKXM, warnings, err := createInput(*body)
	if err != nil {
		return nil, err
	}
	var h *handoff.Handoff
	err = s.write(ctx, func(tx *store.Tx) error {
		h, err = s.handoffs.CreateTx(ctx, tx, agentFrom(ctx), r.Project, m)
		return err
	})
	if err != nil {
		if fromKXM {
			manifestPointers(err)
		}
		return nil, err
	}
	h.Warnings = append(h.Warnings, warnings...)
	return api.CreateHandoff201JSONResponse(toHandoffAPI(h)), nil
}

// createInput decodes a create's body, strictly, as the shape it is: a
// KXM manifest (a schema member) mapped by package kxm, with the warnings
// of what contextd replaced, or contextd's HandoffCreate.
func createInput(body []byte) (handoff.Manifest, bool, []validation.Field, error) {
	var m handoff.Manifest
	if !kxm.IsManifest(body) {
		var c api.HandoffCreate
		if err := decodeStrict(body, &c); err != nil {
			return m, false, nil, err
		}
		return fromHandoffAPI(c), false, nil, nil
	}
	var in kxm.ManifestInput
	if err := decodeStrict(body, &in); err != nil {
		return m, true, nil, err
	}
	warnings, err := kxm.CheckManifest(in)
	if err != nil {
		return m, true, nil, err
	}
	return fromKXMManifest(in), true, warnings, nil
}

// manifestPointers points a create's validation errors, which name
// contextd's members, into the KXM manifest as sent (camelCase).
func manifestPointers(err error) {
	var verr *validation.Error
	if errors.As(err, &verr) {
		for i := range verr.Fields {
			verr.Fields[i].Pointer = kxm.ManifestPointer(verr.Fields[i].Pointer)
		}
	}
	var mal *validation.Malformed
	if errors.As(err, &mal) {
		mal.Pointer = kxm.ManifestPointer(mal.Pointer)
	}
}

// ListHandoffs implements api.StrictServerInterface.
func (s *Server) ListHandoffs(ctx context.Context, r api.ListHandoffsRequestObject) (api.ListHandoffsResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	hs, next, err := s.handoffs.List(ctx, agentFrom(ctx), r.Project, handoff.ListParams{
		TaskID: deref(r.Params.TaskId), Status: deref(r.Params.Status), TargetRole: deref(r.Params.TargetRole),
		WorkflowRunID: deref(r.Params.WorkflowRunId), Cursor: deref(r.Params.Cursor), Limit: limit,
	})
	if err != nil {
		return nil, err
	}
	out := api.ListHandoffs200JSONResponse{Data: []api.Handoff{}, NextCursor: ptrIf(next)}
	for _, h := range hs {
		out.Data = append(out.Data, toHandoffAPI(h))
	}
	return out, nil
}

// GetHandoff implements api.StrictServerInterface: a HandoffDetail or,
// with format=kxm, KXM's handoff manifest with the status contextd holds.
func (s *Server) GetHandoff(ctx context.Context, r api.GetHandoffRequestObject) (api.GetHandoffResponseObject, error) {
	format := api.HandoffFormatContextd
	if r.Params.Format != nil {
		format = *r.Params.Format
	}
	if !format.Valid() {
		return nil, validation.One("format", "enum", "format must be contextd or kxm, not %q", format)
	}
	d, err := s.handoffs.Get(ctx, agentFrom(ctx), r.Project, r.Id)
	if err != nil {
		return nil, err
	}
	var body any
	if format == api.HandoffFormatKxm {
		body = toKXMManifest(d.Handoff)
	} else {
		body = toHandoffDetail(d)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return api.GetHandoff200JSONResponse(b), nil
}

// toHandoffDetail is a handoff with its events, rework chain and packets
// as the API's HandoffDetail: the handoff's members as toHandoffAPI maps
// them, then the rest.
func toHandoffDetail(d *handoff.Detail) api.HandoffDetail {
	b := toHandoffAPI(d.Handoff)
	out := api.HandoffDetail{
		Id: b.Id, Project: b.Project, Status: b.Status, StatusReason: b.StatusReason, SupersededBy: b.SupersededBy,
		CreatedBy: b.CreatedBy, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt,
		TaskId: b.TaskId, WorkflowRunId: b.WorkflowRunId, ReworkOf: b.ReworkOf, PacketId: b.PacketId,
		Source: b.Source, Target: b.Target, Intent: b.Intent, BaseCommit: b.BaseCommit, CandidateTreeHash: b.CandidateTreeHash,
		Deliverables: b.Deliverables, VerificationEvidence: b.VerificationEvidence, OpenQuestions: b.OpenQuestions,
		SuggestedNextStep: b.SuggestedNextStep, Summary: b.Summary, Decisions: b.Decisions, Warnings: b.Warnings,
	}
	out.Events = make([]api.HandoffEvent, len(d.Events))
	for i, e := range d.Events {
		out.Events[i] = toEvent(e)
	}
	out.ReworkChain.Ancestors, out.ReworkChain.Descendants = toLinks(d.Ancestors), toLinks(d.Descendants)
	out.UsedByPackets = make([]api.PacketUse, len(d.UsedBy))
	for i, u := range d.UsedBy {
		out.UsedByPackets[i] = api.PacketUse{PacketId: u.PacketID, TargetRole: u.TargetRole, Agent: u.Agent, CreatedAt: u.CreatedAt}
	}
	return out
}

func (s *Server) transition(ctx context.Context, proj, id string, t handoff.Transition, body *api.TransitionRequest) (api.Handoff, error) {
	reason := ""
	if body != nil {
		reason = deref(body.Reason)
	}
	var h *handoff.Handoff
	err := s.write(ctx, func(tx *store.Tx) error {
		var err error
		h, err = s.handoffs.TransitionTx(ctx, tx, agentFrom(ctx), proj, id, t, reason)
		return err
	})
	if err != nil {
		return api.Handoff{}, err
	}
	return toHandoffAPI(h), nil
}

// AcceptHandoff implements api.StrictServerInterface.
func (s *Server) AcceptHandoff(ctx context.Context, r api.AcceptHandoffRequestObject) (api.AcceptHandoffResponseObject, error) {
	h, err := s.transition(ctx, r.Project, r.Id, handoff.Accept, r.Body)
	if err != nil {
		return nil, err
	}
	return api.AcceptHandoff200JSONResponse(h), nil
}

// RejectHandoff implements api.StrictServerInterface.
func (s *Server) RejectHandoff(ctx context.Context, r api.RejectHandoffRequestObject) (api.RejectHandoffResponseObject, error) {
	h, err := s.transition(ctx, r.Project, r.Id, handoff.Reject, r.Body)
	if err != nil {
		return nil, err
	}
	return api.RejectHandoff200JSONResponse(h), nil
}

// WithdrawHandoff implements api.StrictServerInterface.
func (s *Server) WithdrawHandoff(ctx context.Context, r api.WithdrawHandoffRequestObject) (api.WithdrawHandoffResponseObject, error) {
	h, err := s.transition(ctx, r.Project, r.Id, handoff.Withdraw, r.Body)
	if err != nil {
		return nil, err
	}
	return api.WithdrawHandoff200JSONResponse(h), nil
}

// GetTaskHistory implements api.StrictServerInterface.
func (s *Server) GetTaskHistory(ctx context.Context, r api.GetTaskHistoryRequestObject) (api.GetTaskHistoryResponseObject, error) {
	entries, err := s.handoffs.TaskHistory(ctx, agentFrom(ctx), r.Project, r.TaskId)
	if err != nil {
		return nil, err
	}
	out := api.GetTaskHistory200JSONResponse{TaskId: r.TaskId, Entries: make([]api.TimelineEntry, len(entries))}
	for i, e := range entries {
		te := api.TimelineEntry{Type: e.Type, Time: e.Time, Role: e.Role, Agent: e.Agent, PacketId: ptrIf(e.PacketID), StepId: ptrIf(e.StepID)}
		if ev := e.Event; ev != nil {
			seq := ev.Seq
			te.HandoffId, te.Event, te.FromStatus, te.ToStatus, te.Reason, te.Seq = &ev.HandoffID, &ev.Event, ptrIf(ev.FromStatus), &ev.ToStatus, ptrIf(ev.Reason), &seq
			te.SourceRole, te.TargetRole = &e.Handoff.SourceRole, &e.Handoff.TargetRole
		}
		out.Entries[i] = te
	}
	return out, nil
}

// StreamHandoffEvents implements api.StrictServerInterface: the live inbox.
func (s *Server) StreamHandoffEvents(ctx context.Context, r api.StreamHandoffEventsRequestObject) (api.StreamHandoffEventsResponseObject, error) {
	agent := agentFrom(ctx)
	filter, err := s.handoffs.AuthorizeStream(ctx, agent, r.Project, handoff.StreamFilter{
		TargetRole: deref(r.Params.TargetRole), SourceRole: deref(r.Params.SourceRole)})
	if err != nil {
		return nil, err
	}
	var after int64 = -1
	if id := strings.TrimSpace(deref(r.Params.LastEventID)); id != "" {
		after, err = strconv.ParseInt(id, 10, 64)
		if err != nil || after < 0 {
			return nil, validation.One("Last-Event-ID", "format", "Last-Event-ID must be an event id this stream sent")
		}
	}
	return &eventStream{ctx: ctx, s: s, agent: agent, project: r.Project, filter: filter, after: after}, nil
}

// eventStream writes Server-Sent Events until the client goes away, the
// server stops, or the agent's key is revoked.
type eventStream struct {
	ctx     context.Context
	s       *Server
	agent   *auth.Agent
	project string
	filter  handoff.StreamFilter
	after   int64 // -1: start from now
}

type streamData struct {
	Seq        int64     `json:"seq"`
	HandoffID  string    `json:"handoff_id"`
	TaskID     string    `json:"task_id"`
	Event      string    `json:"event"`
	FromStatus *string   `json:"from_status"`
	ToStatus   string    `json:"to_status"`
	Actor      string    `json:"actor"`
	ActorRole  string    `json:"actor_role"`
	Reason     string    `json:"reason"`
	Intent     string    `json:"intent"`
	Source     any       `json:"source"`
	Target     any       `json:"target"`
	CreatedAt  time.Time `json:"created_at"`
}

func (e *eventStream) VisitStreamHandoffEventsResponse(w http.ResponseWriter) error {
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel() // ends the agent's follower with the stream
	wake, stop := e.s.handoffs.Subscribe(e.project)
	defer stop()
	// Subscribed first, then the starting point: nothing committed in
	// between can be missed.
	latest, err := e.s.handoffs.LatestSeq(ctx, e.project)
	if err != nil {
		return err
	}
	if e.after < 0 || e.after > latest {
		// No id, or one this project never reached (another project's, or
		// from before a restore): start from now rather than skip what
		// comes next.
		e.after = latest
	}
	revoked := e.s.agents.Follow(ctx, e.agent)
	out := newSSEWriter(w, e.s.streamWrite)
	defer out.finish()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if out.send(": contextd handoff events for %s after %d\n\n", e.project, e.after) != nil {
		return nil
	}
	ticker := time.NewTicker(e.s.keepAlive)
	defer ticker.Stop()
	for {
		if e.sendNew(ctx, out) != nil {
			return nil // the client is gone or the database is; it reconnects with Last-Event-ID
		}
		select {
		case <-ctx.Done():
			return nil
		case <-e.s.stopping:
			return nil
		case <-revoked:
			return nil
		case <-wake:
		case <-ticker.C:
			// Look again too: a wake-up lost while the listener reconnected
			// costs at most one keep-alive interval.
			if out.send(": keep-alive\n\n") != nil {
				return nil
			}
		}
	}
}

// sendNew sends every event after e.after, in pages of 500.
func (e *eventStream) sendNew(ctx context.Context, out *sseWriter) error {
	for {
		evs, err := e.s.handoffs.EventsAfter(ctx, e.project, e.after, e.filter, 500)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Proposal != nil {
				if err := sendProposalEvent(out, ev.Proposal); err != nil {
					return err
				}
				e.after = ev.Seq
				continue
			}
			d := streamData{Seq: ev.Seq, HandoffID: ev.HandoffID, TaskID: ev.TaskID, Event: ev.Event.Event, FromStatus: ptrIf(ev.FromStatus),
				ToStatus: ev.ToStatus, Actor: ev.Actor, ActorRole: ev.ActorRole, Reason: ev.Reason, Intent: ev.Intent,
				Source: map[string]string{"role": ev.Source.Role, "agent_id": ev.Source.AgentID},
				Target: map[string]string{"role": ev.Target.Role, "permission": ev.Target.Permission}, CreatedAt: ev.CreatedAt}
			b, _ := json.Marshal(d)
			if err := out.send("id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Event.Event, b); err != nil {
				return err
			}
			e.after = ev.Seq
		}
		if len(evs) < 500 {
			return nil
		}
	}
}

// sseWriter writes a stream's frames, each under a write deadline of its
// own. The server's write timeout bounds an ordinary answer as a whole
// and would end every stream after it, so a stream lifts it for itself;
// a client that stops reading is then still cut off, one frame's deadline
// after its buffers fill, instead of holding the stream forever.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func newSSEWriter(w http.ResponseWriter, timeout time.Duration) *sseWriter {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // not supported (a test's recorder): nothing to lift
	return &sseWriter{w: w, rc: rc, timeout: timeout}
}

// send writes and flushes one frame within the writer's timeout.
func (s *sseWriter) send(format string, args ...any) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := fmt.Fprintf(s.w, format, args...); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// finish gives the end of the response (the last chunk, written after the
// handler returns) a deadline of its own, rather than a frame's that may
// have passed.
func (s *sseWriter) finish() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
}
