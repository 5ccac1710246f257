package assemble

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
)

// requestParts is the first records stage: the document gets the request's
// own parts — task, objective, criteria, plan, predecessors, host state —
// and each part its record. They come first among the records and are
// inviolable: the budget never drops them.
func (p *pipeline) requestParts() {
	req := p.req
	p.doc = &render.Doc{Project: p.in.Project, TargetRole: req.TargetRole, Sections: map[string][]render.Entry{},
		PacketID: p.in.PacketID, GeneratedAt: p.in.Now, Allocated: req.TokenBudget}
	// part records a part and returns its reference, or false when the
	// request's ablation leaves it out (its record says so; nothing of it
	// is rendered).
	part := func(key, section string) (int, bool) {
		r := ctxtype.Record{SubjectKind: ctxtype.SubjectRequest, SubjectKey: key, Decision: ctxtype.Included, Section: section, Rule: "request"}
		kept := !req.Ablation.Leaves(ctxtype.SubjectRequest, "", key)
		if !kept {
			r.Decision, r.Reason, r.Detail = ctxtype.Excluded, ctxtype.ReasonAblated, ablatedDetail(req)
		}
		return p.addRecord(r), kept
	}
	doc := p.doc
	if t := req.Task; t != nil {
		p.taskParts(t, part)
	}
	if len(req.AcceptanceCriteria) > 0 {
		if ref, ok := part("criteria", "Acceptance Criteria"); ok {
			for _, c := range req.AcceptanceCriteria {
				doc.Criteria = append(doc.Criteria, render.Criterion(c))
			}
			doc.CriteriaRef = ref
		}
	}
	if pl := req.Plan; pl != nil {
		if ref, ok := part("plan", "Plan Pointer"); ok {
			doc.Plan = &render.Plan{PlanHash: pl.PlanHash, ActiveStepIndex: pl.ActiveStepIndex, TotalSteps: pl.TotalSteps, SettledDecisions: pl.SettledDecisions}
			doc.PlanRef = ref
		}
	}
	for i, h := range p.in.Predecessors {
		if req.Ablation.Leaves(ctxtype.SubjectHandoff, "", h.ID) {
			p.addRecord(ctxtype.Record{SubjectKind: ctxtype.SubjectHandoff, SubjectKey: h.ID, Decision: ctxtype.Excluded, Section: "Predecessor Outputs",
				Rule: "predecessor", Reason: ctxtype.ReasonAblated, Detail: ablatedDetail(req)})
			continue
		}
		ref := p.addRecord(ctxtype.Record{SubjectKind: ctxtype.SubjectHandoff, SubjectKey: h.ID, Decision: ctxtype.Included, Section: "Predecessor Outputs", Rule: "predecessor", Position: i})
		doc.Predecessors = append(doc.Predecessors, render.Predecessor{
			Ref: ref, ID: h.ID, SourceRole: h.SourceRole, TargetRole: h.TargetRole, Status: h.Status, StepID: h.StepID,
			AttemptID: h.AttemptID, Summary: h.Summary, Decisions: h.Decisions, Artifacts: h.Artifacts, Verdicts: h.Verdicts,
			WitnessExitCode: h.WitnessExitCode, WitnessPassed: h.WitnessPassed,
			Reason: h.Reason, ReasonBy: h.ReasonBy, ReasonByRole: h.ReasonByRole, BaseCommit: h.BaseCommit,
			CandidateTreeHash: h.CandidateTreeHash, Patches: h.Patches, Reports: h.Reports, OpenQuestions: h.OpenQuestions,
			NextStep: h.NextStep, SettledAt: h.SettledAt, Withdrawn: h.Withdrawn,
		})
	}
	if req.AgentContext != nil {
		if ref, ok := part("agent_context", render.CurrentState); ok {
			doc.AgentContext = req.AgentContext
			doc.AgentContextRef = ref
		}
	}
}

// taskParts gives the document the task and its objective. An ablation
// that leaves out the task leaves out its objective with it (one block);
// one that leaves out the objective keeps the task's line.
func (p *pipeline) taskParts(t *ctxtype.Task, part func(key, section string) (int, bool)) {
	ref, ok := part("task", "Task")
	if !ok {
		if t.Objective != "" {
			p.addRecord(ctxtype.Record{SubjectKind: ctxtype.SubjectRequest, SubjectKey: "objective", Decision: ctxtype.Excluded, Section: "Objective",
				Rule: "request", Reason: ctxtype.ReasonAblated, Detail: ablatedDetail(p.req)})
		}
		return
	}
	doc := p.doc
	doc.Task = &render.Task{TaskID: t.TaskID, StepID: t.StepID, StepAttempt: t.StepAttempt, Objective: t.Objective,
		AllowedOutcomes: t.AllowedOutcomes, PermissionCeiling: t.PermissionCeiling}
	doc.TaskRef = ref
	if doc.ObjectiveRef, ok = part("objective", "Objective"); !ok {
		doc.Task.Objective = ""
	}
}

// itemRecords is the second records stage: the ranked items, provisionally
// included with their rank and section, then the contradiction losers,
// then everything left out earlier, by reason, key and project. The order
// is fixed here, before the budget, so record indexes never move.
func (p *pipeline) itemRecords() {
	for i, c := range p.ranked {
		r := itemRecord(c, ctxtype.Included, "", "", false)
		r.Rank = i + 1
		c.section = sectionOf(c.v)
		r.Section = c.section
		c.ref = p.addRecord(r)
	}
	for _, c := range p.losers {
		w := c.loserOf
		c.ref = p.addRecord(itemRecord(c, ctxtype.Excluded, ctxtype.ReasonContradicted,
			fmt.Sprintf("contradicted by %s v%d on state_key %q (%s/%s/priority %d over %s/%s/priority %d)",
				w.v.Key, w.v.Version, c.v.StateKey, w.v.Authority, w.v.Confidence, w.v.Priority, c.v.Authority, c.v.Confidence, c.v.Priority), false))
	}
	slices.SortStableFunc(p.excluded, func(a, b ctxtype.Record) int {
		return cmp.Or(cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.SubjectKey, b.SubjectKey), cmp.Compare(a.SubjectProject, b.SubjectProject))
	})
	for _, r := range p.excluded {
		p.addRecord(r)
	}
}

// sectionOf places an item: slot first, then kind, then layer.
func sectionOf(v *ctxtype.Version) string {
	switch {
	case v.Slot == "tools":
		return render.Tools
	case v.Slot == "messages":
		return render.Messages
	case v.Kind == "skill":
		return render.ActiveSkills
	case v.Kind == "state":
		return render.CurrentState
	case v.Project == ctxtype.SharedProject:
		return render.SharedDefaults
	}
	return render.ProjectKnowledge
}
