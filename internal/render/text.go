package render

import (
	"fmt"
	"strings"
)

func lines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.TrimRight(s, "\n")
	return strings.Split(s, "\n")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (d *Doc) taskLine() string {
	t := d.Task
	var parts []string
	if t.TaskID != "" {
		parts = append(parts, "Task: "+oneLine(t.TaskID))
	}
	if t.StepID != "" {
		parts = append(parts, fmt.Sprintf("Step: %s (attempt %d)", oneLine(t.StepID), t.StepAttempt))
	}
	if t.PermissionCeiling != "" {
		parts = append(parts, "Permission: "+t.PermissionCeiling)
	}
	if len(t.AllowedOutcomes) > 0 {
		parts = append(parts, "Allowed outcomes: "+oneLine(strings.Join(t.AllowedOutcomes, ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, " | ") + "\n"
}

func (d *Doc) criteriaText() string {
	var b strings.Builder
	for _, c := range d.Criteria {
		b.WriteString("- [ ] **" + oneLine(c.ID) + "** (" + c.VerificationKind)
		if c.Required {
			b.WriteString(", required")
		}
		b.WriteString("): " + oneLine(c.Description))
		if c.TargetRef != "" {
			b.WriteString(" [" + oneLine(c.TargetRef) + "]")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// planText is the plan pointer's lines; only what the request gave is
// shown, and an empty plan shows nothing.
func (d *Doc) planText() string {
	p := d.Plan
	if p == nil {
		return ""
	}
	var b strings.Builder
	var head []string
	if h := oneLine(p.PlanHash); h != "" {
		head = append(head, "Plan Hash: `"+h+"`")
	}
	if p.TotalSteps > 0 {
		head = append(head, fmt.Sprintf("Step %d of %d", p.ActiveStepIndex+1, p.TotalSteps))
	}
	if len(head) > 0 {
		b.WriteString(strings.Join(head, " | ") + "\n")
	}
	if len(p.SettledDecisions) > 0 {
		b.WriteString("Settled Decisions:\n")
		for _, s := range p.SettledDecisions {
			b.WriteString("  - " + oneLine(s) + "\n")
		}
	}
	return b.String()
}

// predecessorText is a predecessor's block, after KXM's layout.
func predecessorText(p Predecessor) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Predecessor: %s → %s, %s (%s)\n", oneLine(p.SourceRole), oneLine(p.TargetRole), p.ID, p.Status)
	predecessorOutcome(&b, p)
	if p.StepID != "" {
		b.WriteString("Step: " + oneLine(p.StepID))
		if p.AttemptID != "" {
			b.WriteString(" (attempt " + oneLine(p.AttemptID) + ")")
		}
		b.WriteByte('\n')
	}
	if strings.TrimSpace(p.Summary) != "" {
		b.WriteString(indentBody(p.Summary))
	}
	if len(p.Decisions) > 0 {
		b.WriteString("Decisions:\n")
		for _, d := range p.Decisions {
			b.WriteString("  - " + oneLine(d) + "\n")
		}
	}
	for _, list := range []struct {
		title string
		items []string
	}{{"Patches", p.Patches}, {"Reports", p.Reports}} {
		if len(list.items) > 0 {
			b.WriteString(list.title + ":\n")
			for _, it := range list.items {
				b.WriteString("  - " + oneLine(it) + "\n")
			}
		}
	}
	if len(p.Artifacts) > 0 {
		b.WriteString("Artifacts:\n")
		for _, a := range p.Artifacts {
			b.WriteString("  - `" + oneLine(a.Name) + "`")
			if a.Kind != "" {
				b.WriteString(" [" + oneLine(a.Kind) + "]")
			}
			if a.Ref != "" {
				b.WriteString(" (" + oneLine(a.Ref) + ")")
			}
			b.WriteByte('\n')
			if strings.TrimSpace(a.Snippet) != "" {
				fence := fenceFor(a.Snippet)
				b.WriteString("    " + fence + "\n")
				for _, line := range lines(strings.TrimSpace(a.Snippet)) {
					b.WriteString("    " + line + "\n")
				}
				b.WriteString("    " + fence + "\n")
			}
		}
	}
	predecessorEvidence(&b, p)
	predecessorNext(&b, p)
	return b.String()
}

// PredecessorLoop is what the handoff loop adds to a predecessor's summary
// where a format has no member of its own for it (kxm): who gave the
// reason of a rejection or withdrawal and what it was, the base commit and
// candidate tree, the verdicts and witness, the open questions and the
// suggested next step, as the markdown format writes them.
func PredecessorLoop(p Predecessor) string {
	var b strings.Builder
	predecessorOutcome(&b, p)
	predecessorEvidence(&b, p)
	predecessorNext(&b, p)
	return b.String()
}

// predecessorEvidence writes a predecessor's verdicts and witness.
func predecessorEvidence(b *strings.Builder, p Predecessor) {
	if len(p.Verdicts) > 0 {
		b.WriteString("Verdicts:\n")
		for _, v := range p.Verdicts {
			b.WriteString("  - " + oneLine(v.Critic) + ": " + v.Verdict)
			if v.Summary != "" {
				b.WriteString(" — " + oneLine(v.Summary))
			}
			b.WriteByte('\n')
		}
	}
	if p.WitnessExitCode != nil || p.WitnessPassed != nil {
		b.WriteString("Witness:")
		if p.WitnessExitCode != nil {
			fmt.Fprintf(b, " exit %d", *p.WitnessExitCode)
		}
		if p.WitnessPassed != nil {
			if *p.WitnessPassed {
				b.WriteString(" (passed)")
			} else {
				b.WriteString(" (failed)")
			}
		}
		b.WriteByte('\n')
	}
}

// predecessorOutcome writes why a predecessor ended as it did, and who
// said so, and the commit and tree it worked on.
func predecessorOutcome(b *strings.Builder, p Predecessor) {
	if p.Reason != "" {
		b.WriteString(capitalized(p.Status))
		if p.ReasonByRole != "" || p.ReasonBy != "" {
			b.WriteString(" by " + oneLine(p.ReasonByRole))
			if p.ReasonBy != "" {
				b.WriteString(" (" + oneLine(p.ReasonBy) + ")")
			}
		}
		b.WriteString(": " + oneLine(p.Reason) + "\n")
	}
	if p.BaseCommit != "" || p.CandidateTreeHash != "" {
		b.WriteString("Base commit: " + orNone(oneLine(p.BaseCommit)))
		if p.CandidateTreeHash != "" {
			b.WriteString("; candidate tree: " + oneLine(p.CandidateTreeHash))
		}
		b.WriteByte('\n')
	}
}

// predecessorNext writes what a predecessor left open and what it
// suggests doing next.
func predecessorNext(b *strings.Builder, p Predecessor) {
	if len(p.OpenQuestions) > 0 {
		b.WriteString("Open questions:\n")
		for _, q := range p.OpenQuestions {
			b.WriteString("  - " + oneLine(q) + "\n")
		}
	}
	if n := p.NextStep; n != nil && (n.StepID != "" || n.Action != "") {
		b.WriteString("Suggested next step:")
		if n.StepID != "" {
			b.WriteString(" " + oneLine(n.StepID))
			if n.Action != "" {
				b.WriteString(" —")
			}
		}
		if n.Action != "" {
			b.WriteString(" " + oneLine(n.Action))
		}
		b.WriteByte('\n')
	}
}

// capitalized is s with its first letter upper-case ("rejected" → "Rejected").
func capitalized(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// fenceFor returns a code fence longer than any run of backticks in s, so
// a snippet that holds a fence of its own cannot close ours (CommonMark).
func fenceFor(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

func indentBody(s string) string {
	var b strings.Builder
	for i, line := range lines(s) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	b.WriteByte('\n')
	return b.String()
}
