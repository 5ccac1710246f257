package render

import (
	"fmt"
	"strings"
)

func blocksHeader(source string, priority int, title string) string {
	if strings.TrimSpace(title) == "" {
		title = "untitled"
	}
	return fmt.Sprintf("- source: %s; priority: %d; title: %s\n", source, priority, oneLine(title))
}

func blocksEntry(e Entry) string {
	return blocksHeader(e.Source, e.Priority, e.Title) + strings.TrimSpace(e.Content) + "\n"
}

func blocksContradiction(c Contradiction) string {
	return blocksHeader("contextd", 0, "contradiction") + strings.TrimPrefix(markdownContradiction(c), "- ")
}

func renderBlocks(w *writer, d *Doc) {
	w.add(Scaffold, "=== External Context Packets ===\n")
	part := func(ref int, title, body string) {
		w.add(ref, blocksHeader("request", 0, title)+strings.TrimRight(body, "\n")+"\n")
		w.add(Scaffold, "\n")
	}
	if d.Task != nil {
		if tl := d.taskLine(); tl != "" {
			part(d.TaskRef, "task", tl)
		}
		if strings.TrimSpace(d.Task.Objective) != "" {
			part(d.ObjectiveRef, "objective", indentBody(d.Task.Objective))
		}
	}
	if len(d.Criteria) > 0 {
		part(d.CriteriaRef, "acceptance criteria", d.criteriaText())
	}
	if plan := d.planText(); plan != "" {
		part(d.PlanRef, "plan", plan)
	}
	for _, p := range d.Predecessors {
		w.add(p.Ref, blocksHeader("handoff", 0, "predecessor "+p.ID)+strings.TrimPrefix(predecessorText(p), "### "))
		w.add(Scaffold, "\n")
	}
	if d.AgentContext != nil {
		part(d.AgentContextRef, "agent context", AgentContextText(d.AgentContext))
	}
	for _, e := range d.Ranked {
		w.add(e.Ref, blocksEntry(e))
		w.add(Scaffold, "\n")
	}
	for _, c := range d.Contradictions {
		w.add(c.Ref, blocksContradiction(c))
		w.add(Scaffold, "\n")
	}
}
