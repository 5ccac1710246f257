package assemble

import "github.com/contextd/contextd/internal/ctxtype"

// The request and record types belong to the leaf package internal/ctxtype,
// so that code which only names them needs none of the pipeline; these
// aliases keep assemble.Request, assemble.Record and the rest working for
// the callers of Assemble.
type (
	// Request is ctxtype.Request, the leaf package's type: what an agent
	// asks for, normalised.
	Request = ctxtype.Request
	// Task is ctxtype.Task, the leaf package's type: the step a packet is for.
	Task = ctxtype.Task
	// Criterion is ctxtype.Criterion, the leaf package's type: one
	// acceptance criterion.
	Criterion = ctxtype.Criterion
	// Plan is ctxtype.Plan, the leaf package's type: the plan pointer.
	Plan = ctxtype.Plan
	// Message is ctxtype.Message, the leaf package's type: one message of
	// the history that keyword triggers read.
	Message = ctxtype.Message
	// ToolResult is ctxtype.ToolResult, the leaf package's type: one tool
	// result that tool triggers read.
	ToolResult = ctxtype.ToolResult
	// Predecessor is ctxtype.Predecessor, the leaf package's type: a
	// handoff stored with the packet so a replay renders it the same.
	Predecessor = ctxtype.Predecessor
	// Span is ctxtype.Span, the leaf package's type: a byte range of the
	// rendered text.
	Span = ctxtype.Span
	// Record is ctxtype.Record, the leaf package's type: one decision about
	// one subject.
	Record = ctxtype.Record
	// Gap is ctxtype.Gap, the leaf package's type: what the budget left out.
	Gap = ctxtype.Gap
)

// The decisions, exclusion reasons and subject kinds of records, and the
// request's budget bounds, re-exported from the leaf package internal/ctxtype.
const (
	// Included is ctxtype.Included: the subject is in the text.
	Included = ctxtype.Included
	// Excluded is ctxtype.Excluded: the subject was left out.
	Excluded = ctxtype.Excluded

	// ReasonBudget is ctxtype.ReasonBudget: it did not fit.
	ReasonBudget = ctxtype.ReasonBudget
	// ReasonTemplateUnresolved is ctxtype.ReasonTemplateUnresolved: a
	// placeholder had no value.
	ReasonTemplateUnresolved = ctxtype.ReasonTemplateUnresolved
	// ReasonContradicted is ctxtype.ReasonContradicted: a stronger item
	// holds the state key.
	ReasonContradicted = ctxtype.ReasonContradicted
	// ReasonOverridden is ctxtype.ReasonOverridden: a project item shadows
	// the _shared one.
	ReasonOverridden = ctxtype.ReasonOverridden
	// ReasonHidden is ctxtype.ReasonHidden: the role may not see the item.
	ReasonHidden = ctxtype.ReasonHidden

	// SubjectItem is ctxtype.SubjectItem: a record about an item version.
	SubjectItem = ctxtype.SubjectItem
	// SubjectRequest is ctxtype.SubjectRequest: a record about a request part.
	SubjectRequest = ctxtype.SubjectRequest
	// SubjectHandoff is ctxtype.SubjectHandoff: a record about a predecessor.
	SubjectHandoff = ctxtype.SubjectHandoff

	// DefaultBudget is ctxtype.DefaultBudget, the budget of a request that
	// names none.
	DefaultBudget = ctxtype.DefaultBudget
	// MaxBudget is ctxtype.MaxBudget, the largest budget a request may ask.
	MaxBudget = ctxtype.MaxBudget

	// SharedProject is ctxtype.SharedProject, the reserved project of shared
	// defaults that every packet layers under the project's own items.
	SharedProject = ctxtype.SharedProject
)

// DecodeRequest reads a request, from a client or stored with a packet; see
// ctxtype.DecodeRequest. It stays here so a caller that assembles needs one
// import.
func DecodeRequest(raw []byte) (*Request, error) { return ctxtype.DecodeRequest(raw) }
