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
	as, err := s.agents.List(ctx, deref(r.Params.Cursor), limit+1)
	if err != nil {
		return nil, err
	}
	out := api.ListAgents200JSONResponse{Data: []api.Agent{}}
	for i, a := range as {
		if i == limit {
			next := as[i-1].ID
			out.NextCursor = &next
			break
		}
		out.Data = append(out.Data, toAgent(a))
	}
	return out, nil
}

// RevokeAgent implements api.StrictServerInterface.
func (s *Server) RevokeAgent(ctx context.Context, r api.RevokeAgentRequestObject) (api.RevokeAgentResponseObject, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	a, err := s.agents.Revoke(ctx, r.Id)
	if err != nil {
		return nil, err
	}
	return api.RevokeAgent200JSONResponse(toAgent(a)), nil
}
