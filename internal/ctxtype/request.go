package ctxtype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/contextd/contextd/internal/token"
	"github.com/contextd/contextd/internal/validation"
)

// Format is a packet's output format. It is part of the request, which is
// why it lives here and not with the renderers.
type Format string

const (
	// Markdown is the default format: KXM's packet v2 layout.
	Markdown Format = "markdown"
	// Blocks is navi's "=== External Context Packets ===" block, for hosts
	// that already parse it.
	Blocks Format = "blocks"
	// JSON is one JSON document, for hosts that place the parts themselves.
	JSON Format = "json"
	// KXM is KXM's formal context packet v2 (kxm.context-packet.v2), one
	// canonical JSON document, for KXM's workflow roles.
	KXM Format = "kxm"
	// Navi is navi's render_context_packets block exactly (sources in
	// navi's Debug form, stable by descending priority), after the
	// request's own parts as paragraphs.
	Navi Format = "navi"
)

// Valid reports whether f is a known format, so a request naming another
// one is refused before anything is rendered.
func (f Format) Valid() bool {
	return f == Markdown || f == Blocks || f == JSON || f == KXM || f == Navi
}

const (
	// DefaultBudget is the token budget of a request that names none.
	DefaultBudget = 16000
	// MaxBudget bounds a packet's token budget, and so the work of one
	// assembly.
	MaxBudget = 200000
)

// Request is what an agent asks for, normalised: defaults applied,
// validated. It is stored with the packet as JSON, and a replay decodes it
// back, so every field that shapes the output is here.
type Request struct {
	TargetRole         string          `json:"target_role"`
	Task               *Task           `json:"task,omitempty"`
	AcceptanceCriteria []Criterion     `json:"acceptance_criteria"`
	Plan               *Plan           `json:"plan,omitempty"`
	Predecessors       []string        `json:"predecessors"`
	TokenBudget        int             `json:"token_budget"`
	History            []Message       `json:"history"`
	ToolResults        []ToolResult    `json:"tool_results"`
	Pins               []string        `json:"pins"`
	Query              string          `json:"query"`
	AgentContext       map[string]any  `json:"agent_context,omitempty"`
	Variables          map[string]any  `json:"variables"`
	Format             Format          `json:"format"`
	Tokenizer          token.Tokenizer `json:"tokenizer"`
	// Kinds and MaxPerSection are a role policy's members as a request
	// may give them itself (ApplyPolicy): the item kinds the packet holds,
	// and the most entries a section holds. Absent: the role's policy's.
	Kinds         []string       `json:"kinds,omitempty"`
	MaxPerSection map[string]int `json:"max_per_section,omitempty"`
	// ContextPackets are navi ContextPackets for this packet alone, as the
	// client sent them (internal/navi reads them; the packet service checks
	// them before assembly).
	ContextPackets []json.RawMessage `json:"context_packets,omitempty"`
	// Ablation, set only by the packet service, makes the request a
	// counterfactual of an earlier packet (POST …/ablations): stored with
	// the packet, so its audit entry covers it and a replay leaves out the
	// same entries. No client sends it: requests are mapped field by field.
	Ablation *Ablation `json:"ablation,omitempty"`
	// RolePolicy, set only by the packet service (ApplyPolicy), is the
	// policy of the target role the packet was assembled under, stored
	// with the packet so that its audit entry covers it and a replay
	// applies it as it was. Absent when the role has no policy.
	RolePolicy *AppliedPolicy `json:"role_policy,omitempty"`

	// budgetGiven is whether the client sent token_budget: 0 sent is out
	// of range, not the default. formatGiven and tokenizerGiven say the
	// same of format and tokenizer, for the role's policy (ApplyPolicy).
	budgetGiven, formatGiven, tokenizerGiven bool
}

// Task is the step the packet is for; the packet shows it first so the
// agent knows what it is asked to do.
type Task struct {
	TaskID            string   `json:"task_id"`
	StepID            string   `json:"step_id"`
	StepAttempt       int      `json:"step_attempt"`
	Objective         string   `json:"objective"`
	AllowedOutcomes   []string `json:"allowed_outcomes"`
	PermissionCeiling string   `json:"permission_ceiling"`
}

// Criterion is one acceptance criterion, shown so the agent knows how its
// work will be judged.
type Criterion struct {
	ID               string `json:"id"`
	Description      string `json:"description"`
	VerificationKind string `json:"verification_kind"`
	TargetRef        string `json:"target_ref"`
	Required         bool   `json:"required"`
}

// Plan points into the plan being executed, so the agent knows where it
// stands and what is already settled.
type Plan struct {
	PlanHash         string   `json:"plan_hash"`
	ActiveStepIndex  int      `json:"active_step_index"`
	TotalSteps       int      `json:"total_steps"`
	SettledDecisions []string `json:"settled_decisions"`
}

// Message is one message of the conversation so far. Only messages whose
// author is a person may fire keyword triggers.
type Message struct {
	Role    string `json:"role"`
	Author  string `json:"author"`
	Content string `json:"content"`
}

// ToolResult is one result of a tool call; tool triggers fire on it.
type ToolResult struct {
	Tool    string `json:"tool"`
	Status  string `json:"status"`
	Content string `json:"content"`
}

// DecodeRequest reads a request, from a client or stored with a packet.
// Numbers stay json.Number so that they render the same as when the packet
// was made.
func DecodeRequest(raw []byte) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var r Request
	var probe struct {
		TokenBudget *json.RawMessage `json:"token_budget"`
	}
	_ = json.Unmarshal(raw, &probe)
	r.budgetGiven = probe.TokenBudget != nil && string(*probe.TokenBudget) != "null"
	if err := dec.Decode(&r); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			ptr := "/" + strings.ReplaceAll(typ.Field, ".", "/")
			return nil, &validation.Malformed{Pointer: ptr, Detail: fmt.Sprintf("%s has the wrong JSON type (%s)", ptr, typ.Value)}
		}
		return nil, fmt.Errorf("decode request: %w", err)
	}
	return &r, nil
}

// Normalize applies defaults and validates r, reporting every problem by
// JSON Pointer. It does not check predecessors (they need the database).
func (r *Request) Normalize() error {
	var errs validation.List
	if strings.TrimSpace(r.TargetRole) == "" {
		errs.Add("/target_role", "required", "target_role is required")
	}
	r.normalizeOutput(&errs)
	r.normalizeTask(&errs)
	for i, c := range r.AcceptanceCriteria {
		if !validation.OneOf(c.VerificationKind, "gate", "witness", "critic", "human") {
			errs.Add(fmt.Sprintf("/acceptance_criteria/%d/verification_kind", i), "enum", "verification_kind must be gate, witness, critic or human")
		}
		if strings.TrimSpace(c.ID) == "" {
			errs.Add(fmt.Sprintf("/acceptance_criteria/%d/id", i), "required", "id is required")
		}
	}
	r.normalizePlan(&errs)
	r.checkConversation(&errs)
	r.checkLimits(&errs)
	r.fillEmpty()
	if b, _ := json.Marshal(r); bytes.Contains(b, []byte(`\u0000`)) {
		errs.Add("", "format", "the request must not contain NUL characters")
	}
	return errs.Err()
}

// normalizeOutput settles what the packet is measured and written in.
func (r *Request) normalizeOutput(errs *validation.List) {
	r.formatGiven, r.tokenizerGiven = r.Format != "", r.Tokenizer != ""
	if r.TokenBudget == 0 && !r.budgetGiven {
		r.TokenBudget = DefaultBudget
	}
	if r.TokenBudget < 1 || r.TokenBudget > MaxBudget {
		errs.Add("/token_budget", "range", "token_budget must be between 1 and %d, not %d", MaxBudget, r.TokenBudget)
	}
	if r.Format == "" {
		r.Format = Markdown
	}
	if !r.Format.Valid() {
		errs.Add("/format", "enum", "format must be markdown, blocks, json, kxm or navi, not %q", r.Format)
	}
	if r.Tokenizer == "" {
		r.Tokenizer = token.Default
	}
	if !r.Tokenizer.Valid() {
		errs.Add("/tokenizer", "enum", "tokenizer must be o200k_base or cl100k_base, not %q", r.Tokenizer)
	}
}

func (r *Request) normalizeTask(errs *validation.List) {
	t := r.Task
	if t == nil {
		return
	}
	if t.PermissionCeiling != "" && !validation.OneOf(t.PermissionCeiling, "read-only", "edit", "admin") {
		errs.Add("/task/permission_ceiling", "enum", "permission_ceiling must be read-only, edit or admin")
	}
	if t.StepAttempt < 0 {
		errs.Add("/task/step_attempt", "range", "step_attempt must not be negative")
	}
	if t.AllowedOutcomes == nil {
		t.AllowedOutcomes = []string{}
	}
}

func (r *Request) normalizePlan(errs *validation.List) {
	p := r.Plan
	if p == nil {
		return
	}
	if p.TotalSteps < 0 || p.ActiveStepIndex < 0 || (p.TotalSteps > 0 && p.ActiveStepIndex >= p.TotalSteps) {
		errs.Add("/plan/active_step_index", "range", "active_step_index must be in [0, total_steps)")
	}
	if p.SettledDecisions == nil {
		p.SettledDecisions = []string{}
	}
}

// checkConversation validates what triggers fire on: the history, the
// tool results and the pins.
func (r *Request) checkConversation(errs *validation.List) {
	for i, m := range r.History {
		if !validation.OneOf(m.Role, "user", "assistant", "tool", "system") {
			errs.Add(fmt.Sprintf("/history/%d/role", i), "enum", "role must be user, assistant, tool or system")
		}
		if m.Author == "" {
			errs.Add(fmt.Sprintf("/history/%d/author", i), "required", "author is required: person, agent or library")
		} else if !validation.OneOf(m.Author, "person", "agent", "library") {
			errs.Add(fmt.Sprintf("/history/%d/author", i), "enum", "author must be person, agent or library")
		}
	}
	for i, tr := range r.ToolResults {
		if strings.TrimSpace(tr.Tool) == "" {
			errs.Add(fmt.Sprintf("/tool_results/%d/tool", i), "required", "tool is required")
		}
	}
	for i, p := range r.Pins {
		if !ValidKey(p) {
			errs.Add(fmt.Sprintf("/pins/%d", i), "format", "pins are item keys")
		}
	}
}

// fillEmpty gives every absent list and map its empty value, so the stored
// request, and a replay of it, has one spelling.
func (r *Request) fillEmpty() {
	if r.AcceptanceCriteria == nil {
		r.AcceptanceCriteria = []Criterion{}
	}
	if r.Predecessors == nil {
		r.Predecessors = []string{}
	}
	if r.History == nil {
		r.History = []Message{}
	}
	if r.ToolResults == nil {
		r.ToolResults = []ToolResult{}
	}
	if r.Pins == nil {
		r.Pins = []string{}
	}
	if r.Variables == nil {
		r.Variables = map[string]any{}
	}
	if len(r.AgentContext) == 0 {
		// An empty host state is no host state: nothing to render, and
		// nothing that a stored request could lose.
		r.AgentContext = nil
	}
}

// SetTokenBudget records a token_budget the client sent: a mapper from
// the API's request sets it this way, so 0 sent stays out of range rather
// than becoming the default (as DecodeRequest does for a stored request).
func (r *Request) SetTokenBudget(n int) {
	r.TokenBudget = n
	r.budgetGiven = true
}

// DecodeObject reads a JSON object of the request (agent_context,
// variables) as DecodeRequest does: numbers stay json.Number, and anything
// but an object (or null) is refused at pointer with the wrong JSON type.
func DecodeObject(pointer string, raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return nil, &validation.Malformed{Pointer: pointer, Detail: fmt.Sprintf("%s has the wrong JSON type (%s)", pointer, typ.Value)}
		}
		return nil, fmt.Errorf("decode %s: %w", pointer, err)
	}
	return m, nil
}

// CanonicalRaw is raw JSON as encoding/json writes a json.RawMessage:
// compact, with <, > and & escaped. A context packet is kept in this one
// spelling, whether it came from a client or from the stored request.
func CanonicalRaw(raw []byte) (json.RawMessage, error) {
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, err
	}
	json.HTMLEscape(&out, compact.Bytes())
	return out.Bytes(), nil
}
