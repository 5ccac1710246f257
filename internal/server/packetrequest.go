package server

import (
	"encoding/json"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/token"
)

// fromPacketRequestAPI maps the contract's packet request to the request
// the packet service assembles, field by field. It gives the values
// ctxtype.DecodeRequest gives for the same JSON (a stored request is read
// back that way for a replay): numbers in agent_context and variables stay
// json.Number, context packets keep encoding/json's spelling, and a
// token_budget sent is remembered as sent.
func fromPacketRequestAPI(b *api.PacketRequest) (*ctxtype.Request, error) {
	r := &ctxtype.Request{
		TargetRole: b.TargetRole, Query: deref(b.Query), Pins: deref(b.Pins), Predecessors: deref(b.Predecessors),
		Format: ctxtype.Format(deref(b.Format)), Tokenizer: token.Tokenizer(deref(b.Tokenizer)),
		Task: fromTaskAPI(b), Plan: fromPlanAPI(b), AcceptanceCriteria: fromCriteriaAPI(b),
		History: fromHistoryAPI(b), ToolResults: fromToolResultsAPI(b),
	}
	if b.TokenBudget != nil {
		r.SetTokenBudget(*b.TokenBudget)
	}
	if b.Kinds != nil {
		r.Kinds = *b.Kinds
	}
	if b.MaxPerSection != nil {
		r.MaxPerSection = *b.MaxPerSection
	}
	var err error
	if b.AgentContext != nil {
		if r.AgentContext, err = ctxtype.DecodeObject("/agent_context", *b.AgentContext); err != nil {
			return nil, err
		}
	}
	if b.ContextPackets != nil {
		if r.ContextPackets, err = canonicalPackets(*b.ContextPackets); err != nil {
			return nil, err
		}
	}
	if b.Variables != nil {
		if r.Variables, err = ctxtype.DecodeObject("/variables", *b.Variables); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// canonicalPackets keeps each context packet in encoding/json's spelling.
func canonicalPackets(in []json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(in))
	for i, raw := range in {
		c, err := ctxtype.CanonicalRaw(raw)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// The request's parts are anonymous structs in the generated contract, so
// each mapper takes the whole request and maps its one part; an absent list
// stays nil, as DecodeRequest leaves it (Normalize fills it).

func fromTaskAPI(b *api.PacketRequest) *ctxtype.Task {
	t := b.Task
	if t == nil {
		return nil
	}
	return &ctxtype.Task{TaskID: deref(t.TaskId), StepID: deref(t.StepId), StepAttempt: deref(t.StepAttempt),
		Objective: deref(t.Objective), AllowedOutcomes: deref(t.AllowedOutcomes), PermissionCeiling: deref(t.PermissionCeiling)}
}

func fromPlanAPI(b *api.PacketRequest) *ctxtype.Plan {
	p := b.Plan
	if p == nil {
		return nil
	}
	return &ctxtype.Plan{PlanHash: deref(p.PlanHash), ActiveStepIndex: deref(p.ActiveStepIndex),
		TotalSteps: deref(p.TotalSteps), SettledDecisions: deref(p.SettledDecisions)}
}

func fromCriteriaAPI(b *api.PacketRequest) []ctxtype.Criterion {
	if b.AcceptanceCriteria == nil {
		return nil
	}
	out := make([]ctxtype.Criterion, len(*b.AcceptanceCriteria))
	for i, c := range *b.AcceptanceCriteria {
		out[i] = ctxtype.Criterion{ID: deref(c.Id), Description: deref(c.Description), VerificationKind: deref(c.VerificationKind),
			TargetRef: deref(c.TargetRef), Required: deref(c.Required)}
	}
	return out
}

func fromHistoryAPI(b *api.PacketRequest) []ctxtype.Message {
	if b.History == nil {
		return nil
	}
	out := make([]ctxtype.Message, len(*b.History))
	for i, m := range *b.History {
		out[i] = ctxtype.Message{Role: deref(m.Role), Author: deref(m.Author), Content: deref(m.Content)}
	}
	return out
}

func fromToolResultsAPI(b *api.PacketRequest) []ctxtype.ToolResult {
	if b.ToolResults == nil {
		return nil
	}
	out := make([]ctxtype.ToolResult, len(*b.ToolResults))
	for i, t := range *b.ToolResults {
		out[i] = ctxtype.ToolResult{Tool: deref(t.Tool), Status: deref(t.Status), Content: deref(t.Content)}
	}
	return out
}
