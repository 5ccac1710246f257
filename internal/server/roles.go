package server

import (
	"context"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/rolepolicy"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/token"
)

func fromRolePolicyAPI(b *api.RolePolicyWrite) ctxtype.RolePolicy {
	p := ctxtype.RolePolicy{TokenBudget: b.TokenBudget, Max: deref(b.Max), Format: ctxtype.Format(deref(b.Format)),
		Tokenizer: token.Tokenizer(deref(b.Tokenizer))}
	if b.Kinds != nil {
		p.Kinds = *b.Kinds
		if p.Kinds == nil {
			p.Kinds = []string{} // sent, and empty: refused as such
		}
	}
	if b.MaxPerSection != nil {
		p.MaxPerSection = *b.MaxPerSection
	}
	return p
}

func toRolePolicyLayer(r *store.RolePolicy) *api.RolePolicyLayer {
	if r == nil {
		return nil
	}
	p := r.Policy
	out := &api.RolePolicyLayer{Project: r.Project, Version: r.Version, CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy,
		UpdatedAt: r.UpdatedAt, UpdatedBy: r.UpdatedBy, TokenBudget: p.TokenBudget, Max: ptrIf(p.Max),
		Format: ptrIf(string(p.Format)), Tokenizer: ptrIf(string(p.Tokenizer))}
	if len(p.Kinds) > 0 {
		out.Kinds = &p.Kinds
	}
	if len(p.MaxPerSection) > 0 {
		out.MaxPerSection = &p.MaxPerSection
	}
	return out
}

func toRolePolicy(v rolepolicy.View) api.RolePolicy {
	r := v.Resolved()
	out := api.RolePolicy{Project: v.Project, Role: v.Role, TokenBudget: *r.TokenBudget, Max: r.Max, Kinds: r.Kinds,
		MaxPerSection: r.MaxPerSection, Format: string(r.Format), Tokenizer: string(r.Tokenizer), Layers: map[string]string{},
		Own: toRolePolicyLayer(v.Own), Shared: toRolePolicyLayer(v.Shared)}
	for _, m := range ctxtype.PolicyMembers {
		out.Layers[m] = v.LayerOf(m)
	}
	return out
}

// toPacketRolePolicy is the policy a packet was assembled under, nil when
// its role had none.
func toPacketRolePolicy(a *ctxtype.AppliedPolicy) *api.PacketRolePolicy {
	if a == nil {
		return nil
	}
	out := &api.PacketRolePolicy{Role: a.Role, Layers: a.Layers, TokenBudget: a.TokenBudget, Max: ptrIf(a.Max),
		Format: ptrIf(string(a.Format)), Tokenizer: ptrIf(string(a.Tokenizer)), RequestedTokenBudget: ptrIf(a.RequestedBudget)}
	if len(a.Kinds) > 0 {
		out.Kinds = &a.Kinds
	}
	if len(a.MaxPerSection) > 0 {
		out.MaxPerSection = &a.MaxPerSection
	}
	if len(a.Request) > 0 {
		out.Request = &a.Request
	}
	return out
}

// GetRolePolicy implements api.StrictServerInterface.
func (s *Server) GetRolePolicy(ctx context.Context, r api.GetRolePolicyRequestObject) (api.GetRolePolicyResponseObject, error) {
	v, err := s.rolePolicies.Get(ctx, agentFrom(ctx), r.Project, r.Role)
	if err != nil {
		return nil, err
	}
	return api.GetRolePolicy200JSONResponse(toRolePolicy(v)), nil
}

// PutRolePolicy implements api.StrictServerInterface.
func (s *Server) PutRolePolicy(ctx context.Context, r api.PutRolePolicyRequestObject) (api.PutRolePolicyResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	var v rolepolicy.View
	err = s.write(ctx, func(tx *store.Tx) error {
		var err error
		v, err = s.rolePolicies.PutTx(ctx, tx, agentFrom(ctx), r.Project, r.Role, fromRolePolicyAPI(body))
		return err
	})
	if err != nil {
		return nil, err
	}
	return api.PutRolePolicy200JSONResponse(toRolePolicy(v)), nil
}

// DeleteRolePolicy implements api.StrictServerInterface.
func (s *Server) DeleteRolePolicy(ctx context.Context, r api.DeleteRolePolicyRequestObject) (api.DeleteRolePolicyResponseObject, error) {
	var v rolepolicy.View
	err := s.write(ctx, func(tx *store.Tx) error {
		var err error
		v, err = s.rolePolicies.DeleteTx(ctx, tx, agentFrom(ctx), r.Project, r.Role)
		return err
	})
	if err != nil {
		return nil, err
	}
	return api.DeleteRolePolicy200JSONResponse(toRolePolicy(v)), nil
}

var rolePoliciesListing = page.Listing("role_policies")

// ListRolePolicies implements api.StrictServerInterface.
func (s *Server) ListRolePolicies(ctx context.Context, r api.ListRolePoliciesRequestObject) (api.ListRolePoliciesResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	after, err := page.DecodeAfter(deref(r.Params.Cursor), rolePoliciesListing)
	if err != nil {
		return nil, err
	}
	vs, err := s.rolePolicies.List(ctx, agentFrom(ctx), r.Project, after, limit+1)
	if err != nil {
		return nil, err
	}
	out := api.ListRolePolicies200JSONResponse{Data: []api.RolePolicy{}}
	for i, v := range vs {
		if i == limit {
			next := page.Encode(rolePoliciesListing, page.After{After: vs[i-1].Role})
			out.NextCursor = &next
			break
		}
		out.Data = append(out.Data, toRolePolicy(v))
	}
	return out, nil
}
