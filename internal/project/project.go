// Package project manages tenants and answers the first question of every
// request: may this agent touch this project, and how? Scope is checked before
// permission, so a project outside an agent's scope answers exactly like one
// that does not exist.
package project

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// ErrNotFound means the project does not exist or is outside the caller's scope.
var ErrNotFound = fmt.Errorf("project %w", fault.ErrNotFound)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`) // the same rule as agent scopes in package auth

// CheckName refuses, as parameter or pointer param, a name no project can
// have.
func CheckName(param, name string) error {
	if !nameRE.MatchString(name) {
		return validation.One(param, "format", "project names match [A-Za-z0-9][A-Za-z0-9._-]{0,99}")
	}
	return nil
}

// Service manages projects.
type Service struct {
	store *store.Store
	// known holds the projects seen to exist through committed reads.
	// Projects are never deleted (archiving keeps them), so a project once
	// seen stays; one not found is never kept, so a new project is found
	// at once. Whether one takes writes is not cached: each write asks in
	// its transaction (Writable).
	known sync.Map
}

// NewService returns a project service.
func NewService(st *store.Store) *Service { return &Service{store: st} }

// exists reports whether the project exists; other failures are errors.
func exists(ctx context.Context, db store.DB, name string) (bool, error) {
	_, err := db.ProjectGet(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fault.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("get project: %w", err)
}

// Authorize checks that agent may act on project with permission p: a
// project out of scope or missing is ErrNotFound, a missing permission
// fault.ErrForbidden.
//
// It reads through the pool, so what it finds is committed: a project found
// is remembered for the process (every request asks). A request already
// authorized for as much (AuthorizeRequest) is not decided again.
func (s *Service) Authorize(ctx context.Context, agent *auth.Agent, project string, p auth.Permission) error {
	if decided(ctx, agent, project, p) {
		return nil
	}
	if _, ok := s.known.Load(project); ok && agent.InScope(project) {
		return permit(agent, project, p)
	}
	err := s.AuthorizeIn(ctx, s.store.DB, agent, project, p)
	if err == nil || errors.Is(err, fault.ErrForbidden) { // it exists
		s.known.Store(project, struct{}{})
	}
	return err
}

// AuthorizeIn is Authorize reading through db: a caller inside a
// transaction passes tx.DB, so it never waits for a second connection
// while it holds one.
func (s *Service) AuthorizeIn(ctx context.Context, db store.DB, agent *auth.Agent, project string, p auth.Permission) error {
	if decided(ctx, agent, project, p) {
		return nil
	}
	if !agent.InScope(project) {
		return fmt.Errorf("%w: %s", ErrNotFound, project)
	}
	if _, ok := s.known.Load(project); ok { // committed once, never deleted
		return permit(agent, project, p)
	}
	if ok, err := exists(ctx, db, project); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, project)
	}
	return permit(agent, project, p)
}

// permit is the permission half of authorizing, once scope and existence
// are settled.
func permit(agent *auth.Agent, project string, p auth.Permission) error {
	if !agent.Can(project, p) {
		return fmt.Errorf("%w: %s permission needed on project %s", fault.ErrForbidden, p, project)
	}
	return nil
}

// Put creates or updates a project (admin only) and reports whether it was created.
func (s *Service) Put(ctx context.Context, agent *auth.Agent, name, description string) (p store.Project, created bool, err error) {
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		p, created, err = s.PutTx(ctx, tx, agent, name, description)
		return err
	})
	return p, created, err
}

// PutTx is Put inside the caller's transaction.
func (s *Service) PutTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, name, description string) (store.Project, bool, error) {
	return s.PutWithTx(ctx, tx, agent, name, PutParams{Description: description})
}

// PutWithTx is PutTx with every member a PUT may set.
func (s *Service) PutWithTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, name string, pp PutParams) (store.Project, bool, error) {
	description := pp.Description
	// Scope first: a project out of scope does not exist for the caller
	// (an admin scoped to some projects creates and changes only those).
	if !agent.InScope(name) {
		return store.Project{}, false, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if !agent.IsAdmin() {
		if ok, err := exists(ctx, tx.DB, name); err != nil {
			return store.Project{}, false, err
		} else if !ok {
			return store.Project{}, false, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return store.Project{}, false, fmt.Errorf("%w: only admins create or change projects", fault.ErrForbidden)
	}
	if name == auth.SharedProject {
		return store.Project{}, false, validation.One("project", "reserved", "%s is reserved", auth.SharedProject)
	}
	if err := CheckName("project", name); err != nil {
		return store.Project{}, false, err
	}
	var errs validation.List
	limits.Chars(&errs, "/description", description, limits.Get().Description)
	pp.check(&errs)
	if err := errs.Err(); err != nil {
		return store.Project{}, false, err
	}
	p, created, err := tx.ProjectUpsert(ctx, name, description, pp.OnExcessAuthority)
	if err != nil {
		return store.Project{}, false, fmt.Errorf("put project: %w", err)
	}
	return p, created, nil
}

// List returns one page of the live projects the agent may see, by name;
// archived ones are left out.
func (s *Service) List(ctx context.Context, agent *auth.Agent, after string, limit int) ([]store.Project, error) {
	return s.list(ctx, agent, after, limit, false)
}

// ListArchived returns one page of the archived projects the agent may
// see, by name: where to find one to restore.
func (s *Service) ListArchived(ctx context.Context, agent *auth.Agent, after string, limit int) ([]store.Project, error) {
	return s.list(ctx, agent, after, limit, true)
}

func (s *Service) list(ctx context.Context, agent *auth.Agent, after string, limit int, archived bool) ([]store.Project, error) {
	all := agent.AllScope()
	out, err := s.store.ProjectList(ctx, store.ProjectListParams{
		After: after, All: all, Projects: append([]string{auth.SharedProject}, agent.Projects...), Archived: archived, Max: limit,
	})
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return out, nil
}
