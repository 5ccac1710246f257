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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/dbsqlc"
	"github.com/contextd/contextd/internal/validation"
)

// ErrNotFound means the project does not exist or is outside the caller's scope.
var ErrNotFound = errors.New("project not found")

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`) // the same rule as agent scopes in package auth

// Project is a tenant.
type Project struct {
	Name        string
	Description string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func fromRow(r dbsqlc.Project) Project {
	return Project{Name: r.Project, Description: r.Description, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// Service manages projects.
type Service struct{ pool *pgxpool.Pool }

// NewService returns a project service on pool.
func NewService(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// Authorize checks that agent may act on project with permission p: a
// project out of scope or missing is ErrNotFound, a missing permission
// auth.ErrForbidden.
func (s *Service) Authorize(ctx context.Context, agent *auth.Agent, project string, p auth.Permission) error {
	if !agent.InScope(project) {
		return fmt.Errorf("%w: %s", ErrNotFound, project)
	}
	if _, err := store.Q.ProjectGet(ctx, store.Exec(ctx, s.pool), project); err != nil {
		if err = store.Interpret(err); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %s", ErrNotFound, project)
		}
		return fmt.Errorf("get project: %w", err)
	}
	if !agent.Can(project, p) {
		return fmt.Errorf("%w: %s permission needed on project %s", auth.ErrForbidden, p, project)
	}
	return nil
}

// Put creates or updates a project (admin only) and reports whether it was created.
func (s *Service) Put(ctx context.Context, agent *auth.Agent, name, description string) (Project, bool, error) {
	// Scope first: a project out of scope does not exist for the caller
	// (an admin scoped to some projects creates and changes only those).
	if !agent.InScope(name) {
		return Project{}, false, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if !agent.IsAdmin() {
		if _, err := store.Q.ProjectGet(ctx, store.Exec(ctx, s.pool), name); err != nil {
			return Project{}, false, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return Project{}, false, fmt.Errorf("%w: only admins create or change projects", auth.ErrForbidden)
	}
	if name == auth.SharedProject {
		return Project{}, false, validation.One("project", "reserved", "%s is reserved", auth.SharedProject)
	}
	if !nameRE.MatchString(name) {
		return Project{}, false, validation.One("project", "format", "project names match [A-Za-z0-9][A-Za-z0-9._-]{0,99}")
	}
	var row dbsqlc.ProjectUpsertRow
	err := store.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.Q.ProjectUpsert(ctx, tx, dbsqlc.ProjectUpsertParams{Project: name, Description: description})
		return store.Interpret(err)
	})
	if err != nil {
		return Project{}, false, fmt.Errorf("put project: %w", err)
	}
	return Project{Name: row.Project, Description: row.Description, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}, row.Inserted, nil
}

// List returns one page of the projects the agent may see, by name.
func (s *Service) List(ctx context.Context, agent *auth.Agent, after string, limit int) ([]Project, error) {
	all := agent.AllScope()
	rows, err := store.Q.ProjectList(ctx, store.Exec(ctx, s.pool), dbsqlc.ProjectListParams{
		After: after, AllProjects: all, Projects: append([]string{auth.SharedProject}, agent.Projects...), Max: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", store.Interpret(err))
	}
	out := make([]Project, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}
