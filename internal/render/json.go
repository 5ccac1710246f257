package render

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// JSONString is s as a JSON string, without HTML escaping ("R&D" stays
// readable in rules and in the json format).
func JSONString(s string) string { return jsonString(s) }

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// canonicalJSON encodes v with sorted keys and no HTML escaping.
func canonicalJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(canonicalize(v))
	return strings.TrimSuffix(b.String(), "\n")
}

// canonicalize rewrites numbers canonically (maps already encode sorted).
func canonicalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, el := range x {
			out[k] = canonicalize(el)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = canonicalize(el)
		}
		return out
	case json.Number:
		return json.Number(CanonicalNumber(x))
	}
	return v
}

func predecessorJSON(p Predecessor) map[string]any {
	arts := make([]any, len(p.Artifacts))
	for i, a := range p.Artifacts {
		arts[i] = map[string]any{"name": a.Name, "kind": a.Kind, "artifact_ref": a.Ref, "content_snippet": a.Snippet}
	}
	verdicts := make([]any, len(p.Verdicts))
	for i, v := range p.Verdicts {
		verdicts[i] = map[string]any{"critic": v.Critic, "verdict": v.Verdict, "summary": v.Summary}
	}
	decisions := p.Decisions
	if decisions == nil {
		decisions = []string{}
	}
	m := map[string]any{"handoff_id": p.ID, "source_role": p.SourceRole, "target_role": p.TargetRole, "status": p.Status,
		"step_id": p.StepID, "attempt_id": p.AttemptID, "summary": p.Summary, "decisions": decisions,
		"artifacts": arts, "critic_verdicts": verdicts}
	if p.WitnessExitCode != nil {
		m["witness_exit_code"] = *p.WitnessExitCode
	}
	if p.WitnessPassed != nil {
		m["witness_passed"] = *p.WitnessPassed
	}
	// Members of the handoff loop: only when set, so that a packet stored
	// before them replays to the same bytes.
	for k, v := range map[string]string{"reason": p.Reason, "reason_by": p.ReasonBy, "reason_by_role": p.ReasonByRole,
		"base_commit": p.BaseCommit, "candidate_tree_hash": p.CandidateTreeHash} {
		if v != "" {
			m[k] = v
		}
	}
	for k, v := range map[string][]string{"patches": p.Patches, "reports": p.Reports, "open_questions": p.OpenQuestions} {
		if len(v) > 0 {
			m[k] = v
		}
	}
	if n := p.NextStep; n != nil && (n.StepID != "" || n.Action != "") {
		m["suggested_next_step"] = map[string]any{"step_id": n.StepID, "action": n.Action}
	}
	return m
}

// jsonEntry and jsonContradiction write objects with sorted keys, like
// every object of the json format.
func jsonEntry(e Entry) string {
	return "{\"content\":" + jsonString(e.Content) + ",\"key\":" + jsonString(e.Key) +
		",\"priority\":" + strconv.Itoa(e.Priority) + ",\"source\":" + jsonString(e.Source) +
		",\"title\":" + jsonString(e.Title) + ",\"version\":" + strconv.Itoa(e.Version) + "}"
}

func jsonContradiction(c Contradiction) string {
	dropped, kept := "", ""
	if c.Facts {
		// Render version 2 on: the facts too, quoted as the line quotes them.
		dropped, kept = ",\"content\":"+fact(c.Dropped.Content), ",\"content\":"+fact(c.Kept.Content)
	}
	return "{\"dropped\":{\"authority\":" + jsonString(c.DroppedAuthority) + dropped + ",\"key\":" + jsonString(c.Dropped.Key) + ",\"version\":" + strconv.Itoa(c.Dropped.Version) + "}" +
		",\"kept\":{\"authority\":" + jsonString(c.KeptAuthority) + kept + ",\"key\":" + jsonString(c.Kept.Key) + ",\"version\":" + strconv.Itoa(c.Kept.Version) + "}" +
		",\"state_key\":" + jsonString(c.StateKey) + "}"
}

// renderJSON writes one object: the packet's identity, the request parts
// as fields, then the item sections as an array.
func renderJSON(w *writer, d *Doc) {
	w.add(Scaffold, "{\"schema\":\"contextd.packet.v1\",\"project\":"+jsonString(d.Project)+",\"target_role\":"+jsonString(d.TargetRole))
	jsonRequestParts(w, d)
	jsonSections(w, d)
}

// jsonRequestParts writes the task, objective, criteria, plan,
// predecessors and host state, each a field of its own record.
func jsonRequestParts(w *writer, d *Doc) {
	field := func(ref int, name, value string) {
		w.add(Scaffold, "\n,")
		w.add(ref, jsonString(name)+":"+value)
	}
	if d.Task != nil {
		t := d.Task
		outcomes := t.AllowedOutcomes
		if outcomes == nil {
			outcomes = []string{}
		}
		field(d.TaskRef, "task", canonicalJSON(map[string]any{
			"task_id": t.TaskID, "step_id": t.StepID, "step_attempt": t.StepAttempt,
			"allowed_outcomes": outcomes, "permission_ceiling": t.PermissionCeiling,
		}))
		if strings.TrimSpace(t.Objective) != "" {
			field(d.ObjectiveRef, "objective", jsonString(t.Objective))
		}
	}
	if len(d.Criteria) > 0 {
		cs := make([]any, len(d.Criteria))
		for i, c := range d.Criteria {
			cs[i] = map[string]any{"id": c.ID, "description": c.Description, "verification_kind": c.VerificationKind, "target_ref": c.TargetRef, "required": c.Required}
		}
		field(d.CriteriaRef, "acceptance_criteria", canonicalJSON(cs))
	}
	if d.planText() != "" {
		p := d.Plan
		sd := p.SettledDecisions
		if sd == nil {
			sd = []string{}
		}
		field(d.PlanRef, "plan", canonicalJSON(map[string]any{
			"plan_hash": p.PlanHash, "active_step_index": p.ActiveStepIndex, "total_steps": p.TotalSteps, "settled_decisions": sd,
		}))
	}
	if len(d.Predecessors) > 0 {
		w.add(Scaffold, "\n,\"predecessors\":[")
		for i, p := range d.Predecessors {
			if i > 0 {
				w.add(Scaffold, ",")
			}
			w.add(Scaffold, "\n")
			w.add(p.Ref, canonicalJSON(predecessorJSON(p)))
		}
		w.add(Scaffold, "\n]")
	}
	if d.AgentContext != nil {
		field(d.AgentContextRef, "agent_context", canonicalJSON(d.AgentContext))
	}
}

// jsonSections writes the item sections in packet order, the
// contradiction lines as the entries of Active Contradictions.
func jsonSections(w *writer, d *Doc) {
	w.add(Scaffold, "\n,\"sections\":[")
	first := true
	for _, sec := range SectionOrder {
		entries := d.Sections[sec]
		hasContra := sec == ActiveContradictions && len(d.Contradictions) > 0
		if len(entries) == 0 && !hasContra {
			continue
		}
		sep := "\n,"
		if first {
			sep = "\n"
		}
		first = false
		w.add(Scaffold, sep+"{\"name\":"+jsonString(sec)+",\"entries\":[\n")
		n := 0
		if hasContra {
			for _, c := range d.Contradictions {
				if n > 0 {
					w.add(Scaffold, ",")
				}
				w.add(c.Ref, jsonContradiction(c))
				w.add(Scaffold, "\n")
				n++
			}
		}
		for _, e := range entries {
			if n > 0 {
				w.add(Scaffold, ",")
			}
			w.add(e.Ref, jsonEntry(e))
			w.add(Scaffold, "\n")
			n++
		}
		w.add(Scaffold, "]}")
	}
	w.add(Scaffold, "\n]}\n")
}
