// Package packet assembles packets against the database and answers
// questions about them: it loads candidates (one indexed query per layer,
// inside one read-only repeatable-read snapshot it remembers), runs the
// pure pipeline of package assemble, and stores the packet with a record of
// every decision in one read-committed transaction (so a per-project head
// row updated by concurrent writers never fails it). Later it explains: why an item is or is not
// in a packet, which records a piece of text came from, which packets used
// an item, and whether a replay still gives the same bytes.
package packet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/ident"
	"github.com/contextd/contextd/internal/navi"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/rolepolicy"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// ErrNotFound means no such packet, or one the caller may not see.
var ErrNotFound = fmt.Errorf("packet %w", fault.ErrNotFound)

// Packet is a stored packet with its records.
type Packet struct {
	ID             string
	Project        string
	CreatedAt      time.Time
	CreatedBy      string
	TargetRole     string
	TaskID         string
	Request        *ctxtype.Request
	RequestRaw     json.RawMessage
	Rendered       string
	RenderedSHA256 string
	Tokenizer      string
	Format         string
	Allocated      int
	Used           int
	Gaps           []ctxtype.Gap
	Provenance     Provenance
	Snapshot       string
	// Pipeline is the version of the pipeline that made the packet; its
	// replay runs the same version.
	Pipeline int
	// RenderVersion is the version of the text layout it was rendered
	// with (assemble.Render1, Render2, ...), which a replay writes again.
	RenderVersion int
	// Cutoff is where the budget stopped trying candidates (pipeline 2),
	// nil when it tried them all; GapsMore counts the budget exclusions
	// Gaps does not list, the untried ones included.
	Cutoff       *assemble.Cutoff
	GapsMore     int
	Predecessors []ctxtype.Predecessor
	// Records are those the viewer may see (admin-only ones only for admins).
	Records []ctxtype.Record
	// AblationOf is the packet a counterfactual packet was made from
	// (Ablate; its request's Ablation says what it left out), empty for
	// any other; Ablations are the counterfactuals made of this one, the
	// oldest MaxAblationsListed, read by Get only.
	AblationOf string
	Ablations  []string
}

// Provenance counts the included item entries by kind and by source.
type Provenance struct {
	ByKind   map[string]int `json:"by_kind"`
	BySource map[string]int `json:"by_source"`
}

// Excluded counts the excluded candidates by reason: the records, and the
// candidates past the budget's cutoff, which have none.
func (p *Packet) Excluded() map[string]int {
	out := map[string]int{}
	for _, r := range p.Records {
		if r.Decision == ctxtype.Excluded {
			out[r.Reason]++
		}
	}
	if p.Cutoff != nil {
		out[assemble.ReasonBudgetCutoff] += p.Cutoff.Count
	}
	return out
}

// Section is one heading of a packet and the entries under it, in order.
type Section struct {
	Name    string
	Entries []ctxtype.Record
}

// Sections groups the records that have a place in the text by section,
// in the order they appear.
func (p *Packet) Sections() []Section {
	var with []ctxtype.Record
	for _, r := range p.Records {
		if r.Span != nil {
			with = append(with, r)
		}
	}
	sort.SliceStable(with, func(i, j int) bool { return with[i].Span.Start < with[j].Span.Start })
	var out []Section
	idx := map[string]int{}
	for _, r := range with {
		name := r.Section
		if r.Reason == ctxtype.ReasonContradicted {
			name = "Active Contradictions"
		}
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, Section{Name: name})
		}
		out[i].Entries = append(out[i].Entries, r)
	}
	return out
}

// Service assembles and explains packets.
type Service struct {
	store    *store.Store
	projects *project.Service
	handoffs *handoff.Service
	texts    *textCache
	// stages is told each stage of an assembly (metrics and traces); nil:
	// no one.
	stages assemble.StageHook
	// sealCheck verifies the seals of the entries that prove a redaction
	// to a replay (ProveWith); nil: no audit key, entries alone.
	sealCheck audit.SealCheck
}

// textCacheBytes bounds the process's cache of version texts.
const textCacheBytes = 64 << 20

// NewService returns a packet service.
func NewService(st *store.Store, projects *project.Service, handoffs *handoff.Service) *Service {
	return &Service{store: st, projects: projects, handoffs: handoffs, texts: newTextCache(textCacheBytes)}
}

// ObserveStages tells h where each stage of every assembly begins and
// ends: the pipeline's own (assemble.Options.Stages) and the service's
// around it, predecessors (reading the snapshot's handoffs) and store
// (sending the packet and its records; the commit is the caller's).
// Call it before serving.
func (s *Service) ObserveStages(h assemble.StageHook) { s.stages = h }

// The service's own stages, around the pipeline's.
const (
	StagePredecessors = "predecessors"
	StageStore        = "store"
)

// stage runs fn as the named stage, telling s.stages.
func (s *Service) stage(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	if s.stages == nil {
		return fn(ctx)
	}
	sctx, end := s.stages.Begin(ctx, name)
	defer end()
	return fn(sctx)
}

// predecessorsOf resolves the request's predecessor handoffs as the
// snapshot sees them; with a task_id, each must be of that task.
func (s *Service) predecessorsOf(ctx context.Context, db store.DB, proj, taskID string, ids []string) ([]ctxtype.Predecessor, error) {
	hs, err := s.handoffs.Resolve(ctx, db, proj, ids)
	if err != nil {
		return nil, err
	}
	if taskID != "" {
		var errs validation.List
		for i, h := range hs {
			if h.TaskID != taskID {
				errs.Add(fmt.Sprintf("/predecessors/%d", i), "other_task", "handoff %s is of task %q, not the packet's task %q", h.ID, h.TaskID, taskID)
			}
		}
		if err := errs.Err(); err != nil {
			return nil, err
		}
	}
	out := make([]ctxtype.Predecessor, len(hs))
	for i, h := range hs {
		p := ctxtype.Predecessor{
			ID: h.ID, SourceRole: h.Source.Role, TargetRole: h.Target.Role, Status: h.Status, StepID: h.Source.StepID,
			AttemptID: h.Source.AttemptID, Summary: h.Summary, Decisions: h.Decisions,
			Artifacts: []ctxtype.Artifact{}, Verdicts: []ctxtype.Verdict{},
			WitnessExitCode: h.VerificationEvidence.WitnessExitCode, WitnessPassed: h.VerificationEvidence.WitnessPassed,
		}
		for _, a := range h.Deliverables.Artifacts {
			p.Artifacts = append(p.Artifacts, ctxtype.Artifact{Name: a.Name, Kind: a.Kind, Ref: a.ArtifactRef, Snippet: a.ContentSnippet})
		}
		for _, v := range h.VerificationEvidence.CriticVerdicts {
			p.Verdicts = append(p.Verdicts, ctxtype.Verdict{Critic: v.Critic, Verdict: v.Verdict, Summary: v.Summary})
		}
		p.BaseCommit, p.CandidateTreeHash = h.BaseCommit, h.CandidateTreeHash
		if h.Status != handoff.Pending {
			at := h.UpdatedAt.UTC()
			p.SettledAt = &at
			p.Withdrawn = handoff.WasWithdrawn(h.Status, h.SupersededBy)
		}
		p.Patches, p.Reports, p.OpenQuestions = h.Deliverables.Patches, h.Deliverables.Reports, h.OpenQuestions
		if n := h.SuggestedNextStep; n != nil {
			p.NextStep = &ctxtype.NextStep{StepID: n.StepID, Action: n.Action}
		}
		out[i] = p
	}
	if err := reasonsOf(ctx, db, proj, hs, out); err != nil {
		return nil, err
	}
	return out, nil
}

// reasonsOf gives each predecessor that was rejected or withdrawn its
// reason and who gave it: the last event of a terminal handoff is the one
// that set its status. One query for all.
func reasonsOf(ctx context.Context, db store.DB, proj string, hs []*handoff.Handoff, out []ctxtype.Predecessor) error {
	var ids []string
	for _, h := range hs {
		if h.StatusReason != "" {
			ids = append(ids, h.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	last, err := db.HandoffLastEvents(ctx, proj, ids)
	if err != nil {
		return err
	}
	for i, h := range hs {
		if h.StatusReason == "" {
			continue
		}
		out[i].Reason = h.StatusReason
		if e, ok := last[h.ID]; ok && e.ToStatus == h.Status {
			out[i].ReasonBy, out[i].ReasonByRole = e.Actor, e.ActorRole
		}
	}
	return nil
}

// Assemble builds, stores and returns a packet for req (already decoded;
// Normalize is called here).
func (s *Service) Assemble(ctx context.Context, agent *auth.Agent, proj string, req *ctxtype.Request) (*Packet, error) {
	p, err := s.Prepare(ctx, agent, proj, req)
	if err != nil {
		return nil, err
	}
	if err := s.store.InTx(ctx, func(tx *store.Tx) error { return s.StoreTx(ctx, tx, p) }); err != nil {
		return nil, err
	}
	return s.ForViewer(agent, p), nil
}

// Prepare reads the candidates in one snapshot and assembles the packet,
// storing nothing: the first half of Assemble, for callers that store it
// in a transaction of their own (StoreTx). It holds no connection when it
// returns.
func (s *Service) Prepare(ctx context.Context, agent *auth.Agent, proj string, req *ctxtype.Request) (*Packet, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	if err := joinInvalid(req.Normalize(), checkContextPackets(req)); err != nil {
		return nil, err
	}
	if req.Kinds != nil || req.MaxPerSection != nil {
		// The request's own role policy members, checked as a policy's.
		if err := rolepolicy.Check(req.TargetRole, ctxtype.RolePolicy{Kinds: req.Kinds, MaxPerSection: req.MaxPerSection}); err != nil {
			return nil, err
		}
	}
	if proj == ctxtype.SharedProject && !agent.IsAdmin() {
		// A packet is written to the project it is assembled in, and
		// _shared is writable by admins only; agents assemble in their
		// projects, where _shared's items come in anyway.
		return nil, fmt.Errorf("%w: packets are assembled in a project; _shared is writable by admins only", fault.ErrForbidden)
	}
	if !agent.IsAdmin() && req.TargetRole != agent.Role {
		return nil, fmt.Errorf("%w: an agent assembles only for its own role (%s), not %s", fault.ErrForbidden, agent.Role, req.TargetRole)
	}
	var (
		point store.ReadPoint
		preds []ctxtype.Predecessor
		res   *assemble.Result
	)
	// The id is the packet's before it is assembled: the kxm format
	// writes it into the text, and a replay passes the stored one.
	id := ident.New("ctxpkt")
	asked := *req // as the client asked, for an attempt the snapshot runs again
	// The pipeline reads its candidates inside the snapshot as it goes, so
	// it runs inside it; what it read is what the snapshot held.
	err := s.store.Snapshot(ctx, func(tx *store.Tx) error {
		err := s.stage(ctx, StagePredecessors, func(ctx context.Context) error {
			var err error
			taskID := ""
			if req.Task != nil {
				taskID = req.Task.TaskID
			}
			if preds, err = s.predecessorsOf(ctx, tx.DB, proj, taskID, req.Predecessors); err != nil {
				return err
			}
			// The role's policy is read with the read point, in its trip.
			var policies []store.RolePolicy
			err = tx.Reads(ctx, func(db store.DB) (err error) { point, err = db.PacketReadPoint(ctx); return err },
				func(db store.DB) (err error) {
					policies, err = db.RolePoliciesOf(ctx, []string{proj, ctxtype.SharedProject}, req.TargetRole)
					return err
				})
			*req = asked
			req.ApplyPolicy(ctxtype.Effective(req.TargetRole, rolepolicy.Layers(proj, policies)...))
			return err
		})
		if err != nil {
			return err
		}
		in := assemble.Input{Project: proj, PacketID: id, Request: req, Now: point.Now, Predecessors: preds}
		tx.GenericPlans() // the assembly's statements (store.Tx.GenericPlans)
		res, _, err = assemble.AssembleBounded(ctx, in, newDBSource(tx, s.texts), assemble.Options{Stages: s.stages})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("assemble: %w", err)
	}
	return build(agent, id, proj, req, point, res, preds)
}

func build(agent *auth.Agent, id, proj string, req *ctxtype.Request, point store.ReadPoint, res *assemble.Result, preds []ctxtype.Predecessor) (*Packet, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	sum := audit.TextSHA256(res.Rendered)
	p := &Packet{
		ID: id, Project: proj, CreatedAt: point.Now, CreatedBy: agent.ID, TargetRole: req.TargetRole,
		Request: req, RequestRaw: raw, Rendered: res.Rendered, RenderedSHA256: hex.EncodeToString(sum[:]),
		Tokenizer: string(req.Tokenizer), Format: string(req.Format), Allocated: res.Allocated, Used: res.Used,
		Gaps: res.Gaps, Provenance: provenanceOf(res.Records), Snapshot: point.Snapshot, Records: res.Records,
		Predecessors: preds, Pipeline: res.Pipeline, RenderVersion: res.Render, Cutoff: res.Cutoff, GapsMore: res.GapsMore,
	}
	if p.Predecessors == nil {
		p.Predecessors = []ctxtype.Predecessor{}
	}
	if p.Gaps == nil {
		p.Gaps = []ctxtype.Gap{}
	}
	if req.Task != nil {
		p.TaskID = req.Task.TaskID
	}
	return p, nil
}

// StoreTx stores a prepared packet and its records in the caller's
// transaction.
func (s *Service) StoreTx(ctx context.Context, tx *store.Tx, p *Packet) error {
	if err := s.projects.Writable(ctx, tx, p.Project); err != nil {
		return err
	}
	sum, _ := hex.DecodeString(p.RenderedSHA256)
	gaps, _ := json.Marshal(p.Gaps)
	prov, _ := json.Marshal(p.Provenance)
	preds, _ := json.Marshal(p.Predecessors)
	var cutoff []byte
	if p.Cutoff != nil {
		cutoff, _ = json.Marshal(p.Cutoff)
	}
	row := store.Packet{
		Project: p.Project, ID: p.ID, CreatedAt: p.CreatedAt, CreatedBy: p.CreatedBy, TargetRole: p.TargetRole,
		TaskID: p.TaskID, Request: p.RequestRaw, Predecessors: preds, Format: p.Format, Tokenizer: p.Tokenizer, Rendered: p.Rendered,
		RenderedSHA256: sum, TokenBudget: p.Allocated, TokensUsed: p.Used, Gaps: gaps, ProvenanceSummary: prov, Snapshot: p.Snapshot,
		Pipeline: p.Pipeline, BudgetCutoff: cutoff, GapsMore: p.GapsMore, RenderVersion: p.RenderVersion, AblationOf: p.AblationOf,
	}
	err := s.stage(ctx, StageStore, func(ctx context.Context) error { return tx.PacketInsert(ctx, row, p.Records) })
	if err != nil {
		return fmt.Errorf("store packet: %w", err)
	}
	return nil
}

// ForViewer is the packet as agent may see it: admin-only records only for
// admins.
func (s *Service) ForViewer(agent *auth.Agent, p *Packet) *Packet {
	out := *p
	out.Records = visibleRecords(agent, p.Records)
	return &out
}

func provenanceOf(records []ctxtype.Record) Provenance {
	pv := Provenance{ByKind: map[string]int{}, BySource: map[string]int{}}
	for _, r := range records {
		switch {
		case r.SubjectKind == ctxtype.SubjectItem && r.Decision == ctxtype.Included:
			pv.ByKind[r.Kind]++
			pv.BySource[r.Source]++
		case r.SubjectKind == ctxtype.SubjectHandoff && r.Decision == ctxtype.Included:
			// Predecessor outputs are entries too: a handoff, from a peer.
			pv.ByKind["handoff"]++
			pv.BySource["peer"]++
		}
	}
	return pv
}

func visibleRecords(agent *auth.Agent, records []ctxtype.Record) []ctxtype.Record {
	if agent.IsAdmin() {
		return records
	}
	out := make([]ctxtype.Record, 0, len(records))
	for _, r := range records {
		if !r.AdminOnly {
			out = append(out, r)
		}
	}
	return out
}

// snapshotCandidates is pipeline 1's candidates as of a stored snapshot: every
// current version the snapshot saw (the pipeline itself decides what fires)
// and the relevance ranks it would have computed.
func (s *Service) snapshotCandidates(ctx context.Context, proj string, p *Packet) ([]assemble.Candidate, error) {
	projects := []string{proj, ctxtype.SharedProject}
	rows, err := s.store.SnapshotVersions(ctx, projects, "", p.Snapshot)
	if err != nil {
		return nil, err
	}
	ranks := map[[2]string]float64{}
	if p.Request.Query != "" {
		rel, err := s.store.SnapshotRelevance(ctx, projects, p.Snapshot, p.Request.Query, p.CreatedAt, assemble.RelevanceLimit)
		if err != nil {
			return nil, err
		}
		for _, r := range rel {
			ranks[[2]string{r.Project, r.Key}] = r.Rank
		}
	}
	out := make([]assemble.Candidate, 0, len(rows))
	for _, v := range rows {
		c := assemble.Candidate{Version: v}
		if rank, ok := ranks[[2]string{v.Project, v.Key}]; ok {
			c.Relevance = &rank
		}
		out = append(out, c)
	}
	return out, nil
}

func sha256sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// checkContextPackets refuses a request whose context_packets navi's
// parser refuses (every problem at once, by pointer), before any reading:
// assembly reads them again with the same parser, and may then trust them.
func checkContextPackets(req *ctxtype.Request) error {
	var fields []validation.Field
	for i, raw := range req.ContextPackets {
		if _, err := navi.ParseAt(fmt.Sprintf("/context_packets/%d", i), raw); err != nil {
			var verr *validation.Error
			if !errors.As(err, &verr) {
				return err
			}
			fields = append(fields, verr.Fields...)
		}
	}
	if len(fields) > 0 {
		return &validation.Error{Fields: fields}
	}
	return nil
}

// joinInvalid is the first error that is not a validation error, or every
// validation error's fields as one.
func joinInvalid(errs ...error) error {
	var all []validation.Field
	for _, err := range errs {
		var verr *validation.Error
		switch {
		case err == nil:
		case errors.As(err, &verr):
			all = append(all, verr.Fields...)
		default:
			return err
		}
	}
	if len(all) > 0 {
		return &validation.Error{Fields: all}
	}
	return nil
}
