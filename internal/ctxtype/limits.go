package ctxtype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/validation"
)

// checkLimits refuses a request over any of the process's limits (package
// limits), by pointer: the work of assembling it is then bounded by them.
func (r *Request) checkLimits(errs *validation.List) {
	l := limits.Get()
	limits.Chars(errs, "/target_role", r.TargetRole, l.Role)
	limits.Chars(errs, "/query", r.Query, l.Query)
	if t := r.Task; t != nil {
		limits.Chars(errs, "/task/task_id", t.TaskID, l.TaskID)
		limits.Chars(errs, "/task/step_id", t.StepID, l.StepID)
		limits.Chars(errs, "/task/objective", t.Objective, l.Objective)
		limits.Items(errs, "/task/allowed_outcomes", len(t.AllowedOutcomes), l.List)
		for i, o := range t.AllowedOutcomes {
			limits.Chars(errs, fmt.Sprintf("/task/allowed_outcomes/%d", i), o, l.Text)
		}
	}
	limits.Items(errs, "/acceptance_criteria", len(r.AcceptanceCriteria), l.List)
	for i, c := range r.AcceptanceCriteria {
		p := fmt.Sprintf("/acceptance_criteria/%d", i)
		limits.Chars(errs, p+"/id", c.ID, l.Text)
		limits.Chars(errs, p+"/description", c.Description, l.Text)
		limits.Chars(errs, p+"/target_ref", c.TargetRef, l.Text)
	}
	if r.Plan != nil {
		limits.Chars(errs, "/plan/plan_hash", r.Plan.PlanHash, l.Text)
		limits.Items(errs, "/plan/settled_decisions", len(r.Plan.SettledDecisions), l.List)
		for i, d := range r.Plan.SettledDecisions {
			limits.Chars(errs, fmt.Sprintf("/plan/settled_decisions/%d", i), d, l.Text)
		}
	}
	limits.Items(errs, "/predecessors", len(r.Predecessors), l.List)
	limits.Items(errs, "/context_packets", len(r.ContextPackets), MaxContextPackets)
	for i, raw := range r.ContextPackets {
		var cp struct {
			Content  string         `json:"content"`
			Metadata map[string]any `json:"metadata"`
		}
		// (Decoded as float64: navi's parser refuses a number out of f64's
		// range itself, at the same pointer.)
		if json.Unmarshal(raw, &cp) != nil {
			continue // navi's parser names the problem (packet.Service.Prepare)
		}
		limits.Bytes(errs, fmt.Sprintf("/context_packets/%d/content", i), len(cp.Content), l.ToolResult)
		if cp.Metadata != nil {
			CheckDocument(errs, fmt.Sprintf("/context_packets/%d/metadata", i), cp.Metadata, l.Depth, "key")
		}
		// A context packet is stored as sent, in the request's jsonb, which
		// writes its numbers out: each must be one jsonb can hold, and the
		// packet, so written, within its content's limit and agent_context's.
		if n := storedSize(errs, fmt.Sprintf("/context_packets/%d", i), raw); n > l.ToolResult+l.AgentContext {
			errs.Add(fmt.Sprintf("/context_packets/%d", i), "too_long", "a context packet may be at most %d bytes as stored (its content %d, the rest %d), not %d",
				l.ToolResult+l.AgentContext, l.ToolResult, l.AgentContext, n)
		}
	}
	limits.Items(errs, "/history", len(r.History), l.Messages)
	for i, m := range r.History {
		limits.Bytes(errs, fmt.Sprintf("/history/%d/content", i), len(m.Content), l.Message)
	}
	limits.Items(errs, "/tool_results", len(r.ToolResults), l.ToolResults)
	for i, tr := range r.ToolResults {
		limits.Chars(errs, fmt.Sprintf("/tool_results/%d/tool", i), tr.Tool, l.Text)
		limits.Bytes(errs, fmt.Sprintf("/tool_results/%d/content", i), len(tr.Content), l.ToolResult)
	}
	limits.Items(errs, "/pins", len(r.Pins), l.Pins)
	if r.AgentContext != nil && CheckDocument(errs, "/agent_context", r.AgentContext, l.Depth, "key") {
		if b, err := json.Marshal(r.AgentContext); err == nil {
			limits.Bytes(errs, "/agent_context", len(b), l.AgentContext)
		}
	}
	if r.Variables != nil {
		limits.Items(errs, "/variables", len(r.Variables), l.Variables)
		if CheckDocument(errs, "/variables", r.Variables, l.Depth, "key") {
			if b, err := json.Marshal(r.Variables); err == nil { // numbers as stored
				limits.Bytes(errs, "/variables", len(b), l.AgentContext)
			}
		}
	}
}

// storedSize is the size of the JSON value raw once jsonb has written its
// numbers out (1e2 is 100, 1e999 a thousand bytes), and it refuses, 422
// range at its pointer, a number jsonb cannot hold or longer than
// MaxNumberBytes written out. A number out of float64's range inside
// metadata is left to navi's parser, which refuses it at the same place.
func storedSize(errs *validation.List, pointer string, raw []byte) int {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return len(raw) // navi's parser names the problem
	}
	size := len(raw)
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(p+"/"+validation.EscapePointer(k), x[k])
			}
		case []any:
			for i, child := range x {
				walk(fmt.Sprintf("%s/%d", p, i), child)
			}
		case json.Number:
			if f, err := strconv.ParseFloat(string(x), 64); err != nil && math.IsInf(f, 0) && strings.HasPrefix(p, pointer+"/metadata/") {
				return
			}
			size += len(storedNumber(errs, p, x)) - len(x) // x itself when refused
		}
	}
	walk(pointer, v)
	return size
}

// storedNumber is n as jsonb will store it (StoredNumber), or n itself
// and a problem at pointer when jsonb cannot hold it or it is too long
// written out.
func storedNumber(errs *validation.List, pointer string, n json.Number) json.Number {
	s, ok := StoredNumber(string(n))
	if !ok {
		errs.Add(pointer, "range", "numbers are stored as PostgreSQL's numeric, in plain notation: at most %d digits after the point and %d characters written out; %s is not", maxNumericScale, MaxNumberBytes, validation.QuoteShort(string(n)))
		return n
	}
	return json.Number(s)
}

// CheckDocument refuses credential-like keys at any depth of a free-form
// document (a request's agent_context and variables, an item's metadata:
// secrets never reach a prompt) and nesting deeper than maxDepth; it
// reports whether the depth was within the limit. The walk stops at the
// limit, so its cost is bounded too. what names a key in the messages
// ("key", "metadata key"). It also writes each number (a json.Number, as
// a document decoded with UseNumber holds them) as jsonb will store it,
// so that what is measured, hashed and rendered now is what a read or a
// replay finds later (1e2 is 100), and refuses, 422 range at its pointer,
// a number jsonb cannot hold (1e200000: it was a 500) or that would be
// over MaxNumberBytes written out (1e131071).
func CheckDocument(errs *validation.List, pointer string, doc map[string]any, maxDepth int, what string) bool {
	deep := false
	var walk func(p string, v any, depth int)
	walk = func(p string, v any, depth int) {
		if deep {
			return
		}
		switch v.(type) {
		case map[string]any, []any:
			if depth > maxDepth {
				errs.Add(pointer, "too_deep", "nested deeper than %d levels", maxDepth)
				deep = true
				return
			}
		}
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				cp := p + "/" + validation.EscapePointer(k)
				if validation.LooksLikeCredential(k) {
					errs.Add(cp, "forbidden_key", "%s %q looks like a credential; credentials are never put in context", what, k)
					continue
				}
				if n, ok := x[k].(json.Number); ok {
					x[k] = storedNumber(errs, cp, n)
					continue
				}
				walk(cp, x[k], depth+1)
			}
		case []any:
			for i, child := range x {
				if n, ok := child.(json.Number); ok {
					x[i] = storedNumber(errs, fmt.Sprintf("%s/%d", p, i), n)
					continue
				}
				walk(fmt.Sprintf("%s/%d", p, i), child, depth+1)
			}
		}
	}
	walk(pointer, doc, 1)
	return !deep
}

// MaxContextPackets bounds a request's context_packets (KXM's bound on a
// packet's items).
const MaxContextPackets = 256
