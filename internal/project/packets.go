package project

import (
	"context"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/validation"
)

// PacketsProject is the project whose packets a question about an item
// of proj reads (the reverse lookup, the ledger): a project's own item's,
// or for a _shared item the one named (which the caller must see) or the
// caller's only project. A _shared item is used by every project's
// packets, and a caller must not learn of those of projects it may not
// see.
func (s *Service) PacketsProject(ctx context.Context, agent *auth.Agent, proj, named string) (string, error) {
	if proj != ctxtype.SharedProject {
		if named != "" && named != proj {
			return "", validation.One("project", "invalid", "project names the project whose packets to list for a _shared item; for an item of %s it is %s or absent", proj, proj)
		}
		return proj, nil
	}
	if named != "" {
		if named == ctxtype.SharedProject {
			return "", validation.One("project", "invalid", "no packets are assembled in _shared: name the project whose packets to list")
		}
		if err := s.Authorize(ctx, agent, named, auth.ReadOnly); err != nil {
			return "", err
		}
		return named, nil
	}
	visible, err := s.List(ctx, agent, "", 2+1)
	if err != nil {
		return "", err
	}
	var mine []string
	for _, vp := range visible {
		if vp.Name != ctxtype.SharedProject {
			mine = append(mine, vp.Name)
		}
	}
	switch len(mine) {
	case 1:
		return mine[0], nil
	case 0:
		return "", validation.One("project", "required", "the caller may see no project whose packets could have used this _shared item")
	}
	return "", validation.One("project", "required", "a _shared item is used by the packets of every project: name the one to list with ?project=")
}
