package server

import (
	"context"
	"fmt"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

func toAgent(a *auth.Agent) api.Agent {
	var rev = a.RevokedAt
	if rev != nil {
		u := rev.UTC()
		rev = &u
	}
	return api.Agent{Id: a.ID, Name: a.Name, Role: a.Role, Permission: string(a.Permission), Projects: a.Projects, CreatedAt: a.CreatedAt.UTC(), RevokedAt: rev}
}

func requireAdmin(ctx context.Context) (*auth.Agent, error) {
	a := agentFrom(ctx)
	if !a.IsAdmin() {
		return nil, fmt.Errorf("%w: only admins manage agents", auth.ErrForbidden)
	}
	return a, nil
}

// CreateAgent implements api.StrictServerInterface.
func (s *Server) CreateAgent(ctx context.Context, r api.CreateAgentRequestObject) (api.CreateAgentResponseObject, error) {
	caller, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	if !caller.Covers(body.Projects) {
		return nil, fmt.Errorf("%w: an admin grants only projects in its own scope", auth.ErrForbidden)
	}
	a, key, err := s.agents.Create(ctx, auth.CreateParams{
		Name: body.Name, Role: body.Role, Permission: auth.Permission(body.Permission), Projects: body.Projects, CreatedBy: caller.ID,
	})
	if err != nil {
		return nil, err
	}
	v := toAgent(a)
	return api.CreateAgent201JSONResponse{
		Id: v.Id, Name: v.Name, Role: v.Role, Permission: v.Permission, Projects: v.Projects, CreatedAt: v.CreatedAt, Key: key,
	}, nil
}

// ListAgents implements api.StrictServerInterface.
func (s *Server) ListAgents(ctx context.Context, r api.ListAgentsRequestObject) (api.ListAgentsResponseObject, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	caller := agentFrom(ctx)
	out := api.ListAgents200JSONResponse{Data: []api.Agent{}}
	// A scoped admin sees the agents within its scope; pages are filled
	// from as many database pages as that takes.
	after := deref(r.Params.Cursor)
	for {
		as, err := s.agents.List(ctx, after, limit+1)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			if !caller.Covers(a.Projects) {
				continue
			}
			if len(out.Data) == limit {
				next := out.Data[len(out.Data)-1].Id
				out.NextCursor = &next
				return out, nil
			}
			out.Data = append(out.Data, toAgent(a))
		}
		if len(as) <= limit {
			return out, nil
		}
		after = as[len(as)-1].ID
	}
}

// RevokeAgent implements api.StrictServerInterface.
func (s *Server) RevokeAgent(ctx context.Context, r api.RevokeAgentRequestObject) (api.RevokeAgentResponseObject, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	caller := agentFrom(ctx)
	if !caller.AllScope() {
		target, err := s.agents.Get(ctx, r.Id)
		if err != nil {
			return nil, err
		}
		if !caller.Covers(target.Projects) {
			return nil, fmt.Errorf("%w: agent %s is outside your scope", auth.ErrForbidden, r.Id)
		}
	}
	a, err := s.agents.Revoke(ctx, r.Id)
	if err != nil {
		return nil, err
	}
	return api.RevokeAgent200JSONResponse(toAgent(a)), nil
}
