package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/store"
)

// toProposal is a proposal as the contract has it; mayPromote, when not
// nil, the roles that may promote it now.
func toProposal(p item.Proposal, mayPromote []string) api.Proposal {
	f := p.Fields
	it := toItem(&ctxtype.Version{Fields: f})
	out := api.Proposal{
		Project: p.Project, Key: p.Key, Proposal: int32(p.Number), Status: p.Status(), BaseVersion: int32(p.BaseVersion),
		Cause: p.Cause, CauseDetail: ptrIf(p.CauseDetail), ProposedBy: p.CreatedBy, ProposedByName: p.CreatedByName,
		ProposedByRole: p.CreatedByRole, CreatedAt: p.CreatedAt, PromoterRoles: p.PromoterRoles,
		Kind: it.Kind, Source: it.Source, Title: it.Title, Summary: it.Summary, Content: it.Content, Priority: it.Priority,
		Authority: it.Authority, Confidence: it.Confidence, StateKey: it.StateKey, ValidFrom: it.ValidFrom,
		ValidUntil: it.ValidUntil, Slot: it.Slot, Trigger: it.Trigger, Roles: it.Roles, Template: it.Template,
		Metadata: it.Metadata, Provenance: it.Provenance,
	}
	if out.PromoterRoles == nil {
		out.PromoterRoles = []string{}
	}
	if mayPromote != nil {
		out.MayPromote = &mayPromote
	}
	if d := p.Decision; d != nil {
		out.Decision = &api.ProposalDecision{Decision: d.Decision, Reason: d.Reason, Rebased: d.Rebased,
			DecidedBy: d.CreatedBy, DecidedByRole: d.CreatedByRole, DecidedAt: d.CreatedAt}
		if d.Version > 0 {
			v := int32(d.Version)
			out.Decision.Version = &v
		}
		if d.SupersededVersion > 0 {
			v := int32(d.SupersededVersion)
			out.Decision.SupersededVersion = &v
		}
	}
	return out
}

// toItemView is an item's version with its proposal links; withPending
// says the answer is of the current version's GET, which counts the
// pending proposals.
func toItemView(v item.ItemView, withPending bool) api.Item {
	out := toItem(v.Version)
	if withPending {
		n := v.Pending
		out.PendingProposals = &n
	}
	if l := v.PromotedFrom; l != nil {
		out.PromotedFrom = &struct {
			Proposal   int32  `json:"proposal"`
			ProposedBy string `json:"proposed_by"`
		}{Proposal: int32(l.Proposal), ProposedBy: l.ProposedBy}
	}
	if l := v.SupersededBy; l != nil {
		out.SupersededBy = &struct {
			At       time.Time `json:"at"`
			Proposal int32     `json:"proposal"`
			Version  int32     `json:"version"`
		}{At: l.At, Proposal: int32(l.Proposal), Version: int32(l.Version)}
	}
	return out
}

// ListProposals implements api.StrictServerInterface.
func (s *Server) ListProposals(ctx context.Context, r api.ListProposalsRequestObject) (api.ListProposalsResponseObject, error) {
	out, err := s.listProposals(ctx, r.Project, "", r.Params.Status, r.Params.Limit, r.Params.Cursor)
	if err != nil {
		return nil, err
	}
	return api.ListProposals200JSONResponse(out), nil
}

// ListItemProposals implements api.StrictServerInterface.
func (s *Server) ListItemProposals(ctx context.Context, r api.ListItemProposalsRequestObject) (api.ListItemProposalsResponseObject, error) {
	out, err := s.listProposals(ctx, r.Project, r.Key, r.Params.Status, r.Params.Limit, r.Params.Cursor)
	if err != nil {
		return nil, err
	}
	return api.ListItemProposals200JSONResponse(out), nil
}

func (s *Server) listProposals(ctx context.Context, proj, key string, status *string, limit *int64, cursor *string) (api.ProposalList, error) {
	n, err := pageLimit(limit)
	if err != nil {
		return api.ProposalList{}, err
	}
	ps, next, err := s.items.Proposals(ctx, agentFrom(ctx), proj, item.ProposalListParams{Key: key, Status: deref(status),
		Cursor: deref(cursor), Limit: n})
	if err != nil {
		return api.ProposalList{}, err
	}
	out := api.ProposalList{Data: make([]api.Proposal, len(ps)), NextCursor: ptrIf(next)}
	for i, p := range ps {
		out.Data[i] = toProposal(p, nil)
	}
	return out, nil
}

// GetItemProposal implements api.StrictServerInterface.
func (s *Server) GetItemProposal(ctx context.Context, r api.GetItemProposalRequestObject) (api.GetItemProposalResponseObject, error) {
	p, may, err := s.items.ProposalGet(ctx, agentFrom(ctx), r.Project, r.Key, int(r.Proposal))
	if err != nil {
		return nil, err
	}
	if p.Decision != nil {
		may = nil
	}
	return api.GetItemProposal200JSONResponse(toProposal(p, may)), nil
}

// PromoteProposal implements api.StrictServerInterface.
func (s *Server) PromoteProposal(ctx context.Context, r api.PromoteProposalRequestObject) (api.PromoteProposalResponseObject, error) {
	var dp item.DecideParams
	if r.Body != nil {
		dp = item.DecideParams{Reason: deref(r.Body.Reason), Rebase: deref(r.Body.Rebase)}
	}
	var d item.Decided
	err := s.write(ctx, func(tx *store.Tx) error {
		var err error
		d, err = s.items.PromoteTx(ctx, tx, agentFrom(ctx), r.Project, r.Key, int(r.Proposal), dp)
		return err
	})
	if err != nil {
		return nil, err
	}
	return api.PromoteProposal200JSONResponse{Proposal: toProposal(d.Proposal, nil),
		Item: toItemView(item.ItemView{Version: d.Version, PromotedFrom: d.Link()}, false)}, nil
}

// RejectProposal implements api.StrictServerInterface.
func (s *Server) RejectProposal(ctx context.Context, r api.RejectProposalRequestObject) (api.RejectProposalResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	var p item.Proposal
	err = s.write(ctx, func(tx *store.Tx) error {
		var err error
		p, err = s.items.RejectTx(ctx, tx, agentFrom(ctx), r.Project, r.Key, int(r.Proposal), body.Reason)
		return err
	})
	if err != nil {
		return nil, err
	}
	return api.RejectProposal200JSONResponse(toProposal(p, nil)), nil
}

// proposalEventData is a proposal event's data in the handoff event
// stream (type "proposal"; a handoff event's data has no type).
type proposalEventData struct {
	Type          string    `json:"type"`
	Seq           int64     `json:"seq"`
	Event         string    `json:"event"`
	Key           string    `json:"key"`
	Proposal      int       `json:"proposal"`
	Authority     string    `json:"authority"`
	PromoterRoles []string  `json:"promoter_roles"`
	Author        string    `json:"author"`
	AuthorRole    string    `json:"author_role"`
	Actor         string    `json:"actor"`
	ActorRole     string    `json:"actor_role"`
	Reason        string    `json:"reason"`
	Version       *int      `json:"version,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// sendProposalEvent writes a proposal event to a stream.
func sendProposalEvent(out *sseWriter, p *store.ProposalEvent) error {
	d := proposalEventData{Type: "proposal", Seq: p.Seq, Event: p.Event, Key: p.Key, Proposal: p.Proposal, Authority: p.Authority,
		PromoterRoles: p.PromoterRoles, Author: p.Author, AuthorRole: p.AuthorRole, Actor: p.Actor, ActorRole: p.ActorRole,
		Reason: p.Reason, CreatedAt: p.CreatedAt}
	if p.Version > 0 {
		d.Version = &p.Version
	}
	b, _ := json.Marshal(d)
	return out.send("id: %d\nevent: %s\ndata: %s\n\n", p.Seq, p.Event, b)
}

// toPending is what a why answer says of an item's pending proposals.
func toPending(p *item.Pending) *struct {
	Count     int      `json:"count"`
	Promoters []string `json:"promoters"`
	Proposals []int    `json:"proposals"`
} {
	if p == nil {
		return nil
	}
	return &struct {
		Count     int      `json:"count"`
		Promoters []string `json:"promoters"`
		Proposals []int    `json:"proposals"`
	}{Count: p.Count, Promoters: p.Promoters, Proposals: p.Numbers}
}
