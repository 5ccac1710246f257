package render

import (
	"fmt"
	"strings"
)

// MarkdownItemBlock is an item's block in markdown: "- ", then "title: "
// when it has a title, then its content with continuation lines indented
// two spaces. Item writes count its tokens once and store them.
func MarkdownItemBlock(title, content string) string {
	return strings.Join(MarkdownItemBlockPieces(title, content), "")
}

// MarkdownItemBlockPieces is MarkdownItemBlock cut into pieces: the lead
// ("- " and the title), then each line of the content, the separators
// between them ("\n" or "\n  "), and the final "\n". Lines are at the odd
// indices 1, 3, …, and are substrings of content, so a writer counts each
// line once and adds the pieces up (token.CountPieces) for both the content
// and the block.
func MarkdownItemBlockPieces(title, content string) []string {
	lead := "- "
	if t := oneLine(title); t != "" {
		lead += t + ": "
	}
	ls := lines(content)
	pieces := make([]string, 0, 2*len(ls)+1)
	pieces = append(pieces, lead)
	for i, line := range ls {
		if i > 0 {
			sep := "\n"
			if line != "" {
				sep = "\n  "
			}
			pieces = append(pieces, sep)
		}
		pieces = append(pieces, line)
	}
	return append(pieces, "\n")
}

// markdownHeading is what a section adds before its first entry.
func markdownHeading(section string, envStarted bool) string {
	var b strings.Builder
	if IsEnv(section) {
		if !envStarted {
			b.WriteString("\n## 5. Environment & Memory\n")
		}
		b.WriteString("\n### " + section + "\n")
		return b.String()
	}
	switch section {
	case Tools:
		return "\n## 6. Tools\n"
	case Messages:
		return "\n## 7. Messages\n"
	}
	return "\n## " + section + "\n"
}

func markdownContradiction(c Contradiction) string {
	if c.Facts {
		return fmt.Sprintf("- ⚠️ state %q: kept: %s (%s) over %s (%s) [`%s` v%d over `%s` v%d]\n",
			c.StateKey, fact(c.Kept.Content), c.KeptAuthority, fact(c.Dropped.Content), c.DroppedAuthority,
			c.Kept.Key, c.Kept.Version, c.Dropped.Key, c.Dropped.Version)
	}
	return fmt.Sprintf("- ⚠️ state %q: kept `%s` v%d (%s) over `%s` v%d (%s)\n",
		c.StateKey, c.Kept.Key, c.Kept.Version, c.KeptAuthority, c.Dropped.Key, c.Dropped.Version, c.DroppedAuthority)
}

// FactChars is how much of a fact a contradiction line quotes.
const FactChars = 120

// fact is a fact as a contradiction line quotes it: on one line (white
// space runs as one space), cut at FactChars characters with "…" after
// a cut, as a JSON string.
func fact(content string) string {
	s := strings.Join(strings.Fields(content), " ")
	if n := 0; len(s) > FactChars {
		for i := range s {
			if n == FactChars {
				s = s[:i] + "…"
				break
			}
			n++
		}
	}
	return jsonString(s)
}

func renderMarkdown(w *writer, d *Doc) {
	w.add(Scaffold, "# Context Packet\n")
	w.add(Scaffold, "Project: "+d.Project+" | Role: "+oneLine(d.TargetRole)+"\n")
	if d.Task != nil {
		w.add(d.TaskRef, d.taskLine())
		if strings.TrimSpace(d.Task.Objective) != "" {
			w.add(Scaffold, "\n## 1. Objective\n")
			w.add(d.ObjectiveRef, indentBody(d.Task.Objective))
		}
	}
	if len(d.Criteria) > 0 {
		w.add(Scaffold, "\n## 2. Acceptance Criteria\n")
		w.add(d.CriteriaRef, d.criteriaText())
	}
	if plan := d.planText(); plan != "" {
		w.add(Scaffold, "\n## 3. Plan Pointer\n")
		w.add(d.PlanRef, plan)
	}
	if len(d.Predecessors) > 0 {
		w.add(Scaffold, "\n## 4. Predecessor Outputs\n")
		for _, p := range d.Predecessors {
			w.add(p.Ref, predecessorText(p))
		}
	}
	envStarted := false
	for _, sec := range SectionOrder {
		entries := d.Sections[sec]
		hasCtx := sec == CurrentState && d.AgentContext != nil
		hasContra := sec == ActiveContradictions && len(d.Contradictions) > 0
		if len(entries) == 0 && !hasCtx && !hasContra {
			continue
		}
		w.add(Scaffold, markdownHeading(sec, envStarted))
		if IsEnv(sec) {
			envStarted = true
		}
		if hasCtx {
			w.add(d.AgentContextRef, AgentContextText(d.AgentContext))
		}
		if hasContra {
			for _, c := range d.Contradictions {
				w.add(c.Ref, markdownContradiction(c))
			}
		}
		for _, e := range entries {
			w.add(e.Ref, MarkdownItemBlock(e.Title, e.Content))
		}
	}
}
