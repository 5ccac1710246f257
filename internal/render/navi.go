package render

import (
	"sort"
	"strings"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/navi"
)

// The navi format is navi's render_context_packets block for the packet's
// entries, byte for byte (internal/navi writes its lines): the header, then
// every entry by descending priority — a stable sort over the rank order,
// so equal priorities keep contextd's order — with its source in navi's
// Debug form (CanvasNode, Other("rag")), "untitled" for no title, the title
// raw and the content trimmed as Rust trims. No entry, no block (navi's
// None). The request's own parts (task, objective, acceptance criteria,
// plan, predecessors, agent context) and the Active Contradictions lines
// come before the block, each a paragraph of its own followed by a blank
// line, so the block stays exactly what navi would render for the entries,
// and a request without them is navi's block alone.

// naviEntry is an entry's piece: navi's block for it without the blank
// line that ends it, which is scaffolding (as in blocks).
//
// An item imported from navi, or a context packet of the request, keeps
// navi's own spelling of its source and title in metadata.navi; the entry
// shows those (navi.FromItem), so an Other tag outside contextd's alphabet
// renders as navi had it.
func naviEntry(e Entry) string {
	var title *string
	if e.Title != "" {
		title = &e.Title
	}
	source := navi.DebugSource(e.Source)
	if e.V != nil {
		pk := navi.FromItem(e.Key, e.Source, e.Title, e.Content, e.Priority, e.V.Metadata)
		source, title = pk.Source.Debug(), pk.Title
	}
	b := navi.Block(source, int64(e.Priority), title, e.Content)
	return strings.TrimSuffix(b, "\n")
}

// naviContradictionsHeading is the line before the contradiction lines
// and, for the budget, the blank line after them.
const naviContradictionsHeading = "Active Contradictions:\n"

// naviHeading is what a section's first entry brings: only the Active
// Contradictions paragraph has a heading (and its closing blank line);
// navi's own header comes with the packet's first entry (FirstEntryCost).
func naviHeading(section string) string {
	if section == ActiveContradictions {
		return naviContradictionsHeading + "\n"
	}
	return ""
}

// FirstEntryCost returns the text the packet's first entry brings with it
// whatever its section, for budgeting: navi's header in the navi format,
// nothing in the others.
func FirstEntryCost(f ctxtype.Format) string {
	if f == ctxtype.Navi {
		return navi.Header
	}
	return ""
}

func renderNavi(w *writer, d *Doc) {
	para := func(label string, ref int, body string) {
		w.add(Scaffold, label)
		w.add(ref, strings.TrimRight(body, "\n")+"\n")
		w.add(Scaffold, "\n")
	}
	if d.Task != nil {
		if tl := d.taskLine(); tl != "" {
			para("", d.TaskRef, tl)
		}
		if strings.TrimSpace(d.Task.Objective) != "" {
			para("Objective:\n", d.ObjectiveRef, indentBody(d.Task.Objective))
		}
	}
	if len(d.Criteria) > 0 {
		para("Acceptance Criteria:\n", d.CriteriaRef, d.criteriaText())
	}
	if plan := d.planText(); plan != "" {
		para("Plan Pointer:\n", d.PlanRef, plan)
	}
	for _, p := range d.Predecessors {
		para("", p.Ref, strings.TrimPrefix(predecessorText(p), "### "))
	}
	if d.AgentContext != nil {
		para("Agent Context:\n", d.AgentContextRef, AgentContextText(d.AgentContext))
	}
	if len(d.Contradictions) > 0 {
		w.add(Scaffold, naviContradictionsHeading)
		for _, c := range d.Contradictions {
			w.add(c.Ref, markdownContradiction(c))
		}
		w.add(Scaffold, "\n")
	}
	if len(d.Ranked) == 0 {
		return
	}
	ordered := append([]Entry(nil), d.Ranked...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Priority > ordered[j].Priority })
	w.add(Scaffold, navi.Header)
	for _, e := range ordered {
		w.add(e.Ref, naviEntry(e))
		w.add(Scaffold, "\n")
	}
}
