package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// UpdateParams is a change to an agent: nil leaves a member as it is.
type UpdateParams struct {
	Name, Role   *string
	Permission   *Permission
	Projects     []string // nil: unchanged
	MaxAuthority *string
}

// grants refuses a ceiling above the caller's own (403
// authority_exceeds_grant at /max_authority): an admin hands out only the
// authority it holds.
func (a *Agent) grants(maxAuthority string) error {
	if authorityRank[maxAuthority] > authorityRank[a.Ceiling()] {
		return &GrantError{Fields: []validation.Field{{Pointer: "/max_authority", Code: "authority_exceeds_grant",
			Detail: fmt.Sprintf("max_authority %q exceeds your own max_authority %q; an admin grants at most its own", maxAuthority, a.Ceiling())}}}
	}
	return nil
}

// Update changes an agent on behalf of caller, an admin whose scope covers
// the agent's scope before and after and whose own ceiling covers the new
// one. The row is written whole, with its ceiling explicit, so an agent
// made before ceilings existed gets the one it had by default. A revoked
// agent cannot change (409): its key is refused for good.
func (s *Service) Update(ctx context.Context, caller *Agent, id string, p UpdateParams) (out *Agent, err error) {
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		out, err = s.UpdateTx(ctx, tx, caller, id, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.Forget(id)
	return out, nil
}

// Forget drops what this process keeps of an agent, for a change committed
// by a caller's own transaction (UpdateTx): it then takes effect here at
// once, not when the notification comes back.
func (s *Service) Forget(id string) { s.keys.forget(id, time.Now()) }

// UpdateTx is Update inside the caller's transaction; call Forget after it
// commits.
func (s *Service) UpdateTx(ctx context.Context, tx *store.Tx, caller *Agent, id string, p UpdateParams) (*Agent, error) {
	if err := requireAdmin(caller); err != nil {
		return nil, err
	}
	var out *Agent
	err := func() error {
		row, err := tx.AgentForUpdate(ctx, id)
		if err != nil {
			return noAgent(id, err)
		}
		cur := fromRow(row)
		if !caller.Covers(cur.Projects) {
			return fmt.Errorf("%w: agent %s is outside your scope", fault.ErrForbidden, id)
		}
		if cur.RevokedAt != nil {
			return fmt.Errorf("%w: agent %s is revoked; make a new agent instead", fault.ErrConflict, id)
		}
		next, err := p.apply(cur)
		if err != nil {
			return err
		}
		if !caller.Covers(next.Projects) {
			return fmt.Errorf("%w: an admin grants only projects in its own scope", fault.ErrForbidden)
		}
		if err := caller.grants(next.MaxAuthority); err != nil {
			return err
		}
		updated, err := tx.AgentUpdate(ctx, store.AgentUpdateParams{
			ID: id, Name: next.Name, Role: next.Role, Permission: string(next.Permission),
			Projects: next.Projects, MaxAuthority: next.MaxAuthority,
		})
		out = fromRow(updated)
		return err
	}()
	if err != nil {
		return nil, fmt.Errorf("update agent %s: %w", id, err)
	}
	return out, nil
}

// apply is cur with p's members, validated.
func (p *UpdateParams) apply(cur *Agent) (*Agent, error) {
	next := *cur
	var errs validation.List
	if p.Name != nil {
		next.Name = *p.Name
	}
	if p.Role != nil {
		next.Role = *p.Role
	}
	if p.Permission != nil {
		next.Permission = *p.Permission
	}
	if p.Projects != nil {
		next.Projects = p.Projects
	}
	if p.MaxAuthority != nil {
		if !ValidAuthority(*p.MaxAuthority) {
			errs.Add("/max_authority", "enum", "max_authority must be policy, instruction, evidence or hypothesis, not %q", *p.MaxAuthority)
		}
		next.MaxAuthority = *p.MaxAuthority
	}
	c := CreateParams{Name: next.Name, Role: next.Role, Permission: next.Permission, Projects: next.Projects}
	var verr *validation.Error
	if errors.As(c.validate(), &verr) {
		for _, f := range verr.Fields {
			errs.Add(f.Pointer, f.Code, "%s", f.Detail)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return &next, nil
}
