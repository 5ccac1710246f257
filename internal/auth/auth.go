// Package auth is who may do what: agents, their API keys, permissions and
// project scopes. Scope is checked before permission, so a project outside an
// agent's scope looks exactly like one that does not exist.
package auth

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/dbsqlc"
	"github.com/contextd/contextd/internal/validation"
)

// Permission is what an agent may do inside its scope.
type Permission string

// The permissions, weakest first.
const (
	ReadOnly Permission = "read-only"
	Edit     Permission = "edit"
	Admin    Permission = "admin"
)

func (p Permission) rank() int {
	switch p {
	case ReadOnly:
		return 1
	case Edit:
		return 2
	case Admin:
		return 3
	}
	return 0
}

// Valid reports whether p is a known permission.
func (p Permission) Valid() bool { return p.rank() > 0 }

// projectNameRE is what a project name looks like (see package project).
var projectNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// SharedProject is the reserved project of shared defaults: readable by
// every agent, writable by admins only.
const SharedProject = "_shared"

// AllProjects in an agent's scope means every project.
const AllProjects = "*"

// Errors of this package, mapped to 401/403 by the HTTP layer.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// Agent is an authenticated caller.
type Agent struct {
	ID         string
	Name       string
	Role       string
	Permission Permission
	Projects   []string
	CreatedAt  time.Time
	RevokedAt  *time.Time
}

// IsAdmin reports whether the agent may do everything.
func (a *Agent) IsAdmin() bool { return a.Permission == Admin }

// InScope reports whether the agent may know that project exists at all.
// `_shared` is in every agent's scope. Scope binds admins too: an admin of
// one project is not an admin of the others.
func (a *Agent) InScope(project string) bool {
	return project == SharedProject || a.AllScope() || slices.Contains(a.Projects, project)
}

// AllScope reports whether the agent's scope is every project.
func (a *Agent) AllScope() bool { return slices.Contains(a.Projects, AllProjects) }

// Covers reports whether every project of scope is in the agent's own
// scope: an admin may only hand out what it holds itself.
func (a *Agent) Covers(scope []string) bool {
	if a.AllScope() {
		return true
	}
	for _, p := range scope {
		if p == AllProjects || !slices.Contains(a.Projects, p) {
			return false
		}
	}
	return true
}

// Can reports whether the agent holds at least permission p in project (which
// must already be in scope). Writing `_shared` needs admin.
func (a *Agent) Can(project string, p Permission) bool {
	if project == SharedProject && p.rank() > ReadOnly.rank() {
		return a.IsAdmin()
	}
	return a.Permission.rank() >= p.rank()
}

// SeesAllRoles reports whether role restrictions on items are lifted for the
// agent: admins see everything.
func (a *Agent) SeesAllRoles() bool { return a.IsAdmin() }

func fromRow(r dbsqlc.Agent) *Agent {
	return &Agent{
		ID: r.ID, Name: r.Name, Role: r.Role, Permission: Permission(r.Permission),
		Projects: r.Projects, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt,
	}
}

// Service manages agents and authenticates keys.
type Service struct {
	pool *pgxpool.Pool
}

// NewService returns an agent service on pool.
func NewService(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// Authenticate returns the agent holding key. A malformed key, a bad
// checksum, an unknown key and a revoked key are all ErrUnauthenticated.
func (s *Service) Authenticate(ctx context.Context, key string) (*Agent, error) {
	if !WellFormed(key) {
		return nil, fmt.Errorf("%w: not a contextd key (bad shape or checksum)", ErrUnauthenticated)
	}
	row, err := store.Q.AgentGetByKeyHash(ctx, s.pool, HashKey(key))
	if err != nil {
		err = store.Interpret(err)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: unknown key", ErrUnauthenticated)
		}
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if row.RevokedAt != nil {
		return nil, fmt.Errorf("%w: key revoked", ErrUnauthenticated)
	}
	return fromRow(row), nil
}

// CreateParams describes a new agent.
type CreateParams struct {
	Name       string
	Role       string
	Permission Permission
	Projects   []string
	CreatedBy  string // the creating agent's id; empty for the command line
}

func (p *CreateParams) validate() error {
	var errs validation.List
	if strings.TrimSpace(p.Name) == "" {
		errs.Add("/name", "required", "name is required")
	}
	if strings.TrimSpace(p.Role) == "" {
		errs.Add("/role", "required", "role is required")
	}
	if !p.Permission.Valid() {
		errs.Add("/permission", "enum", "permission must be read-only, edit or admin")
	}
	if len(p.Projects) == 0 {
		errs.Add("/projects", "required", `projects is required: project names, or ["*"]`)
	}
	for i, pr := range p.Projects {
		if pr != AllProjects && !projectNameRE.MatchString(pr) {
			errs.Add(fmt.Sprintf("/projects/%d", i), "format", "a project name ([A-Za-z0-9][A-Za-z0-9._-]{0,99}) or *")
		}
	}
	return errs.Err()
}

// Create makes an agent and returns it with its key, which is never
// retrievable again.
func (s *Service) Create(ctx context.Context, p CreateParams) (*Agent, string, error) {
	if err := p.validate(); err != nil {
		return nil, "", err
	}
	key := NewKey()
	var createdBy *string
	if p.CreatedBy != "" {
		createdBy = &p.CreatedBy
	}
	var row dbsqlc.Agent
	err := store.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.Q.AgentInsert(ctx, tx, dbsqlc.AgentInsertParams{
			ID: NewAgentID(), Name: p.Name, Role: p.Role, Permission: string(p.Permission),
			Projects: p.Projects, KeySha256: HashKey(key), CreatedBy: createdBy,
		})
		return store.Interpret(err)
	})
	if err != nil {
		return nil, "", fmt.Errorf("create agent: %w", err)
	}
	return fromRow(row), key, nil
}

// List returns one page of agents, by id, after the given id.
func (s *Service) List(ctx context.Context, after string, limit int) ([]*Agent, error) {
	rows, err := store.Q.AgentList(ctx, store.Exec(ctx, s.pool), dbsqlc.AgentListParams{After: after, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", store.Interpret(err))
	}
	out := make([]*Agent, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Get returns an agent by id.
func (s *Service) Get(ctx context.Context, id string) (*Agent, error) {
	row, err := store.Q.AgentGet(ctx, store.Exec(ctx, s.pool), id)
	if err != nil {
		return nil, fmt.Errorf("get agent %s: %w", id, store.Interpret(err))
	}
	return fromRow(row), nil
}

// Revoke refuses the agent's key from now on. Revoking twice is harmless.
func (s *Service) Revoke(ctx context.Context, id string) (*Agent, error) {
	var row dbsqlc.Agent
	err := store.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.Q.AgentRevoke(ctx, tx, id)
		return store.Interpret(err)
	})
	if err != nil {
		return nil, fmt.Errorf("revoke agent %s: %w", id, err)
	}
	return fromRow(row), nil
}

// Bootstrap creates the first admin agent when the database has none, and
// returns its key; on a database that has agents it returns "". It takes a
// transaction-scoped advisory lock so two servers starting together make one.
func (s *Service) Bootstrap(ctx context.Context) (*Agent, string, error) {
	var (
		agent *Agent
		key   string
	)
	err := store.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('contextd.bootstrap'))"); err != nil {
			return store.Interpret(err)
		}
		n, err := store.Q.AgentCount(ctx, tx)
		if err != nil {
			return store.Interpret(err)
		}
		if n > 0 {
			return nil
		}
		key = NewKey()
		row, err := store.Q.AgentInsert(ctx, tx, dbsqlc.AgentInsertParams{
			ID: NewAgentID(), Name: "admin", Role: "admin", Permission: string(Admin),
			Projects: []string{AllProjects}, KeySha256: HashKey(key),
		})
		if err != nil {
			return store.Interpret(err)
		}
		agent = fromRow(row)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("bootstrap admin: %w", err)
	}
	return agent, key, nil
}
