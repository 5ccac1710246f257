package ctxtype

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

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
		if json.Unmarshal(raw, &cp) != nil {
			continue // navi's parser names the problem (packet.Service.Prepare)
		}
		limits.Bytes(errs, fmt.Sprintf("/context_packets/%d/content", i), len(cp.Content), l.ToolResult)
		if cp.Metadata != nil {
			CheckDocument(errs, fmt.Sprintf("/context_packets/%d/metadata", i), cp.Metadata, l.Depth, "key")
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
		CheckDocument(errs, "/variables", r.Variables, l.Depth, "key")
	}
}

// CheckDocument refuses credential-like keys at any depth of a free-form
// document (a request's agent_context and variables, an item's metadata:
// secrets never reach a prompt) and nesting deeper than maxDepth; it
// reports whether the depth was within the limit. The walk stops at the
// limit, so its cost is bounded too. what names a key in the messages
// ("key", "metadata key").
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
				walk(cp, x[k], depth+1)
			}
		case []any:
			for i, child := range x {
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
