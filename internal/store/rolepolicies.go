package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
	"github.com/contextd/contextd/internal/token"
)

// RolePolicy is one row of role_policies (migration 00035): a role's
// policy in one project (or _shared), the members it sets.
type RolePolicy struct {
	Project, Role        string
	Version              int
	Policy               ctxtype.RolePolicy
	CreatedAt, UpdatedAt time.Time
	CreatedBy, UpdatedBy string
}

func rolePolicyOf(r dbsqlc.RolePolicy) (RolePolicy, error) {
	out := RolePolicy{Project: r.Project, Role: r.Role, Version: int(r.Version), CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(), CreatedBy: r.CreatedBy, UpdatedBy: r.UpdatedBy}
	p := &out.Policy
	if r.TokenBudget != nil {
		b := int(*r.TokenBudget)
		p.TokenBudget = &b
	}
	p.Max, p.Kinds = r.BudgetMax, r.Kinds
	if r.MaxPerSection != nil {
		if err := json.Unmarshal(r.MaxPerSection, &p.MaxPerSection); err != nil {
			return RolePolicy{}, fmt.Errorf("decode role policy %s/%s max_per_section: %w", r.Project, r.Role, err)
		}
	}
	if r.Format != nil {
		p.Format = ctxtype.Format(*r.Format)
	}
	if r.Tokenizer != nil {
		p.Tokenizer = token.Tokenizer(*r.Tokenizer)
	}
	return out, nil
}

func rolePoliciesOf(rows []dbsqlc.RolePolicy) ([]RolePolicy, error) {
	out := make([]RolePolicy, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = rolePolicyOf(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func rolePolicyRow(r dbsqlc.RolePolicy) audit.RolePolicyRow {
	out := audit.RolePolicyRow{Project: r.Project, Role: r.Role, Version: int(r.Version), BudgetMax: r.BudgetMax,
		Kinds: r.Kinds, MaxPerSection: r.MaxPerSection, Format: r.Format, Tokenizer: r.Tokenizer,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, CreatedBy: r.CreatedBy, UpdatedBy: r.UpdatedBy}
	if r.TokenBudget != nil {
		b := int(*r.TokenBudget)
		out.TokenBudget = &b
	}
	return out
}

// RolePolicyPut sets a role's policy in a project as agent, every member
// at once (an empty policy is the policy taken away: the row stays, with
// no member), with its audit entry (the row after the change).
func (tx *Tx) RolePolicyPut(ctx context.Context, project, role string, p ctxtype.RolePolicy, agent string) (RolePolicy, error) {
	params := dbsqlc.RolePolicyUpsertParams{Project: project, Role: role, BudgetMax: p.Max, Kinds: p.Kinds, Agent: agent}
	if p.TokenBudget != nil {
		b := int32(*p.TokenBudget)
		params.TokenBudget = &b
	}
	if len(p.Kinds) == 0 {
		params.Kinds = nil
	}
	if len(p.MaxPerSection) > 0 {
		b, err := json.Marshal(p.MaxPerSection)
		if err != nil {
			return RolePolicy{}, err
		}
		params.MaxPerSection = b
	}
	if p.Format != "" {
		f := string(p.Format)
		params.Format = &f
	}
	if p.Tokenizer != "" {
		t := string(p.Tokenizer)
		params.Tokenizer = &t
	}
	r, err := q.RolePolicyUpsert(ctx, tx.ex, params)
	if err != nil {
		return RolePolicy{}, interpret(err)
	}
	body, err := audit.RolePolicyBody(rolePolicyRow(r))
	if err := tx.entry(project, audit.KindRolePolicy, role, body, err); err != nil {
		return RolePolicy{}, err
	}
	return rolePolicyOf(r)
}

// RolePoliciesOf is role's policy rows in the projects (a project and
// _shared), in one statement: the packet service reads them with its
// snapshot's first reads (Tx.Reads).
func (db DB) RolePoliciesOf(ctx context.Context, projects []string, role string) ([]RolePolicy, error) {
	rows, err := q.RolePoliciesOf(ctx, db.ex, dbsqlc.RolePoliciesOfParams{Projects: projects, Role: role})
	if err != nil {
		return nil, interpret(err)
	}
	return rolePoliciesOf(rows)
}

// RolePolicyList is the rows, in the projects, of the first max roles
// after after (by role, in byte order) that have a policy in one of them;
// by role, then project.
func (db DB) RolePolicyList(ctx context.Context, projects []string, after string, max int) ([]RolePolicy, error) {
	rows, err := q.RolePolicyList(ctx, db.ex, dbsqlc.RolePolicyListParams{Projects: projects, After: after, Max: int32(max)})
	if err != nil {
		return nil, interpret(err)
	}
	return rolePoliciesOf(rows)
}

// RolePolicyBodies is a page of a project's role policies by role after
// afterRole, as their entry bodies now.
func (db DB) RolePolicyBodies(ctx context.Context, project, afterRole string, limit int) ([]SubjectBody, error) {
	rows, err := q.RolePolicyAuditPage(ctx, db.ex, dbsqlc.RolePolicyAuditPageParams{Project: project, After: afterRole, Lim: int32(limit)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]SubjectBody, len(rows))
	for i, r := range rows {
		out[i] = SubjectBody{Subject: r.Role, Body: bodyOrMark(audit.RolePolicyBody(rolePolicyRow(r)))}
	}
	return out, nil
}
