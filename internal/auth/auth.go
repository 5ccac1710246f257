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

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
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

// Exceeds reports whether p is stronger than q.
func (p Permission) Exceeds(q Permission) bool { return p.rank() > q.rank() }

// Valid reports whether p is a known permission.
func (p Permission) Valid() bool { return p.rank() > 0 }

// projectNameRE is what a project name looks like (see package project).
var projectNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// SharedProject is the reserved project of shared defaults: readable by
// every agent, writable by admins only.
const SharedProject = "_shared"

// AllProjects in an agent's scope means every project.
const AllProjects = "*"

// Agent is an authenticated caller.
type Agent struct {
	ID         string
	Name       string
	Role       string
	Permission Permission
	Projects   []string
	// MaxAuthority is the highest authority the agent's item writes may
	// claim (see CheckAuthority).
	MaxAuthority string
	CreatedAt    time.Time
	RevokedAt    *time.Time
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
// must already be in scope). Writing `_shared`, which enters every
// project's packets, needs an admin whose scope is every project or names
// `_shared`: an admin of one project is not an admin of all.
func (a *Agent) Can(project string, p Permission) bool {
	if project == SharedProject && p.rank() > ReadOnly.rank() {
		return a.IsAdmin() && (a.AllScope() || slices.Contains(a.Projects, SharedProject))
	}
	return a.Permission.rank() >= p.rank()
}

// SeesAllRoles reports whether role restrictions on items are lifted for the
// agent: admins see everything.
func (a *Agent) SeesAllRoles() bool { return a.IsAdmin() }

func fromRow(r store.Agent) *Agent {
	a := &Agent{
		ID: r.ID, Name: r.Name, Role: r.Role, Permission: Permission(r.Permission),
		Projects: r.Projects, MaxAuthority: r.MaxAuthority, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt,
	}
	if a.MaxAuthority == "" { // made before migration 00017
		a.MaxAuthority = DefaultMaxAuthority(a.Permission)
	}
	return a
}

// Service manages agents and authenticates keys. Every method that manages
// agents checks its caller: only admins do, and an admin manages only the
// agents (and grants only the projects) within its own scope.
type Service struct {
	store *store.Store
	keys  *keyCache
}

// NewService returns an agent service.
func NewService(st *store.Store) *Service { return &Service{store: st, keys: newKeyCache()} }

// Authenticate returns the agent holding key. A malformed key, a bad
// checksum, an unknown key and a revoked key are all fault.ErrUnauthenticated.
//
// Agents of good keys are kept (see keyCache): for a second, or while
// Watch hears every change, for up to keyMaxAge.
func (s *Service) Authenticate(ctx context.Context, key string) (*Agent, error) {
	if !WellFormed(key) {
		return nil, fmt.Errorf("%w: not a contextd key (bad shape or checksum)", fault.ErrUnauthenticated)
	}
	hash, started := HashKey(key), time.Now()
	if a, ok := s.keys.get(hash, started); ok {
		return a, nil
	}
	row, err := s.store.AgentByKeyHash(ctx, hash)
	if err != nil {
		if errors.Is(err, fault.ErrNotFound) {
			return nil, fmt.Errorf("%w: unknown key", fault.ErrUnauthenticated)
		}
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if row.RevokedAt != nil {
		return nil, fmt.Errorf("%w: key revoked", fault.ErrUnauthenticated)
	}
	a := fromRow(row)
	s.keys.put(hash, a, started)
	return a, nil
}

// Watch keeps the process's view of agents current through LISTEN until
// ctx ends: a revocation elsewhere reaches this process's cache when its
// transaction commits, and after a reconnect everything kept is dropped
// (read again on next use), since notifications sent meanwhile are gone.
// While it runs and its connection answers, kept agents stay valid for up
// to keyMaxAge; otherwise for keyTTL, so a change made elsewhere is seen
// within a second either way. serve runs it; without it the TTL alone
// applies.
func (s *Service) Watch(ctx context.Context) {
	s.store.Listen(ctx, store.AgentsChannel,
		func() { s.keys.reset(time.Now()) },
		func(id string) { s.keys.forget(id, time.Now()) },
		func() { s.keys.heard(time.Now()) })
}

// CreateParams describes a new agent. An empty MaxAuthority is the
// permission's default, capped by the granting admin's own.
type CreateParams struct {
	Name         string
	Role         string
	Permission   Permission
	Projects     []string
	MaxAuthority string
}

func (p *CreateParams) validate() error {
	var errs validation.List
	if p.MaxAuthority != "" && !ValidAuthority(p.MaxAuthority) {
		errs.Add("/max_authority", "enum", "max_authority must be policy, instruction, evidence or hypothesis, not %q", p.MaxAuthority)
	}
	if strings.TrimSpace(p.Name) == "" {
		errs.Add("/name", "required", "name is required")
	}
	if strings.TrimSpace(p.Role) == "" {
		errs.Add("/role", "required", "role is required")
	}
	l := limits.Get()
	limits.Chars(&errs, "/name", p.Name, l.AgentName)
	limits.Chars(&errs, "/role", p.Role, l.Role)
	limits.Items(&errs, "/projects", len(p.Projects), l.List)
	if !p.Permission.Valid() {
		errs.Add("/permission", "enum", "permission must be read-only, edit or admin")
	}
	if len(p.Projects) == 0 {
		errs.Add("/projects", "required", `projects is required: project names, or ["*"]`)
	}
	for i, pr := range p.Projects {
		if pr != AllProjects && pr != SharedProject && !projectNameRE.MatchString(pr) {
			errs.Add(fmt.Sprintf("/projects/%d", i), "format", "a project name ([A-Za-z0-9][A-Za-z0-9._-]{0,99}), _shared or *")
		}
	}
	return errs.Err()
}

func requireAdmin(caller *Agent) error {
	if caller == nil || !caller.IsAdmin() {
		return fmt.Errorf("%w: only admins manage agents", fault.ErrForbidden)
	}
	return nil
}

// Create makes an agent on behalf of caller, an admin that may grant only
// projects in its own scope, and returns it with its key, which is never
// retrievable again.
func (s *Service) Create(ctx context.Context, caller *Agent, p CreateParams) (a *Agent, key string, err error) {
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		a, key, err = s.CreateTx(ctx, tx, caller, p)
		return err
	})
	return a, key, err
}

// CreateTx is Create inside the caller's transaction.
func (s *Service) CreateTx(ctx context.Context, tx *store.Tx, caller *Agent, p CreateParams) (*Agent, string, error) {
	if err := requireAdmin(caller); err != nil {
		return nil, "", err
	}
	if err := p.validate(); err != nil {
		return nil, "", err
	}
	if !caller.Covers(p.Projects) {
		return nil, "", fmt.Errorf("%w: an admin grants only projects in its own scope", fault.ErrForbidden)
	}
	if p.MaxAuthority == "" {
		p.MaxAuthority = Capped(DefaultMaxAuthority(p.Permission), caller.Ceiling())
	}
	if err := caller.grants(p.MaxAuthority); err != nil {
		return nil, "", err
	}
	return s.create(ctx, tx, p, caller.ID)
}

// CreateLocal makes an agent for the operator of the command line, who
// holds the database itself and so needs no key.
func (s *Service) CreateLocal(ctx context.Context, p CreateParams) (*Agent, string, error) {
	if err := p.validate(); err != nil {
		return nil, "", err
	}
	var (
		a   *Agent
		key string
	)
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		a, key, err = s.create(ctx, tx, p, "")
		return err
	})
	return a, key, err
}

func (s *Service) create(ctx context.Context, tx *store.Tx, p CreateParams, createdBy string) (*Agent, string, error) {
	key := NewKey()
	if p.MaxAuthority == "" {
		p.MaxAuthority = DefaultMaxAuthority(p.Permission)
	}
	row, err := tx.AgentInsert(ctx, store.AgentInsertParams{
		ID: NewAgentID(), Name: p.Name, Role: p.Role, Permission: string(p.Permission),
		Projects: p.Projects, KeySHA256: HashKey(key), CreatedBy: createdBy, MaxAuthority: p.MaxAuthority,
	})
	if err != nil {
		return nil, "", fmt.Errorf("create agent: %w", err)
	}
	return fromRow(row), key, nil
}

var agentsListing = page.Listing("agents")

// List returns one page of the agents within caller's scope, by id, after
// the position of cursor; pages are filled from as many database pages as
// that takes. next is the cursor of the next page, empty on the last.
func (s *Service) List(ctx context.Context, caller *Agent, cursor string, limit int) (agents []*Agent, next string, err error) {
	if err := requireAdmin(caller); err != nil {
		return nil, "", err
	}
	after, err := page.DecodeAfter(cursor, agentsListing)
	if err != nil {
		return nil, "", err
	}
	out := []*Agent{}
	for {
		rows, err := s.store.AgentList(ctx, after, limit+1)
		if err != nil {
			return nil, "", fmt.Errorf("list agents: %w", err)
		}
		for _, r := range rows {
			a := fromRow(r)
			if !caller.Covers(a.Projects) {
				continue
			}
			if len(out) == limit {
				return out, page.Encode(agentsListing, page.After{After: out[len(out)-1].ID}), nil
			}
			out = append(out, a)
		}
		if len(rows) <= limit {
			return out, "", nil
		}
		after = rows[len(rows)-1].ID
	}
}

// Revoke refuses the agent's key from now on, on behalf of caller, an admin
// whose scope covers the agent's. Revoking twice is harmless.
func (s *Service) Revoke(ctx context.Context, caller *Agent, id string) (*Agent, error) {
	if err := requireAdmin(caller); err != nil {
		return nil, err
	}
	if !caller.AllScope() {
		target, err := s.store.AgentGet(ctx, id)
		if err != nil {
			return nil, noAgent(id, err)
		}
		if !caller.Covers(target.Projects) {
			return nil, fmt.Errorf("%w: agent %s is outside your scope", fault.ErrForbidden, id)
		}
	}
	var row store.Agent
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		// The agents_notify trigger tells every watching process (00010).
		row, err = tx.AgentRevoke(ctx, id)
		return err
	})
	if err != nil {
		return nil, noAgent(id, err)
	}
	s.keys.forget(id, time.Now())
	return fromRow(row), nil
}

// noAgent says which agent a store's not-found is about, in the words an
// API answer shows; other errors keep their context.
func noAgent(id string, err error) error {
	if errors.Is(err, fault.ErrNotFound) {
		return fmt.Errorf("%w: there is no agent %s", fault.ErrNotFound, id)
	}
	return fmt.Errorf("agent %s: %w", id, err)
}

// Bootstrap creates the first admin agent when the database has none, and
// returns its key; on a database that has agents it returns "". It takes a
// transaction-scoped advisory lock so two servers starting together make one.
func (s *Service) Bootstrap(ctx context.Context) (*Agent, string, error) {
	var (
		agent *Agent
		key   string
	)
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		agent, key = nil, ""
		if err := tx.AgentBootstrapLock(ctx); err != nil {
			return err
		}
		n, err := tx.AgentCount(ctx)
		if err != nil || n > 0 {
			return err
		}
		key = NewKey()
		row, err := tx.AgentInsert(ctx, store.AgentInsertParams{
			ID: NewAgentID(), Name: "admin", Role: "admin", Permission: string(Admin),
			Projects: []string{AllProjects}, KeySHA256: HashKey(key), MaxAuthority: Policy,
		})
		if err != nil {
			return err
		}
		agent = fromRow(row)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("bootstrap admin: %w", err)
	}
	return agent, key, nil
}
