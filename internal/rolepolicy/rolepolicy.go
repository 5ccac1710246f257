// Package rolepolicy keeps a policy per role (issue 37): the token budget,
// the item kinds, the most entries per section, the format and the
// tokenizer of that role's packets, in _shared for every project and in a
// project for its own, the project's layer overriding _shared's member by
// member. A packet request that names none of them takes them from the
// policy (the packet service reads it with its snapshot), so that serving
// many agents of a role does not mean every caller restating its budget
// and filters. Each change is an entry of the project's audit chain.
package rolepolicy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/token"
)

// Default is the layer name of a member no layer sets: the request's
// own default (ctxtype.DefaultBudget, markdown, o200k_base, every kind, no
// cap per section).
const Default = "default"

// Service reads and writes role policies.
type Service struct {
	store    *store.Store
	projects *project.Service
}

// NewService returns a role policy service.
func NewService(st *store.Store, projects *project.Service) *Service {
	return &Service{store: st, projects: projects}
}

// View is a role's policy in a project as it is now: the effective
// policy, and the rows of its layers (nil: the layer sets nothing).
type View struct {
	Project, Role string
	Effective     ctxtype.EffectivePolicy
	Own, Shared   *store.RolePolicy
}

// Layers are the policy layers of role in proj among rows (a project's
// and _shared's rows of the role), lowest first, as ctxtype.Effective
// takes them; a row that sets nothing is no layer.
func Layers(proj string, rows []store.RolePolicy) []ctxtype.PolicyLayer {
	var shared, own *store.RolePolicy
	for i := range rows {
		switch rows[i].Project {
		case ctxtype.SharedProject:
			shared = &rows[i]
		case proj:
			own = &rows[i]
		}
	}
	var out []ctxtype.PolicyLayer
	for _, r := range []*store.RolePolicy{shared, own} {
		if r != nil && !r.Policy.Empty() {
			out = append(out, ctxtype.PolicyLayer{Project: r.Project, Policy: r.Policy})
		}
	}
	return out
}

// viewOf is role's View in proj from its rows.
func viewOf(proj, role string, rows []store.RolePolicy) View {
	v := View{Project: proj, Role: role, Effective: ctxtype.Effective(role, Layers(proj, rows)...)}
	for i := range rows {
		r := rows[i]
		if r.Policy.Empty() {
			continue
		}
		if r.Project == ctxtype.SharedProject && proj != ctxtype.SharedProject {
			v.Shared = &r
		} else if r.Project == proj {
			v.Own = &r
		}
	}
	return v
}

// projectsOf are the layers' projects of proj: itself and _shared.
func projectsOf(proj string) []string {
	if proj == ctxtype.SharedProject {
		return []string{proj}
	}
	return []string{proj, ctxtype.SharedProject}
}

// Get is role's policy in proj (read permission: an agent may learn what
// its packets are made with).
func (s *Service) Get(ctx context.Context, agent *auth.Agent, proj, role string) (View, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return View{}, err
	}
	if err := checkRole(role); err != nil {
		return View{}, err
	}
	rows, err := s.store.RolePoliciesOf(ctx, projectsOf(proj), role)
	if err != nil {
		return View{}, fmt.Errorf("get role policy: %w", err)
	}
	return viewOf(proj, role, rows), nil
}

// PutTx sets role's policy in proj (admin of it; _shared's for admins of
// _shared), every member at once, in the caller's transaction, and
// returns the role's policy after it. An archived project is
// fault.ErrGone.
func (s *Service) PutTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, role string, p ctxtype.RolePolicy) (View, error) {
	if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Admin); err != nil {
		return View{}, err
	}
	if err := Check(role, p); err != nil {
		return View{}, err
	}
	return s.write(ctx, tx, agent, proj, role, p)
}

// ErrNoPolicy is a DELETE of a role's policy in a project that sets none.
var ErrNoPolicy = fmt.Errorf("role policy %w", fault.ErrNotFound)

// DeleteTx takes role's policy in proj away (admin), in the caller's
// transaction: its row stays, with no member, and its audit entry says
// so. The role's packets then take _shared's policy, if any. A role with
// no policy in proj is ErrNoPolicy.
func (s *Service) DeleteTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, role string) (View, error) {
	if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Admin); err != nil {
		return View{}, err
	}
	if err := checkRole(role); err != nil {
		return View{}, err
	}
	rows, err := tx.RolePoliciesOf(ctx, []string{proj}, role)
	if err != nil {
		return View{}, err
	}
	if len(rows) == 0 || rows[0].Policy.Empty() {
		return View{}, fmt.Errorf("%w: role %q has no policy of its own in %s", ErrNoPolicy, role, proj)
	}
	return s.write(ctx, tx, agent, proj, role, ctxtype.RolePolicy{})
}

func (s *Service) write(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, role string, p ctxtype.RolePolicy) (View, error) {
	if err := s.projects.Writable(ctx, tx, proj); err != nil {
		return View{}, err
	}
	if _, err := tx.RolePolicyPut(ctx, proj, role, p, agent.ID); err != nil {
		return View{}, fmt.Errorf("put role policy: %w", err)
	}
	rows, err := tx.RolePoliciesOf(ctx, projectsOf(proj), role)
	if err != nil {
		return View{}, err
	}
	return viewOf(proj, role, rows), nil
}

// List is a page of the roles that have a policy in proj or in _shared,
// by role after after, each as Get shows it (read permission).
func (s *Service) List(ctx context.Context, agent *auth.Agent, proj, after string, limit int) ([]View, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	rows, err := s.store.RolePolicyList(ctx, projectsOf(proj), after, limit)
	if err != nil {
		return nil, fmt.Errorf("list role policies: %w", err)
	}
	var out []View
	for len(rows) > 0 {
		n := 1
		for n < len(rows) && rows[n].Role == rows[0].Role {
			n++
		}
		out = append(out, viewOf(proj, rows[0].Role, rows[:n]))
		rows = rows[n:]
	}
	return out, nil
}

// LayerOf names the layer of a member of v's effective policy: the
// project of the layer that set it, or Default.
func (v View) LayerOf(member string) string {
	if l, ok := v.Effective.Layers[member]; ok {
		return l
	}
	return Default
}

// Summary is the effective policy in a line, for the explorer and the CLI.
func (v View) Summary() string {
	e := v.Effective
	var parts []string
	if e.TokenBudget != nil {
		s := fmt.Sprintf("token_budget %d", *e.TokenBudget)
		if e.Max {
			s += " (max)"
		}
		parts = append(parts, s)
	}
	if len(e.Kinds) > 0 {
		parts = append(parts, "kinds "+strings.Join(e.Kinds, ", "))
	}
	for _, sec := range sectionNames {
		if n, ok := e.MaxPerSection[sec]; ok {
			parts = append(parts, fmt.Sprintf("%s ≤ %d", sec, n))
		}
	}
	if e.Format != "" {
		parts = append(parts, "format "+string(e.Format))
	}
	if e.Tokenizer != "" {
		parts = append(parts, "tokenizer "+string(e.Tokenizer))
	}
	return strings.Join(parts, "; ")
}

// Resolved is v's effective policy with the defaults in the members no
// layer sets: what a packet for the role whose request names none of them
// is made with (every kind, no cap per section).
func (v View) Resolved() ctxtype.RolePolicy {
	e := v.Effective.RolePolicy
	out := ctxtype.RolePolicy{Max: e.Max, Kinds: e.Kinds, MaxPerSection: e.MaxPerSection, Format: e.Format, Tokenizer: e.Tokenizer}
	b := ctxtype.DefaultBudget
	if e.TokenBudget != nil {
		b = *e.TokenBudget
	}
	out.TokenBudget = &b
	if len(out.Kinds) == 0 {
		out.Kinds = slices.Clone(kinds)
	}
	if out.MaxPerSection == nil {
		out.MaxPerSection = map[string]int{}
	}
	if out.Format == "" {
		out.Format = ctxtype.Markdown
	}
	if out.Tokenizer == "" {
		out.Tokenizer = token.Default
	}
	return out
}

// SetBy says which layer set each member a layer sets, for the explorer:
// "token_budget from _shared; kinds from acme".
func (v View) SetBy() string {
	var parts []string
	for _, m := range ctxtype.PolicyMembers {
		if l, ok := v.Effective.Layers[m]; ok {
			parts = append(parts, m+" from "+l)
		}
	}
	return strings.Join(parts, "; ")
}
