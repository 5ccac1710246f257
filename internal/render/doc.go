package render

import (
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
)

// The item sections, in their order in the packet. Their names are the
// headings of the text and the Section of a record, so both agree.
const (
	// SharedDefaults holds the _shared items no project item overrides.
	SharedDefaults = "Shared Defaults"
	// ProjectKnowledge holds the project's own items of no other section.
	ProjectKnowledge = "Project Knowledge"
	// CurrentState holds the host's state and the items of kind state.
	CurrentState = "Current State"
	// ActiveContradictions lists which item won each state key, so the
	// agent knows a competing value exists.
	ActiveContradictions = "Active Contradictions"
	// ActiveSkills holds the items of kind skill.
	ActiveSkills = "Active Skills"
	// Tools holds the items of the tools slot, the tools the model may call.
	Tools = "Tools"
	// Messages holds the items of the messages slot.
	Messages = "Messages"
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

// Task is the request's task, as rendered; the renderers keep their own
// copy of the request's parts so that a Doc is all they read.
type Task struct {
	TaskID, StepID    string
	StepAttempt       int
	Objective         string
	AllowedOutcomes   []string
	PermissionCeiling string
}

// Criterion is one acceptance criterion, as rendered.
type Criterion struct {
	ID, Description, VerificationKind, TargetRef string
	Required                                     bool
}

// Plan is the plan pointer, as rendered: only what the request gave shows.
type Plan struct {
	PlanHash         string
	ActiveStepIndex  int
	TotalSteps       int
	SettledDecisions []string
}

// Predecessor is one handoff the packet builds on, with the Ref of its
// record.
type Predecessor struct {
	Ref                                int
	ID, SourceRole, TargetRole, Status string
	StepID, AttemptID, Summary         string
	Decisions                          []string
	Artifacts                          []ctxtype.Artifact
	Verdicts                           []ctxtype.Verdict
	WitnessExitCode                    *int
	WitnessPassed                      *bool
	// Why it was rejected or withdrawn, and by whom (agent id and role).
	Reason, ReasonBy, ReasonByRole  string
	BaseCommit, CandidateTreeHash   string
	Patches, Reports, OpenQuestions []string
	NextStep                        *ctxtype.NextStep
	// When it left pending (nil while pending), and whether its source
	// withdrew it; only the kxm format shows them.
	SettledAt *time.Time
	Withdrawn bool
}

// Entry is one item's block, with the Ref of its record; the same value
// is rendered into the text and priced by EntryCost.
type Entry struct {
	Ref      int
	Key      string
	Version  int
	Source   string
	Priority int
	Title    string
	Content  string
	// V is the item version the entry shows, for the members only the kxm
	// format writes (kind, authority, confidence, state key, validity);
	// nil in a hand-made Doc, which the kxm format then fills with defaults.
	V *ctxtype.Version
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
	// Facts makes the line name the facts (Kept's and Dropped's content,
	// cut at FactChars characters), as KXM prints the losing fact; packets
	// of render version 1 name only the keys, and replay so.
	Facts bool
}

// Doc is everything a packet shows, already selected and ordered, so a
// renderer decides layout only. Each *Ref is the index of the record that
// owns that part.
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

	// The packet's own figures, which only the kxm format writes: its id
	// and time (fixed before rendering, so a replay writes them again),
	// the budget, the tokens the text uses (the caller settles it to the
	// exact count of the text it is written into) and the unresolved gaps.
	PacketID    string
	GeneratedAt time.Time
	Allocated   int
	Used        int
	Gaps        []string
}
