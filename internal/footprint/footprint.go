// Package footprint writes a packet's decision records in agentfootprint's
// vocabulary (github.com/footprintjs/agentfootprint), so that a trace from
// contextd and one from agentfootprint read alike: each included record
// becomes an InjectionRecord (src/recorders/core/types.ts), each exclusion
// that kept a subject from becoming active a skipped entry (the
// InjectionEvaluation.skipped of src/lib/injection-engine/types.ts), and
// each one where another entry or the budget won an evicted entry.
//
// The package is pure: it reads the records and the rendered text it is
// handed and nothing else.
package footprint

import (
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
)

// The slots of agentfootprint's ContextSlot (src/events/types.ts).
const (
	SlotSystemPrompt = "system-prompt"
	SlotMessages     = "messages"
	SlotTools        = "tools"
)

// The sources of agentfootprint's ContextSource (src/events/types.ts) that
// contextd's records map to.
const (
	SourceFact     = "fact"
	SourceMemory   = "memory"
	SourceRAG      = "rag"
	SourceSkill    = "skill"
	SourceRegistry = "registry"
)

// The reasons agentfootprint itself uses for what contextd also does:
// its evaluator's 'unknown-fact' (a templated instruction whose facts the
// evaluation cannot supply is skipped whole) and its EvictionRecord's
// 'budget'. Every other reason is contextd's own, verbatim.
const (
	ReasonUnknownFact = "unknown-fact"
	ReasonBudget      = "budget"
)

// SummaryLen is the length agentfootprint's slot builders cut
// contentSummary to: truncate(content, 80).
const SummaryLen = 80

// BudgetSpent is an InjectionRecord's budgetSpent.
type BudgetSpent struct {
	Tokens        int     `json:"tokens"`
	FractionOfCap float64 `json:"fractionOfCap"`
}

// InjectionRecord is agentfootprint's InjectionRecord, its members in the
// interface's order. The members contextd has no value for (rawContent,
// upstreamRef, asRole, asRecency, threshold, expiresAfter) are optional
// there and left out here.
type InjectionRecord struct {
	ContentSummary string       `json:"contentSummary"`
	ContentHash    string       `json:"contentHash"`
	Slot           string       `json:"slot"`
	Source         string       `json:"source"`
	SourceID       string       `json:"sourceId,omitempty"`
	Reason         string       `json:"reason"`
	Position       *int         `json:"position,omitempty"`
	SectionTag     string       `json:"sectionTag,omitempty"`
	RetrievalScore *float64     `json:"retrievalScore,omitempty"`
	RankPosition   *int         `json:"rankPosition,omitempty"`
	BudgetSpent    *BudgetSpent `json:"budgetSpent,omitempty"`
}

// Skipped is one entry of agentfootprint's InjectionEvaluation.skipped: a
// subject that never became active, with the explanation in error.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// Evicted is a subject that was a candidate and lost its place: to the
// budget, or to another entry that holds the same state key or key.
type Evicted struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Trace is the answer of GET …/records?format=agentfootprint.
type Trace struct {
	Data    []InjectionRecord `json:"data"`
	Skipped []Skipped         `json:"skipped"`
	Evicted []Evicted         `json:"evicted"`
}

// FromRecords maps records (those the viewer may see, in their order) of a
// packet whose text is rendered and whose token budget is budget.
func FromRecords(rendered string, budget int, records []ctxtype.Record) Trace {
	t := Trace{Data: []InjectionRecord{}, Skipped: []Skipped{}, Evicted: []Evicted{}}
	for _, r := range records {
		if r.Decision == ctxtype.Included {
			t.Data = append(t.Data, Injection(rendered, budget, r))
			continue
		}
		switch r.Reason {
		case ctxtype.ReasonBudget:
			t.Evicted = append(t.Evicted, Evicted{ID: ID(r), Reason: ReasonBudget})
		case ctxtype.ReasonContradicted, ctxtype.ReasonOverridden:
			t.Evicted = append(t.Evicted, Evicted{ID: ID(r), Reason: r.Reason})
		case ctxtype.ReasonTemplateUnresolved:
			t.Skipped = append(t.Skipped, Skipped{ID: ID(r), Reason: ReasonUnknownFact, Error: r.Detail})
		default: // hidden, and any reason added later: it never became active
			t.Skipped = append(t.Skipped, Skipped{ID: ID(r), Reason: r.Reason, Error: r.Detail})
		}
	}
	return t
}

// Injection is an included record as an InjectionRecord: its summary and
// hash are of the text over its span, what the model saw.
func Injection(rendered string, budget int, r ctxtype.Record) InjectionRecord {
	text := ""
	if s := r.Span; s != nil && 0 <= s.Start && s.Start <= s.End && s.End <= len(rendered) {
		text = rendered[s.Start:s.End]
	}
	pos := r.Position
	out := InjectionRecord{
		ContentSummary: Truncate(text, SummaryLen), ContentHash: FNV1a(text), Slot: Slot(r.Section),
		Source: Source(r), SourceID: ID(r), Reason: r.Rule, Position: &pos, SectionTag: r.Section,
	}
	if out.Reason == "" {
		out.Reason = r.Decision
	}
	if score, ok := relevanceScore(r.Rule); ok {
		out.RetrievalScore = &score
	}
	if r.Rank > 0 {
		rank := r.Rank
		out.RankPosition = &rank
	}
	if budget > 0 {
		out.BudgetSpent = &BudgetSpent{Tokens: r.Tokens, FractionOfCap: float64(r.Tokens) / float64(budget)}
	}
	return out
}

// ID names a record's subject: an item of the packet's own project by its
// key, a _shared one as _shared/key, a request part as request/part and a
// predecessor as handoff/id. Keys hold no slash, so no two collide.
func ID(r ctxtype.Record) string {
	switch {
	case r.SubjectKind == ctxtype.SubjectRequest:
		return "request/" + r.SubjectKey
	case r.SubjectKind == ctxtype.SubjectHandoff:
		return "handoff/" + r.SubjectKey
	case r.SubjectProject == ctxtype.SharedProject:
		return ctxtype.SharedProject + "/" + r.SubjectKey
	}
	return r.SubjectKey
}

// Slot is the agentfootprint slot of a section: an item of slot tools or
// messages renders under its own heading, and everything else is the
// structured system prompt.
func Slot(section string) string {
	switch section {
	case render.Tools:
		return SlotTools
	case render.Messages:
		return SlotMessages
	}
	return SlotSystemPrompt
}

// Source is the agentfootprint source (flavor) of a record, from what a
// stored record holds (its subject, section and rule; not the item's kind
// and source, which records do not keep): a predecessor is memory, a tool
// item comes from the registry, an item of Active Skills is a skill, one a
// relevance trigger fired is rag, and the rest (request parts, knowledge,
// state, shared defaults) is fact.
func Source(r ctxtype.Record) string {
	switch {
	case r.SubjectKind == ctxtype.SubjectHandoff:
		return SourceMemory
	case r.SubjectKind != ctxtype.SubjectItem:
		return SourceFact
	case r.Section == render.Tools:
		return SourceRegistry
	case r.Section == render.ActiveSkills:
		return SourceSkill
	case strings.HasPrefix(r.Rule, "relevance:"):
		return SourceRAG
	}
	return SourceFact
}

// relevanceScore is the score a relevance rule recorded ("relevance:0.42").
func relevanceScore(rule string) (float64, bool) {
	s, ok := strings.CutPrefix(rule, "relevance:")
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// FNV1a is agentfootprint's content hash (src/lib/fnv1a.ts): 32-bit FNV-1a
// over the UTF-16 code units of s (JavaScript's charCodeAt), as lowercase
// hex without leading zeros.
func FNV1a(s string) string {
	h := uint32(2166136261)
	for _, u := range utf16.Encode([]rune(s)) {
		h ^= uint32(u)
		h *= 16777619
	}
	return strconv.FormatUint(uint64(h), 16)
}

// Truncate is agentfootprint's truncate(s, n) (src/core/slots/helpers.ts):
// s when it is at most n UTF-16 code units long, else its first n-1 units
// and an ellipsis. A surrogate pair the cut would split is left out whole,
// as a Go string cannot hold half of one.
func Truncate(s string, n int) string {
	units := utf16.Encode([]rune(s))
	if len(units) <= n {
		return s
	}
	cut := max(n-1, 0)
	if cut > 0 && utf16.IsSurrogate(rune(units[cut-1])) && units[cut-1] < 0xdc00 {
		cut--
	}
	return string(utf16.Decode(units[:cut])) + "…"
}
