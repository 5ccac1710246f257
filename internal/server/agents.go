package server

import (
	"context"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/store"
)

func toAgent(a *auth.Agent) api.Agent {
	var rev = a.RevokedAt
	if rev != nil {
		u := rev.UTC()
		rev = &u
	}
	return api.Agent{Id: a.ID, Name: a.Name, Role: a.Role, Permission: string(a.Permission), Projects: a.Projects,
		MaxAuthority: a.MaxAuthority, CreatedAt: a.CreatedAt.UTC(), RevokedAt: rev}
}

// CreateAgent implements api.StrictServerInterface.
func (s *Server) CreateAgent(ctx context.Context, r api.CreateAgentRequestObject) (api.CreateAgentResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	var (
		a   *auth.Agent
		key string
	)
	err = s.write(ctx, func(tx *store.Tx) error {
		a, key, err = s.agents.CreateTx(ctx, tx, agentFrom(ctx), auth.CreateParams{
			Name: body.Name, Role: body.Role, Permission: auth.Permission(body.Permission), Projects: body.Projects,
			MaxAuthority: string(deref(body.MaxAuthority)),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	v := toAgent(a)
	return api.CreateAgent201JSONResponse{
		Id: v.Id, Name: v.Name, Role: v.Role, Permission: v.Permission, Projects: v.Projects, MaxAuthority: v.MaxAuthority,
		CreatedAt: v.CreatedAt, Key: key,
	}, nil
}

// ListAgents implements api.StrictServerInterface.
func (s *Server) ListAgents(ctx context.Context, r api.ListAgentsRequestObject) (api.ListAgentsResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	as, next, err := s.agents.List(ctx, agentFrom(ctx), deref(r.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListAgents200JSONResponse{Data: []api.Agent{}}
	for _, a := range as {
		out.Data = append(out.Data, toAgent(a))
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

// RevokeAgent implements api.StrictServerInterface.
func (s *Server) RevokeAgent(ctx context.Context, r api.RevokeAgentRequestObject) (api.RevokeAgentResponseObject, error) {
	a, err := s.agents.Revoke(ctx, agentFrom(ctx), r.Id)
	if err != nil {
		return nil, err
	}
	return api.RevokeAgent200JSONResponse(toAgent(a)), nil
}

// UpdateAgent implements api.StrictServerInterface.
func (s *Server) UpdateAgent(ctx context.Context, r api.UpdateAgentRequestObject) (api.UpdateAgentResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	p := auth.UpdateParams{Name: body.Name, Role: body.Role, MaxAuthority: (*string)(body.MaxAuthority)}
	if body.Permission != nil {
		perm := auth.Permission(*body.Permission)
		p.Permission = &perm
	}
	if body.Projects != nil {
		p.Projects = *body.Projects
	}
	var a *auth.Agent
	err = s.write(ctx, func(tx *store.Tx) error {
		a, err = s.agents.UpdateTx(ctx, tx, agentFrom(ctx), r.Id, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.agents.Forget(a.ID)
	return api.UpdateAgent200JSONResponse(toAgent(a)), nil
}
