package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/kxm"
)

// The kxm format is KXM's formal context packet v2 (kontextmind/kxm,
// schemas/context-packet.schema.json and plugins/kxm/src/context-packet.ts):
// one canonical JSON document (keys sorted at every level, no whitespace,
// no HTML escaping, no trailing newline). Every member KXM requires is
// always written; where the request lacks one, the default below stands
// in, and every string is cut to the schema's maxLength (in code points),
// so the document is always valid against the schema.
const (
	// KXMSchema is the schema member of the document.
	KXMSchema = "kxm.context-packet.v2"
	// KXMUnspecified stands in for a required identifier or text the
	// request lacks: task.taskId, task.stepId, task.objective,
	// plan.planHash, a predecessor's stepId and role.
	KXMUnspecified = "unspecified"
	// KXMUnassignedID is the packetId of a Doc with none (a Doc made by
	// hand; every stored packet has its id).
	KXMUnassignedID = "ctxpkt_unassigned"
	// KXMAgentContextID is the id (and stateKey) of the currentState item
	// that carries the host's state.
	KXMAgentContextID = "agent_context"
)

// kxmArtifactKinds are KXM's artifact kinds; any other kind is "doc".
var kxmArtifactKinds = map[string]bool{"patch": true, "report": true, "log": true, "plan": true, "repro_script": true, "doc": true}

// kxmPredecessorStatus maps a handoff's status to KXM's. A withdrawn
// handoff (status withdrawn, or stored before it had a status of its own as
// superseded with no successor) is "failed": its source retracted the
// output, which nothing should build on.
func kxmPredecessorStatus(p Predecessor) string {
	switch {
	case p.Status == "accepted":
		return "passed"
	case p.Status == "rejected", p.Status == "withdrawn", p.Status == "superseded" && p.Withdrawn:
		return "failed"
	case p.Status == "superseded":
		return "settled"
	}
	return "warning" // pending, or a status KXM has no word for
}

// kxmCut is s cut at n code points (the schema's maxLength).
func kxmCut(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// kxmOr is s cut at n, or KXMUnspecified when s is blank.
func kxmOr(s string, n int) string {
	if strings.TrimSpace(s) == "" {
		return KXMUnspecified
	}
	return kxmCut(s, n)
}

func kxmTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// kxmJSON is v as canonical JSON: its object keys sorted at every level
// (a struct is respelled as a map first), no HTML escaping.
func kxmJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	dec := json.NewDecoder(&b)
	dec.UseNumber()
	var generic any
	_ = dec.Decode(&generic)
	return canonicalJSON(generic)
}

// kxmSummary is an entry's text as a KXM summary: "title: content" when
// it has a title, as the markdown block shows it.
func kxmSummary(e Entry) string {
	s := e.Content
	if t := oneLine(e.Title); t != "" {
		s = t + ": " + s
	}
	if strings.TrimSpace(s) == "" {
		return e.Key
	}
	return s
}

// kxmItem is an entry as KXM's ContextItem: kxm.Export of its version
// (kind, provenance, authority capped at KXM's grant floor), with the
// entry's text (templated, titled) as the summary, cut at KXM's limit.
// A state item without a state key gets its key as one, as KXM requires.
func kxmItem(e Entry, project string) kxm.ContextItem {
	var it kxm.ContextItem
	if e.V != nil {
		it = kxm.Export(e.V)
	} else {
		it = kxm.ContextItem{ID: e.Key, Kind: "knowledge", Project: project,
			Provenance: kxm.Provenance{SourceType: kxm.SourceType(e.Source)}, Status: "current"}
	}
	it.Summary = kxmCut(kxmSummary(e), kxm.MaxSummary)
	if it.Authority == "" {
		it.Authority = "evidence"
	}
	if it.Confidence == "" {
		it.Confidence = "probable"
	}
	if it.Kind == "state" && it.StateKey == "" {
		it.StateKey = e.Key
	}
	return it
}

// The environment arrays an entry can go to.
const (
	kxmShared    = "sharedDefaults"
	kxmKnowledge = "projectKnowledge"
	kxmState     = "currentState"
	kxmSkills    = "activeSkills"
)

// kxmSlot is where KXM's builder puts an entry: a _shared item among the
// shared defaults, then by KXM kind (state and episode are current state,
// skill, a tool included, an active skill, the rest project knowledge).
func kxmSlot(e Entry, section string) string {
	kind := "knowledge"
	switch {
	case e.V != nil && e.V.Project == ctxtype.SharedProject, e.V == nil && section == SharedDefaults:
		return kxmShared
	case e.V != nil:
		kind = kxm.Kind(e.V.Kind)
	case section == CurrentState:
		kind = "state"
	case section == ActiveSkills || section == Tools:
		kind = "skill"
	}
	switch kind {
	case "state", "episode":
		return kxmState
	case "skill":
		return kxmSkills
	}
	return kxmKnowledge
}

// kxmEntry is an entry's element of its environment array: {id, summary}
// among the shared defaults, a ContextItem elsewhere.
func kxmEntry(e Entry, section, project string) string {
	if kxmSlot(e, section) == kxmShared {
		return canonicalJSON(map[string]any{"id": e.Key, "summary": kxmSummary(e)})
	}
	return kxmJSON(kxmItem(e, project))
}

// kxmContradiction is a contradiction pair as KXM's contradictions hold
// it: the dropped item as a ContextItem of status rejected, its summary
// saying which item won the state key.
func kxmContradiction(c Contradiction, project string) string {
	it := kxmItem(c.Dropped, project)
	it.Summary = kxmCut(fmt.Sprintf("state %q: kept %s v%d (%s) over %s v%d (%s)", c.StateKey,
		c.Kept.Key, c.Kept.Version, c.KeptAuthority, c.Dropped.Key, c.Dropped.Version, c.DroppedAuthority), kxm.MaxSummary)
	if c.Facts {
		it.Summary = kxmCut(strings.TrimSuffix(strings.TrimPrefix(markdownContradiction(c), "- ⚠️ "), "\n"), kxm.MaxSummary)
	}
	it.Status, it.StateKey = "rejected", c.StateKey
	return kxmJSON(it)
}

// kxmAgentContext is the host's state as a currentState item: a state
// reported by the host's tools, evidence of probable confidence.
func kxmAgentContext(d *Doc) string {
	return kxmJSON(kxm.ContextItem{ID: KXMAgentContextID, Kind: "state", Project: d.Project,
		Summary:    kxmCut(AgentContextText(d.AgentContext), kxm.MaxSummary),
		Provenance: kxm.Provenance{SourceType: "tool", SourceRef: "contextd:agent_context"},
		Authority:  "evidence", Confidence: "probable", StateKey: KXMAgentContextID, Status: "current"})
}

// renderKXM writes the document, members in sorted order; the parts of
// records are pieces of their own.
func renderKXM(w *writer, d *Doc) {
	w.add(Scaffold, "{")
	if len(d.Criteria) > 0 {
		w.add(d.CriteriaRef, "\"acceptanceCriteria\":"+kxmCriteria(d.Criteria))
	} else {
		w.add(Scaffold, "\"acceptanceCriteria\":[]")
	}
	w.add(Scaffold, ",\"budget\":"+kxmBudget(d)+",\"environment\":{")
	kxmEnvironment(w, d)
	w.add(Scaffold, "},\"generatedAt\":"+jsonString(kxmTime(d.GeneratedAt))+",\"packetId\":"+jsonString(kxmPacketID(d))+",")
	if d.planText() != "" {
		w.add(d.PlanRef, "\"plan\":"+kxmPlan(d.Plan))
	} else {
		w.add(Scaffold, "\"plan\":"+kxmPlan(&Plan{}))
	}
	w.add(Scaffold, ",\"predecessors\":[")
	for i, p := range d.Predecessors {
		if i > 0 {
			w.add(Scaffold, ",")
		}
		w.add(p.Ref, kxmPredecessor(p, d.GeneratedAt))
	}
	w.add(Scaffold, "],\"project\":"+jsonString(kxmCut(d.Project, 128))+",\"schema\":"+jsonString(KXMSchema)+
		",\"targetRole\":"+jsonString(kxmOr(d.TargetRole, 64))+",")
	if d.Task != nil {
		// KXM's objective is a member of its task, so the task's record
		// holds it; the objective has no record of its own here.
		w.add(d.TaskRef, "\"task\":"+kxmTask(d.Task))
	} else {
		w.add(Scaffold, "\"task\":"+kxmTask(&Task{}))
	}
	w.add(Scaffold, "}")
}

func kxmPacketID(d *Doc) string {
	if d.PacketID == "" {
		return KXMUnassignedID
	}
	return kxmCut(d.PacketID, 128)
}

// kxmEnvironment writes the environment's arrays in sorted order: each
// entry, contradiction pair and the host's state a piece of its record.
func kxmEnvironment(w *writer, d *Doc) {
	slots := map[string][]Entry{}
	sections := map[string][]string{}
	for _, sec := range SectionOrder {
		for _, e := range d.Sections[sec] {
			s := kxmSlot(e, sec)
			slots[s] = append(slots[s], e)
			sections[s] = append(sections[s], sec)
		}
	}
	array := func(name string, lead bool, extra func(n int) int) {
		if lead {
			w.add(Scaffold, ",")
		}
		w.add(Scaffold, jsonString(name)+":[")
		n := extra(0)
		for i, e := range slots[name] {
			if n > 0 {
				w.add(Scaffold, ",")
			}
			w.add(e.Ref, kxmEntry(e, sections[name][i], d.Project))
			n++
		}
		w.add(Scaffold, "]")
	}
	none := func(n int) int { return n }
	array(kxmSkills, false, none)
	w.add(Scaffold, ",\"contradictions\":[")
	for i, c := range d.Contradictions {
		if i > 0 {
			w.add(Scaffold, ",")
		}
		w.add(c.Ref, kxmContradiction(c, d.Project))
	}
	w.add(Scaffold, "]")
	array(kxmState, true, func(n int) int {
		if d.AgentContext == nil {
			return n
		}
		w.add(d.AgentContextRef, kxmAgentContext(d))
		return n + 1
	})
	array(kxmKnowledge, true, none)
	array(kxmShared, true, none)
}

// kxmBudget is the budget member: the allocation, the tokens used, the
// included entries counted by KXM kind, and the gaps.
func kxmBudget(d *Doc) string {
	prov := map[string]any{}
	for _, sec := range SectionOrder {
		for _, e := range d.Sections[sec] {
			k := kxmItem(e, d.Project).Kind
			n, _ := prov[k].(int)
			prov[k] = n + 1
		}
	}
	gaps := d.Gaps
	if gaps == nil {
		gaps = []string{}
	}
	return "{\"allocatedTokens\":" + strconv.Itoa(max(1, d.Allocated)) + ",\"estimatedTokens\":" + strconv.Itoa(max(0, d.Used)) +
		",\"provenanceSummary\":" + canonicalJSON(prov) + ",\"unresolvedGaps\":" + canonicalJSON(gaps) + "}"
}

func kxmCriteria(cs []Criterion) string {
	out := make([]any, len(cs))
	for i, c := range cs {
		kind := c.VerificationKind
		if kind != "gate" && kind != "witness" && kind != "critic" {
			kind = "human"
		}
		desc := c.Description
		if strings.TrimSpace(desc) == "" {
			desc = c.ID
		}
		m := map[string]any{"id": kxmOr(c.ID, 64), "description": kxmOr(desc, 1000), "verificationKind": kind, "required": c.Required}
		if c.TargetRef != "" {
			m["targetRef"] = kxmCut(c.TargetRef, 256)
		}
		out[i] = m
	}
	return canonicalJSON(out)
}

// kxmPlan is the plan pointer: totalSteps at least 1 and past the active
// step, a missing hash unspecified.
func kxmPlan(p *Plan) string {
	active := max(0, p.ActiveStepIndex)
	return canonicalJSON(map[string]any{"planHash": kxmOr(p.PlanHash, 128), "activeStepIndex": active,
		"totalSteps": max(1, p.TotalSteps, active+1), "settledDecisions": kxmCutAll(p.SettledDecisions, 500)})
}

// kxmTask is the task: a missing attempt is 1, a missing permission
// ceiling read-only (the least), empty outcomes dropped.
func kxmTask(t *Task) string {
	outcomes := []string{}
	for _, o := range t.AllowedOutcomes {
		if strings.TrimSpace(o) != "" {
			outcomes = append(outcomes, kxmCut(o, 64))
		}
	}
	ceiling := t.PermissionCeiling
	if ceiling != "edit" && ceiling != "admin" {
		ceiling = "read-only"
	}
	return canonicalJSON(map[string]any{"taskId": kxmOr(t.TaskID, 128), "stepId": kxmOr(t.StepID, 64),
		"stepAttempt": max(1, t.StepAttempt), "objective": kxmOr(t.Objective, 4000),
		"allowedOutcomes": outcomes, "permissionCeiling": ceiling})
}

func kxmCutAll(ss []string, n int) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = kxmCut(s, n)
	}
	return out
}

// kxmPredecessor is a predecessor handoff: its source's step and role,
// the mapped status, the summary (with the reason of a rejection or
// withdrawal), when it settled (the packet's time while pending, or for a
// packet stored before handoffs carried it), its artifacts, patches and
// reports as artifacts, and its decisions.
func kxmPredecessor(p Predecessor, generated time.Time) string {
	summary := p.Summary
	if loop := PredecessorLoop(p); loop != "" {
		// KXM's predecessor has no member for the handoff loop: the summary
		// carries it, as the markdown format writes it.
		summary = strings.TrimRight(summary, "\n") + "\n\n" + strings.TrimRight(loop, "\n")
	}
	settled := generated
	if p.SettledAt != nil {
		settled = *p.SettledAt
	}
	arts := []any{}
	for _, a := range p.Artifacts {
		kind := a.Kind
		if !kxmArtifactKinds[kind] {
			kind = "doc"
		}
		m := map[string]any{"name": kxmCut(a.Name, 256), "kind": kind, "artifactRef": kxmCut(a.Ref, 256)}
		if a.Snippet != "" {
			m["contentSnippet"] = kxmCut(a.Snippet, 8000)
		}
		arts = append(arts, m)
	}
	for kind, refs := range [][]string{p.Patches, p.Reports} {
		for _, r := range refs {
			arts = append(arts, map[string]any{"name": kxmCut(r, 256), "kind": []string{"patch", "report"}[kind], "artifactRef": kxmCut(r, 256)})
		}
	}
	return canonicalJSON(map[string]any{"stepId": kxmOr(p.StepID, 64), "role": kxmOr(p.SourceRole, 64),
		"status": kxmPredecessorStatus(p), "summary": kxmCut(summary, 4000), "settledAt": kxmTime(settled),
		"artifacts": arts, "decisions": kxmCutAll(p.Decisions, 500)})
}
