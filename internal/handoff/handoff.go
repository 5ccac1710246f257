// Package handoff keeps the handoffs between agents (KXM's
// HandoffManifestV1) and enforces their lifecycle: pending, then exactly one
// of accepted, rejected, withdrawn (its source took it back) or superseded
// (a newer handoff of its task replaced it). Transitions are conditional updates,
// so exactly one of racing transitions wins; every change is appended as an
// event numbered per project in commit order, and a NOTIFY wakes the live
// inboxes of every contextd process on the database.
package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/ident"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// Errors of this package.
var (
	ErrNotFound = fmt.Errorf("handoff %w", fault.ErrNotFound)
)

// TransitionError is a transition from a status that does not allow it.
type TransitionError struct {
	ID            string
	CurrentStatus string
	Wanted        string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("handoff %s is %s; only a pending handoff can become %s", e.ID, e.CurrentStatus, e.Wanted)
}

// Is makes a TransitionError a state conflict.
func (e *TransitionError) Is(target error) bool { return target == fault.ErrStateConflict }

// CurrentState is the status the handoff is in.
func (e *TransitionError) CurrentState() string { return e.CurrentStatus }

// The statuses. A handoff withdrawn before migration 00030 is stored as
// superseded with no successor (see WasWithdrawn); its row and events are
// audited history and stay as they were.
const (
	Pending    = "pending"
	Accepted   = "accepted"
	Rejected   = "rejected"
	Superseded = "superseded"
	Withdrawn  = "withdrawn"
)

// Statuses are the statuses, in lifecycle order.
var Statuses = []string{Pending, Accepted, Rejected, Superseded, Withdrawn}

// WasWithdrawn reports whether a handoff of status and successor was
// taken back by its source: withdrawn, or (stored before migration 00030)
// superseded with no handoff superseding it.
func WasWithdrawn(status, supersededBy string) bool {
	return status == Withdrawn || (status == Superseded && supersededBy == "")
}

// NotifyChannel is the LISTEN/NOTIFY channel; the payload is the project.
const NotifyChannel = "contextd_handoff_events"

// Source is the handing-over side.
type Source struct {
	Role      string `json:"role"`
	AgentID   string `json:"agent_id"`
	Harness   string `json:"harness"`
	Model     string `json:"model"`
	StepID    string `json:"step_id"`
	AttemptID string `json:"attempt_id"`
}

// Target is the receiving side.
type Target struct {
	Role       string `json:"role"`
	Permission string `json:"permission"`
}

// Artifact is one deliverable artifact.
type Artifact struct {
	Name           string `json:"name"`
	ArtifactRef    string `json:"artifact_ref"`
	Kind           string `json:"kind"`
	ContentSnippet string `json:"content_snippet"`
}

// Deliverables are what the handoff hands over.
type Deliverables struct {
	Patches   []string   `json:"patches"`
	Reports   []string   `json:"reports"`
	Artifacts []Artifact `json:"artifacts"`
}

// Verdict is one critic's verdict.
type Verdict struct {
	Critic  string `json:"critic"`
	Verdict string `json:"verdict"`
	Summary string `json:"summary"`
}

// Evidence is the verification evidence.
type Evidence struct {
	WitnessExitCode *int      `json:"witness_exit_code,omitempty"`
	WitnessPassed   *bool     `json:"witness_passed,omitempty"`
	CriticVerdicts  []Verdict `json:"critic_verdicts"`
}

// NextStep is the suggested next step.
type NextStep struct {
	StepID string `json:"step_id,omitempty"`
	Action string `json:"action,omitempty"`
}

// Manifest is a handoff as its source wrote it.
type Manifest struct {
	TaskID               string       `json:"task_id"`
	WorkflowRunID        string       `json:"workflow_run_id"`
	ReworkOf             string       `json:"rework_of,omitempty"`
	Source               Source       `json:"source"`
	Target               Target       `json:"target"`
	Intent               string       `json:"intent"`
	BaseCommit           string       `json:"base_commit"`
	CandidateTreeHash    string       `json:"candidate_tree_hash"`
	Deliverables         Deliverables `json:"deliverables"`
	VerificationEvidence Evidence     `json:"verification_evidence"`
	OpenQuestions        []string     `json:"open_questions"`
	SuggestedNextStep    *NextStep    `json:"suggested_next_step,omitempty"`
	Summary              string       `json:"summary"`
	Decisions            []string     `json:"decisions"`
	PacketID             string       `json:"packet_id,omitempty"`
}

// Handoff is a stored handoff.
type Handoff struct {
	Manifest
	// Warnings are what a create allowed but the caller should know (no
	// agent holds the target role); only a create's answer carries them.
	Warnings     []validation.Field
	ID           string
	Project      string
	Status       string
	StatusReason string
	SupersededBy string
	CreatedBy    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func fromRow(r store.Handoff) (*Handoff, error) {
	h := &Handoff{ID: r.ID, Project: r.Project, Status: r.Status, StatusReason: r.StatusReason, SupersededBy: r.SupersededBy,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if err := json.Unmarshal(r.Manifest, &h.Manifest); err != nil {
		return nil, fmt.Errorf("decode manifest of %s: %w", r.ID, err)
	}
	return h, nil
}

// Event is one change of one handoff.
type Event struct {
	Seq        int64
	HandoffID  string
	Event      string
	FromStatus string // "" for creation
	ToStatus   string
	Actor      string
	ActorRole  string
	Reason     string
	CreatedAt  time.Time
}

func eventFromRow(r store.HandoffEvent) Event {
	return Event{Seq: r.Seq, HandoffID: r.HandoffID, Event: r.Event, FromStatus: r.FromStatus, ToStatus: r.ToStatus, Actor: r.Actor,
		ActorRole: r.ActorRole, Reason: r.Reason, CreatedAt: r.CreatedAt}
}

// Service manages handoffs.
type Service struct {
	store    *store.Store
	projects *project.Service
	hub      *Hub
}

// NewService returns a handoff service; hub is the process's one LISTEN
// connection, shared by every event stream.
func NewService(st *store.Store, projects *project.Service, hub *Hub) *Service {
	return &Service{store: st, projects: projects, hub: hub}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (m *Manifest) normalize(agent *auth.Agent) error {
	var errs validation.List
	if strings.TrimSpace(m.TaskID) == "" {
		errs.Add("/task_id", "required", "task_id is required")
	}
	if strings.TrimSpace(m.Target.Role) == "" {
		errs.Add("/target/role", "required", "target.role is required")
	}
	if m.Target.Permission != "" && !auth.Permission(m.Target.Permission).Valid() {
		errs.Add("/target/permission", "enum", "target.permission must be read-only, edit or admin")
	}
	if !validation.OneOf(m.Intent, "request_review", "dispatch_fix", "request_approval", "complete_workflow") {
		errs.Add("/intent", "enum", "intent must be request_review, dispatch_fix, request_approval or complete_workflow")
	}
	for i, a := range m.Deliverables.Artifacts {
		if strings.TrimSpace(a.Name) == "" {
			errs.Add(fmt.Sprintf("/deliverables/artifacts/%d/name", i), "required", "an artifact needs a name")
		}
	}
	for i, v := range m.VerificationEvidence.CriticVerdicts {
		if !validation.OneOf(v.Verdict, "PASS", "FAIL", "WARN", "UNKNOWN") {
			errs.Add(fmt.Sprintf("/verification_evidence/critic_verdicts/%d/verdict", i), "enum", "verdict must be PASS, FAIL, WARN or UNKNOWN")
		}
	}
	m.checkLimits(&errs)
	if err := errs.Err(); err != nil {
		return err
	}
	if auth.Permission(m.Target.Permission).Exceeds(agent.Permission) {
		return fmt.Errorf("%w: target.permission %s exceeds your own permission %s; a handoff hands on at most what its author holds",
			fault.ErrForbidden, m.Target.Permission, agent.Permission)
	}
	if m.Source.Role == "" {
		m.Source.Role = agent.Role
	} else if m.Source.Role != agent.Role && !agent.IsAdmin() {
		return fmt.Errorf("%w: the source role is the calling agent's role (%s), not %s", fault.ErrForbidden, agent.Role, m.Source.Role)
	}
	if m.Source.AgentID == "" {
		m.Source.AgentID = agent.ID
	} else if m.Source.AgentID != agent.ID && !agent.IsAdmin() {
		return fmt.Errorf("%w: the source agent is the caller (%s), not %s", fault.ErrForbidden, agent.ID, m.Source.AgentID)
	}
	m.Deliverables.Patches = nonNil(m.Deliverables.Patches)
	m.Deliverables.Reports = nonNil(m.Deliverables.Reports)
	if m.Deliverables.Artifacts == nil {
		m.Deliverables.Artifacts = []Artifact{}
	}
	if m.VerificationEvidence.CriticVerdicts == nil {
		m.VerificationEvidence.CriticVerdicts = []Verdict{}
	}
	m.OpenQuestions = nonNil(m.OpenQuestions)
	m.Decisions = nonNil(m.Decisions)
	return nil
}

// appendEvent numbers and appends an event, and notifies listeners (the
// notification is delivered when the transaction commits).
func appendEvent(ctx context.Context, tx *store.Tx, proj, handoffID, event, from, to string, agent *auth.Agent, reason string) error {
	_, err := tx.HandoffEventAppend(ctx, store.HandoffEvent{
		Project: proj, HandoffID: handoffID, Event: event, FromStatus: from, ToStatus: to,
		Actor: agent.ID, ActorRole: agent.Role, Reason: reason,
	}, NotifyChannel)
	return err
}

// Create stores a new pending handoff and supersedes any earlier pending
// handoff of the same task to the same target role, in one transaction.
// Superseding is withdrawing by other means, so it takes withdraw's right
// (mayWithdraw): a pending handoff of another source is a 409 conflict,
// and nothing is written.
func (s *Service) Create(ctx context.Context, agent *auth.Agent, proj string, m Manifest) (*Handoff, error) {
	var out *Handoff
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.CreateTx(ctx, tx, agent, proj, m)
		return err
	})
	return out, err
}

// CreateTx is Create inside the caller's transaction.
func (s *Service) CreateTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, m Manifest) (*Handoff, error) {
	if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Edit); err != nil {
		return nil, err
	}
	if err := s.projects.Writable(ctx, tx, proj); err != nil {
		return nil, err
	}
	if proj == auth.SharedProject {
		// _shared holds shared defaults; work moves between agents in a
		// project, where its scope and its roles apply.
		return nil, validation.One("project", "invalid", "handoffs are made in a project, not in %s", auth.SharedProject)
	}
	if err := m.normalize(agent); err != nil {
		return nil, err
	}
	out, err := s.create(ctx, tx, agent, proj, m)
	if err != nil {
		return nil, fmt.Errorf("create handoff: %w", err)
	}
	held, err := tx.AgentRoleHeld(ctx, proj, m.Target.Role)
	if err != nil {
		return nil, err
	}
	if !held {
		out.Warnings = append(out.Warnings, validation.Field{Code: "no_agent_for_role",
			Detail: fmt.Sprintf("no agent of role %q works in project %s yet: the handoff waits until one does", m.Target.Role, proj)})
	}
	return out, nil
}

func (s *Service) create(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, m Manifest) (*Handoff, error) {
	id := ident.New("hnd")
	if err := tx.HandoffLockTaskTarget(ctx, proj, m.TaskID, m.Target.Role); err != nil {
		return nil, err
	}
	if err := s.checkRefs(ctx, tx, proj, m); err != nil {
		return nil, err
	}
	if err := checkSupersede(ctx, tx, agent, proj, m); err != nil {
		return nil, err
	}
	superseded, err := tx.HandoffSupersedePending(ctx, proj, m.TaskID, m.Target.Role, id)
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	row, err := tx.HandoffInsert(ctx, store.Handoff{
		Project: proj, ID: id, TaskID: m.TaskID, WorkflowRunID: m.WorkflowRunID, ReworkOf: m.ReworkOf,
		SourceRole: m.Source.Role, SourceAgentID: m.Source.AgentID, TargetRole: m.Target.Role,
		TargetPermission: m.Target.Permission, Intent: m.Intent, PacketID: m.PacketID, Manifest: manifest, CreatedBy: agent.ID,
	})
	if err != nil {
		return nil, err
	}
	if err := appendEvent(ctx, tx, proj, id, "created", "", Pending, agent, ""); err != nil {
		return nil, err
	}
	for _, old := range superseded {
		if err := appendEvent(ctx, tx, proj, old, "superseded", Pending, Superseded, agent, "superseded by "+id); err != nil {
			return nil, err
		}
	}
	return fromRow(row)
}

// checkSupersede refuses a create that would supersede a pending handoff
// the caller may not withdraw: otherwise an edit agent refused a withdraw
// could take another source's handoff back by creating its own. It runs
// under HandoffLockTaskTarget, so no pending handoff appears after it.
func checkSupersede(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, m Manifest) error {
	pending, err := tx.HandoffPending(ctx, proj, m.TaskID, m.Target.Role)
	if err != nil {
		return err
	}
	for _, p := range pending {
		if !mayWithdraw(agent, proj, p) {
			return fmt.Errorf("%w: handoff %s for task %s to role %s is pending and was handed over by another agent (%s); "+
				"only its source agent or an admin of the project may supersede it: its source may withdraw it first",
				fault.ErrConflict, p.ID, m.TaskID, m.Target.Role, p.SourceAgentID)
		}
	}
	return nil
}

// mayWithdraw is who may take a pending handoff back, by withdrawing it
// or by superseding it with a new one: its source agent, or an admin of
// the project (scope binds admins too).
func mayWithdraw(agent *auth.Agent, proj string, h store.Handoff) bool {
	return h.SourceAgentID == agent.ID || (agent.IsAdmin() && agent.InScope(proj))
}

// checkRefs checks that rework_of and packet_id name things of this
// project; a missing one is the caller's mistake (422), an outage is not.
func (s *Service) checkRefs(ctx context.Context, tx *store.Tx, proj string, m Manifest) error {
	if m.ReworkOf != "" {
		prev, err := tx.HandoffGet(ctx, proj, m.ReworkOf)
		if err != nil && !errors.Is(err, fault.ErrNotFound) {
			return err
		}
		if err != nil || prev.TaskID != m.TaskID {
			return validation.One("/rework_of", "invalid", "rework_of must name a handoff of the same task in this project")
		}
		// A pending handoff to the same role is superseded by this very
		// create, so it may be reworked too.
		supersededNow := prev.Status == Pending && prev.TargetRole == m.Target.Role
		if prev.Status != Rejected && prev.Status != Superseded && prev.Status != Withdrawn && !supersededNow {
			return validation.One("/rework_of", "invalid", "rework_of must name a rejected, withdrawn or superseded handoff; %s is %s", m.ReworkOf, prev.Status)
		}
	}
	if m.PacketID != "" {
		if _, err := tx.PacketGet(ctx, proj, m.PacketID); err != nil {
			if !errors.Is(err, fault.ErrNotFound) {
				return err
			}
			return validation.One("/packet_id", "invalid", "packet_id must name a packet of this project")
		}
	}
	return nil
}

// Transition is one of the moves out of pending.
type Transition string

// The transitions.
const (
	Accept   Transition = "accept"
	Reject   Transition = "reject"
	Withdraw Transition = "withdraw"
)

// Transition moves a pending handoff: accept and reject by an agent of the
// target role (read-only included) or an admin, withdraw (to withdrawn) by
// its source agent or an admin. It is one conditional update: of racing
// transitions exactly one wins, the others get a *TransitionError.
func (s *Service) Transition(ctx context.Context, agent *auth.Agent, proj, id string, t Transition, reason string) (*Handoff, error) {
	var out *Handoff
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.TransitionTx(ctx, tx, agent, proj, id, t, reason)
		return err
	})
	return out, err
}

// TransitionTx is Transition inside the caller's transaction.
func (s *Service) TransitionTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, id string, t Transition, reason string) (*Handoff, error) {
	if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	if err := s.projects.Writable(ctx, tx, proj); err != nil {
		return nil, err
	}
	if (t == Reject || t == Withdraw) && strings.TrimSpace(reason) == "" {
		return nil, validation.One("/reason", "required", "a reason is required to %s", t)
	}
	var errs validation.List
	limits.Chars(&errs, "/reason", reason, limits.Get().Reason)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	out, err := s.transition(ctx, tx, agent, proj, id, t, reason)
	if err != nil {
		return nil, fmt.Errorf("%s handoff %s: %w", t, id, err)
	}
	return out, nil
}

func (s *Service) transition(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, id string, t Transition, reason string) (*Handoff, error) {
	// A transition's event is named after the status it sets.
	to := map[Transition]string{Accept: Accepted, Reject: Rejected, Withdraw: Withdrawn}[t]
	cur, err := tx.HandoffGet(ctx, proj, id)
	if err != nil {
		if errors.Is(err, fault.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, err
	}
	switch {
	case agent.IsAdmin():
	case t == Withdraw && !mayWithdraw(agent, proj, cur):
		return nil, fmt.Errorf("%w: only handoff %s's source agent (or an admin) may withdraw it", fault.ErrForbidden, id)
	case t != Withdraw && cur.TargetRole != agent.Role:
		return nil, fmt.Errorf("%w: handoff %s is addressed to role %s", fault.ErrForbidden, id, cur.TargetRole)
	}
	row, err := tx.HandoffTransition(ctx, proj, id, to, reason)
	if err != nil {
		if !errors.Is(err, fault.ErrNotFound) {
			return nil, err
		}
		now, gerr := tx.HandoffGet(ctx, proj, id)
		if gerr != nil {
			return nil, gerr
		}
		return nil, &TransitionError{ID: id, CurrentStatus: now.Status, Wanted: to}
	}
	if err := appendEvent(ctx, tx, proj, id, to, Pending, to, agent, reason); err != nil {
		return nil, err
	}
	return fromRow(row)
}

// checkLimits bounds every text and list of a manifest (package limits).
func (m *Manifest) checkLimits(errs *validation.List) {
	l := limits.Get()
	limits.Chars(errs, "/task_id", m.TaskID, l.TaskID)
	limits.Chars(errs, "/summary", m.Summary, l.Summary)
	limits.Chars(errs, "/source/role", m.Source.Role, l.Role)
	limits.Chars(errs, "/target/role", m.Target.Role, l.Role)
	limits.Chars(errs, "/source/step_id", m.Source.StepID, l.StepID)
	for _, f := range [][2]string{{"/workflow_run_id", m.WorkflowRunID}, {"/rework_of", m.ReworkOf}, {"/intent", m.Intent},
		{"/base_commit", m.BaseCommit}, {"/candidate_tree_hash", m.CandidateTreeHash}, {"/packet_id", m.PacketID},
		{"/source/agent_id", m.Source.AgentID}, {"/source/harness", m.Source.Harness}, {"/source/model", m.Source.Model},
		{"/source/attempt_id", m.Source.AttemptID}} {
		limits.Chars(errs, f[0], f[1], l.Text)
	}
	lists := []struct {
		ptr  string
		vals []string
	}{{"/open_questions", m.OpenQuestions}, {"/decisions", m.Decisions},
		{"/deliverables/patches", m.Deliverables.Patches}, {"/deliverables/reports", m.Deliverables.Reports}}
	for _, li := range lists {
		limits.Items(errs, li.ptr, len(li.vals), l.List)
		for i, v := range li.vals {
			limits.Chars(errs, fmt.Sprintf("%s/%d", li.ptr, i), v, l.Summary)
		}
	}
	limits.Items(errs, "/deliverables/artifacts", len(m.Deliverables.Artifacts), l.List)
	for i, a := range m.Deliverables.Artifacts {
		p := fmt.Sprintf("/deliverables/artifacts/%d", i)
		limits.Chars(errs, p+"/name", a.Name, l.Text)
		limits.Chars(errs, p+"/artifact_ref", a.ArtifactRef, l.Text)
		limits.Chars(errs, p+"/kind", a.Kind, l.Text)
		limits.Chars(errs, p+"/content_snippet", a.ContentSnippet, l.Summary)
	}
	limits.Items(errs, "/verification_evidence/critic_verdicts", len(m.VerificationEvidence.CriticVerdicts), l.List)
	for i, v := range m.VerificationEvidence.CriticVerdicts {
		p := fmt.Sprintf("/verification_evidence/critic_verdicts/%d", i)
		limits.Chars(errs, p+"/critic", v.Critic, l.Text)
		limits.Chars(errs, p+"/summary", v.Summary, l.Summary)
	}
	if n := m.SuggestedNextStep; n != nil {
		limits.Chars(errs, "/suggested_next_step/step_id", n.StepID, l.StepID)
		limits.Chars(errs, "/suggested_next_step/action", n.Action, l.Summary)
	}
}
