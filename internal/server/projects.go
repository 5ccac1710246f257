package server

import (
	"context"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
)

func toProject(p store.Project) api.Project {
	return api.Project{Project: p.Name, Description: p.Description, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
}

// PutProject implements api.StrictServerInterface.
func (s *Server) PutProject(ctx context.Context, r api.PutProjectRequestObject) (api.PutProjectResponseObject, error) {
	var desc string
	if r.Body != nil && r.Body.Description != nil {
		desc = *r.Body.Description
	}
	var (
		p       store.Project
		created bool
	)
	err := s.write(ctx, func(tx *store.Tx) error {
		var err error
		p, created, err = s.projects.PutTx(ctx, tx, agentFrom(ctx), r.Project, desc)
		return err
	})
	if err != nil {
		return nil, err
	}
	if created {
		return api.PutProject201JSONResponse(toProject(p)), nil
	}
	return api.PutProject200JSONResponse(toProject(p)), nil
}

var projectsListing = page.Listing("projects")

// ListProjects implements api.StrictServerInterface.
func (s *Server) ListProjects(ctx context.Context, r api.ListProjectsRequestObject) (api.ListProjectsResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	after, err := page.DecodeAfter(deref(r.Params.Cursor), projectsListing)
	if err != nil {
		return nil, err
	}
	ps, err := s.projects.List(ctx, agentFrom(ctx), after, limit+1)
	if err != nil {
		return nil, err
	}
	out := api.ListProjects200JSONResponse{Data: []api.Project{}}
	for i, p := range ps {
		if i == limit {
			next := page.Encode(projectsListing, page.After{After: ps[i-1].Name})
			out.NextCursor = &next
			break
		}
		out.Data = append(out.Data, toProject(p))
	}
	return out, nil
}
