package project

import (
	"context"
	"fmt"

	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// What an item write that claims more authority than its writer's grant
// or its source's ceiling allow becomes in a project (its
// on_excess_authority): refused with 403 authority_exceeds_grant, as
// always, or stored as a proposal that another principal promotes
// (docs/proposals.md).
const (
	ExcessRefuse  = "refuse"
	ExcessPropose = "propose"
)

// PutParams are the members of a project's PUT. A nil OnExcessAuthority
// keeps the project's (refuse for a new project): a PUT that only
// changes the description does not reopen or close the gate.
type PutParams struct {
	Description       string
	OnExcessAuthority *string
}

func (pp PutParams) check(errs *validation.List) {
	if v := pp.OnExcessAuthority; v != nil && *v != ExcessRefuse && *v != ExcessPropose {
		errs.Add("/on_excess_authority", "enum", "on_excess_authority must be refuse or propose, not %s", validation.QuoteShort(*v))
	}
}

// OnExcessAuthority is what a write over its grant becomes in project, as
// committed: ExcessRefuse or ExcessPropose. It is read only when a write
// is over its grant, so the write path pays nothing for it otherwise.
func (s *Service) OnExcessAuthority(ctx context.Context, db store.DB, project string) (string, error) {
	p, err := db.ProjectGet(ctx, project)
	if err != nil {
		return "", fmt.Errorf("project %s: %w", project, err)
	}
	if p.OnExcessAuthority == "" {
		return ExcessRefuse, nil
	}
	return p.OnExcessAuthority, nil
}
