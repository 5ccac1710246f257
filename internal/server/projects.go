package server

import (
	"context"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
)

func toProject(p store.Project) api.Project {
	out := api.Project{Project: p.Name, Description: p.Description, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(), ArchivedBy: p.ArchivedBy,
		OnExcessAuthority: p.OnExcessAuthority}
	if out.OnExcessAuthority == "" {
		out.OnExcessAuthority = project.ExcessRefuse
	}
	if p.ArchivedAt != nil {
		at := p.ArchivedAt.UTC()
		out.ArchivedAt = &at
	}
	return out
}

// GetProject implements api.StrictServerInterface.
func (s *Server) GetProject(ctx context.Context, r api.GetProjectRequestObject) (api.GetProjectResponseObject, error) {
	p, err := s.projects.Get(ctx, agentFrom(ctx), r.Project)
	if err != nil {
		return nil, err
	}
	return api.GetProject200JSONResponse(toProject(p)), nil
}

// ArchiveProject implements api.StrictServerInterface.
func (s *Server) ArchiveProject(ctx context.Context, r api.ArchiveProjectRequestObject) (api.ArchiveProjectResponseObject, error) {
	var p store.Project
	err := s.write(ctx, func(tx *store.Tx) error {
		var err error
		p, err = s.projects.ArchiveTx(ctx, tx, agentFrom(ctx), r.Project)
		return err
	})
	if err != nil {
		return nil, err
	}
	return api.ArchiveProject200JSONResponse(toProject(p)), nil
}

// RestoreProject implements api.StrictServerInterface.
func (s *Server) RestoreProject(ctx context.Context, r api.RestoreProjectRequestObject) (api.RestoreProjectResponseObject, error) {
	var p store.Project
	err := s.write(ctx, func(tx *store.Tx) error {
		var err error
		p, err = s.projects.RestoreTx(ctx, tx, agentFrom(ctx), r.Project)
		return err
	})
	if err != nil {
		return nil, err
	}
	return api.RestoreProject200JSONResponse(toProject(p)), nil
}

// PutProject implements api.StrictServerInterface.
func (s *Server) PutProject(ctx context.Context, r api.PutProjectRequestObject) (api.PutProjectResponseObject, error) {
	var pp project.PutParams
	if r.Body != nil {
		pp = project.PutParams{Description: deref(r.Body.Description), OnExcessAuthority: r.Body.OnExcessAuthority}
	}
	var (
		p       store.Project
		created bool
	)
	err := s.write(ctx, func(tx *store.Tx) error {
		var err error
		p, created, err = s.projects.PutWithTx(ctx, tx, agentFrom(ctx), r.Project, pp)
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
	list := s.projects.List
	if deref(r.Params.Archived) {
		list = s.projects.ListArchived
	}
	ps, err := list(ctx, agentFrom(ctx), after, limit+1)
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
