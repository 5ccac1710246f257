// Package render turns an assembled packet into text: markdown (KXM's packet
// v2 layout), blocks (navi's "=== External Context Packets ===" block) or
// json. It is pure and deterministic: the same Doc gives the same bytes, and
// nothing random or time-dependent is ever written. Output is a list of
// pieces, each either scaffolding or the block of one record, so the caller
// can compute byte spans that cover the text exactly once.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Format is an output format.
type Format string

// The formats.
const (
	Markdown Format = "markdown"
	Blocks   Format = "blocks"
	JSON     Format = "json"
)

// Valid reports whether f is a known format.
func (f Format) Valid() bool { return f == Markdown || f == Blocks || f == JSON }

// Scaffold is the Ref of a piece that belongs to no record.
const Scaffold = -1

// Piece is a run of output text and the record it belongs to.
type Piece struct {
	Text string
	Ref  int // index of a record, or Scaffold
}

// The item sections, in their order in the packet.
const (
	SharedDefaults       = "Shared Defaults"
	ProjectKnowledge     = "Project Knowledge"
	CurrentState         = "Current State"
	ActiveContradictions = "Active Contradictions"
	ActiveSkills         = "Active Skills"
	Tools                = "Tools"
	Messages             = "Messages"
)

// envSections are the subsections of "Environment & Memory", in order.
var envSections = []string{SharedDefaults, ProjectKnowledge, CurrentState, ActiveContradictions, ActiveSkills}

// SectionOrder is every item section in packet order.
var SectionOrder = append(append([]string{}, envSections...), Tools, Messages)

// IsEnv reports whether a section sits under Environment & Memory.
func IsEnv(section string) bool {
	for _, s := range envSections {
		if s == section {
			return true
		}
	}
	return false
}

// Task is the request's task, as rendered.
type Task struct {
	TaskID, StepID    string
	StepAttempt       int
	Objective         string
	AllowedOutcomes   []string
	PermissionCeiling string
}

// Criterion is one acceptance criterion.
type Criterion struct {
	ID, Description, VerificationKind, TargetRef string
	Required                                     bool
}

// Plan is the plan pointer.
type Plan struct {
	PlanHash         string
	ActiveStepIndex  int
	TotalSteps       int
	SettledDecisions []string
}

// Predecessor is one handoff the packet builds on.
type Predecessor struct {
	Ref                                int
	ID, SourceRole, TargetRole, Status string
	StepID, AttemptID, Summary         string
	Decisions                          []string
	Artifacts                          []Artifact
	Verdicts                           []Verdict
	WitnessExitCode                    *int
	WitnessPassed                      *bool
}

// Artifact is one artifact of a predecessor.
type Artifact struct{ Name, Kind, Ref, Snippet string }

// Verdict is one critic verdict of a predecessor.
type Verdict struct{ Critic, Verdict, Summary string }

// Entry is one item's block.
type Entry struct {
	Ref      int
	Key      string
	Version  int
	Source   string
	Priority int
	Title    string
	Content  string
}

// Contradiction is one pair under Active Contradictions: Kept won over
// Dropped on the same state key. Its line belongs to the dropped item's
// record, which says why.
type Contradiction struct {
	Ref              int
	StateKey         string
	Kept, Dropped    Entry
	KeptAuthority    string
	DroppedAuthority string
}

// Doc is everything a packet shows, already selected and ordered.
type Doc struct {
	Project, TargetRole string

	Task         *Task
	TaskRef      int
	ObjectiveRef int

	Criteria    []Criterion
	CriteriaRef int

	Plan    *Plan
	PlanRef int

	Predecessors []Predecessor

	// AgentContext is the host's state, a JSON object; nil when absent.
	AgentContext    map[string]any
	AgentContextRef int

	// Sections maps a section name to its entries, in rank order.
	Sections       map[string][]Entry
	Contradictions []Contradiction
	// Ranked is every item entry in rank order (the blocks format's order).
	Ranked []Entry
}

// Render returns the pieces of doc in format f.
func Render(f Format, doc *Doc) []Piece {
	var w writer
	switch f {
	case Blocks:
		renderBlocks(&w, doc)
	case JSON:
		renderJSON(&w, doc)
	default:
		renderMarkdown(&w, doc)
	}
	return w.pieces
}

// Text concatenates pieces.
func Text(pieces []Piece) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(p.Text)
	}
	return b.String()
}

type writer struct{ pieces []Piece }

func (w *writer) add(ref int, text string) {
	if text == "" {
		return
	}
	if n := len(w.pieces); n > 0 && w.pieces[n-1].Ref == ref && ref == Scaffold {
		w.pieces[n-1].Text += text
		return
	}
	w.pieces = append(w.pieces, Piece{Text: text, Ref: ref})
}

// ---- markdown ----

// MarkdownItemBlock is an item's block in markdown: "- ", then "title: "
// when it has a title, then its content with continuation lines indented
// two spaces. Item writes count its tokens once and store them.
func MarkdownItemBlock(title, content string) string {
	var b strings.Builder
	b.WriteString("- ")
	if t := oneLine(title); t != "" {
		b.WriteString(t)
		b.WriteString(": ")
	}
	for i, line := range lines(content) {
		if i > 0 {
			b.WriteByte('\n')
			if line != "" {
				b.WriteString("  ")
			}
		}
		b.WriteString(line)
	}
	b.WriteByte('\n')
	return b.String()
}

func lines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.TrimRight(s, "\n")
	return strings.Split(s, "\n")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
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

// HeadingCost returns the text a section's first entry brings with it, for
// budgeting: its heading, and the Environment & Memory heading when it is
// the first environment section to appear.
func HeadingCost(f Format, section string, envStarted bool) string {
	switch f {
	case Markdown:
		return markdownHeading(section, envStarted)
	case JSON:
		return "\n,{\"name\":" + jsonString(section) + ",\"entries\":[\n]}"
	}
	return ""
}

// EntryCost returns the text an entry adds, for budgeting.
func EntryCost(f Format, e Entry) string {
	switch f {
	case Blocks:
		return blocksEntry(e) + "\n"
	case JSON:
		return "," + jsonEntry(e) + "\n"
	}
	return MarkdownItemBlock(e.Title, e.Content)
}

// ContradictionCost returns the text a contradiction line adds, for budgeting.
func ContradictionCost(f Format, c Contradiction) string {
	switch f {
	case Blocks:
		return blocksContradiction(c) + "\n"
	case JSON:
		return "," + jsonContradiction(c) + "\n"
	}
	return markdownContradiction(c)
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
			fmt.Fprintf(&b, " exit %d", *p.WitnessExitCode)
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
	return b.String()
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

func markdownContradiction(c Contradiction) string {
	return fmt.Sprintf("- ⚠️ state %q: kept `%s` v%d (%s) over `%s` v%d (%s)\n",
		c.StateKey, c.Kept.Key, c.Kept.Version, c.KeptAuthority, c.Dropped.Key, c.Dropped.Version, c.DroppedAuthority)
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

// AgentContextText renders a host's state generically: keys in sorted
// order, nested objects as indented "key: value" lines, each array element
// as one line of its fields, and an empty array as "No <key in words> loaded."
func AgentContextText(ctx map[string]any) string {
	var b strings.Builder
	writeObject(&b, ctx, "")
	return b.String()
}

func writeObject(b *strings.Builder, obj map[string]any, indent string) {
	for _, k := range sortedKeys(obj) {
		switch v := obj[k].(type) {
		case map[string]any:
			if len(v) == 0 {
				b.WriteString(indent + k + ": (none)\n")
				continue
			}
			b.WriteString(indent + k + ":\n")
			writeObject(b, v, indent+"  ")
		case []any:
			if len(v) == 0 {
				b.WriteString(indent + "No " + keyWords(k) + " loaded.\n")
				continue
			}
			b.WriteString(indent + k + ":\n")
			for _, el := range v {
				b.WriteString(indent + "  - " + inline(el) + "\n")
			}
		default:
			b.WriteString(indent + k + ": " + scalar(v, indent+"  ") + "\n")
		}
	}
}

// inline renders one array element on one line: an object as its fields,
// "k: v" joined by ", ", in key order.
func inline(v any) string {
	obj, ok := v.(map[string]any)
	if ok && len(obj) == 0 {
		return "(none)"
	}
	if !ok {
		if arr, ok := v.([]any); ok {
			parts := make([]string, len(arr))
			for i, el := range arr {
				parts[i] = inline(el)
			}
			return "[" + strings.Join(parts, ", ") + "]"
		}
		return oneLine(scalar(v, ""))
	}
	parts := make([]string, 0, len(obj))
	for _, k := range sortedKeys(obj) {
		val := obj[k]
		switch x := val.(type) {
		case map[string]any, []any:
			parts = append(parts, k+": "+canonicalJSON(x))
		default:
			parts = append(parts, k+": "+oneLine(scalar(x, "")))
		}
	}
	return strings.Join(parts, ", ")
}

func scalar(v any, indent string) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		ls := lines(x)
		return strings.Join(ls, "\n"+indent)
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return CanonicalNumber(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// CanonicalNumber writes a JSON number the same way whatever its source
// spelling (1e2, 100, 100.0 from jsonb), so that a replayed packet, whose
// request came back from the database, renders the same bytes.
func CanonicalNumber(n json.Number) string {
	if i, err := n.Int64(); err == nil {
		return strconv.FormatInt(i, 10)
	}
	if !strings.ContainsAny(string(n), ".eE") {
		// An integer beyond 64 bits: its digits, exactly.
		if i, ok := new(big.Int).SetString(string(n), 10); ok {
			return i.String()
		}
	}
	if f, err := n.Float64(); err == nil {
		if f == float64(int64(f)) && f > -1e15 && f < 1e15 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return n.String()
}

// keyWords turns a key into words: mediaAssets and media_assets both give
// "media assets".
func keyWords(k string) string {
	var words []string
	var cur []rune
	rs := []rune(k)
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	// acronymEnd: at rs[i], an upper-case letter that ends an acronym and
	// starts a word ("HTTPServers" → HTTP, Servers), unless all that
	// follows is a plural s ("selectedIDs" → selected, IDs).
	acronymEnd := func(i int) bool {
		if i == 0 || i+1 >= len(rs) || !unicode.IsUpper(rs[i-1]) || !unicode.IsLower(rs[i+1]) {
			return false
		}
		return !(rs[i+1] == 's' && (i+2 == len(rs) || !unicode.IsLower(rs[i+2])))
	}
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || unicode.IsSpace(r):
			flush()
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) || acronymEnd(i)):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return strings.Join(words, " ")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ---- blocks (navi) ----

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

// ---- json ----

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
	return "{\"dropped\":{\"authority\":" + jsonString(c.DroppedAuthority) + ",\"key\":" + jsonString(c.Dropped.Key) + ",\"version\":" + strconv.Itoa(c.Dropped.Version) + "}" +
		",\"kept\":{\"authority\":" + jsonString(c.KeptAuthority) + ",\"key\":" + jsonString(c.Kept.Key) + ",\"version\":" + strconv.Itoa(c.Kept.Version) + "}" +
		",\"state_key\":" + jsonString(c.StateKey) + "}"
}

func renderJSON(w *writer, d *Doc) {
	w.add(Scaffold, "{\"schema\":\"contextd.packet.v1\",\"project\":"+jsonString(d.Project)+",\"target_role\":"+jsonString(d.TargetRole))
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
