package server

import (
	"context"
	"fmt"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/fault"
)

// GetHealthz implements api.StrictServerInterface: the process answers.
func (s *Server) GetHealthz(ctx context.Context, _ api.GetHealthzRequestObject) (api.GetHealthzResponseObject, error) {
	return api.GetHealthz200JSONResponse{Status: "ok"}, nil
}

// GetReadyz implements api.StrictServerInterface: the database answers and
// its schema is current.
func (s *Server) GetReadyz(ctx context.Context, _ api.GetReadyzRequestObject) (api.GetReadyzResponseObject, error) {
	if err := s.store.Ping(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
	}
	if s.ready != nil {
		if err := s.ready(ctx); err != nil {
			return nil, problem(503, "unavailable", "%v", err)
		}
	}
	return api.GetReadyz200JSONResponse{Status: "ready"}, nil
}
