package ctxtype

import "time"

// The decisions of a record: every subject the pipeline considered is
// either in the packet or out of it, and a record says which.
const (
	// Included marks a subject whose block is in the rendered text.
	Included = "included"
	// Excluded marks a subject left out; the record's Reason says why.
	Excluded = "excluded"
)

// The reasons of an excluded record, stable so that clients can branch on
// them.
const (
	// ReasonBudget means the entry did not fit the token budget.
	ReasonBudget = "budget"
	// ReasonTemplateUnresolved means a placeholder of the template had no value,
	// and a half-filled text must not reach an agent.
	ReasonTemplateUnresolved = "template_unresolved"
	// ReasonContradicted means a stronger item holds another value for the same
	// state key.
	ReasonContradicted = "contradicted"
	// ReasonOverridden means a project item of the same key shadows this _shared
	// one.
	ReasonOverridden = "overridden"
	// ReasonHidden means the target role may not see the item; only admins see
	// such records.
	ReasonHidden = "hidden"
	// ReasonAblated means a counterfactual packet was asked to leave the
	// entry out (POST …/ablations); the packet it was made from included it.
	ReasonAblated = "ablated"
)

// The subject kinds of a record: what a record is about.
const (
	// SubjectItem is an item version.
	SubjectItem = "item"
	// SubjectRequest is a part of the request (task, objective, criteria,
	// plan, host state).
	SubjectRequest = "request"
	// SubjectHandoff is a predecessor handoff.
	SubjectHandoff = "handoff"
)

// Span is a byte range [Start, End) of the rendered text, so that every
// byte can be traced to the record that put it there.
type Span struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Record is one decision about one subject; the records of a packet answer
// "why is this in (or not in) my context?".
type Record struct {
	SubjectKind    string
	SubjectProject string // for items: the project the version lives in
	SubjectKey     string // item key, request part, or handoff id
	SubjectVersion int
	Decision       string
	Section        string
	Position       int
	Span           *Span
	Tokens         int
	Rank           int
	Rule           string
	Reason         string
	Detail         string
	Layer          string // project or shared
	// AdminOnly marks records of items hidden from the target role; only
	// admins ever see them.
	AdminOnly bool
	// Kind and Source of an item, for the provenance summary.
	Kind, Source string
}

// Gap is an unresolved gap of the budget: something that should have been
// in the packet and is not, so a caller can raise the budget or split the
// work.
type Gap struct {
	Key     string `json:"key,omitempty"`
	Version int    `json:"version,omitempty"`
	Tokens  int    `json:"tokens,omitempty"`
	Reason  string `json:"reason"`
}

// Predecessor is a handoff a packet builds on, resolved when the packet was
// assembled and stored with it, so a replay renders it the same.
type Predecessor struct {
	ID              string     `json:"id"`
	SourceRole      string     `json:"source_role"`
	TargetRole      string     `json:"target_role"`
	Status          string     `json:"status"`
	StepID          string     `json:"step_id"`
	AttemptID       string     `json:"attempt_id"`
	Summary         string     `json:"summary"`
	Decisions       []string   `json:"decisions"`
	Artifacts       []Artifact `json:"artifacts"`
	Verdicts        []Verdict  `json:"verdicts"`
	WitnessExitCode *int       `json:"witness_exit_code,omitempty"`
	WitnessPassed   *bool      `json:"witness_passed,omitempty"`
	// The rest came with issue 12's handoff loop; absent in packets stored
	// before, which then render as they did.
	Reason            string    `json:"reason,omitempty"`         // why it was rejected or withdrawn
	ReasonBy          string    `json:"reason_by,omitempty"`      // the agent that gave the reason
	ReasonByRole      string    `json:"reason_by_role,omitempty"` // and its role
	BaseCommit        string    `json:"base_commit,omitempty"`
	CandidateTreeHash string    `json:"candidate_tree_hash,omitempty"`
	Patches           []string  `json:"patches,omitempty"`
	Reports           []string  `json:"reports,omitempty"`
	OpenQuestions     []string  `json:"open_questions,omitempty"`
	NextStep          *NextStep `json:"suggested_next_step,omitempty"`
	// SettledAt is when a handoff left pending (accepted, rejected,
	// superseded or withdrawn), and Withdrawn whether its source withdrew
	// it (status withdrawn, or, before migration 00030, superseded with no
	// successor). Only the kxm format shows them; absent in packets stored
	// before them.
	SettledAt *time.Time `json:"settled_at,omitempty"`
	Withdrawn bool       `json:"withdrawn,omitempty"`
}

// NextStep is a predecessor's suggested next step.
type NextStep struct {
	StepID string `json:"step_id,omitempty"`
	Action string `json:"action,omitempty"`
}

// Artifact is one artifact of a predecessor. Its fields carry no JSON tags:
// stored packets spell them by their Go names, and a replay must read them.
type Artifact struct{ Name, Kind, Ref, Snippet string }

// Verdict is one critic verdict of a predecessor; like Artifact, stored by
// its Go field names.
type Verdict struct{ Critic, Verdict, Summary string }

// Ablation is what makes a request a counterfactual packet: the packet it
// was made from, that packet's time (the assembly judges validity windows
// and renders {{now}} at it, on that packet's snapshot), and the entries to
// leave out, each named as its record names it.
type Ablation struct {
	Of      string    `json:"of"`
	At      time.Time `json:"at"`
	Without []Subject `json:"without"`
}

// Subject names one entry of a packet as its record does: an item by its
// layer's project and key, a request part by its name (task, objective,
// criteria, plan, agent_context, context_packets[N]), a predecessor by its
// handoff id.
type Subject struct {
	Kind    string `json:"subject"`
	Project string `json:"project,omitempty"`
	Key     string `json:"key"`
}

// Leaves reports whether the ablation leaves out the entry of a record of
// that kind, project (items only) and key; a nil ablation leaves out none.
func (a *Ablation) Leaves(kind, project, key string) bool {
	if a == nil {
		return false
	}
	for _, s := range a.Without {
		if s.Kind == kind && s.Key == key && (kind != SubjectItem || s.Project == project) {
			return true
		}
	}
	return false
}
