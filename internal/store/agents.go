package store

import (
	"context"
	"github.com/contextd/contextd/internal/audit"
	"time"

	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// Agent is a stored agent (its key only as a hash).
type Agent struct {
	ID         string
	Name       string
	Role       string
	Permission string
	Projects   []string
	CreatedAt  time.Time
	CreatedBy  string
	RevokedAt  *time.Time
	// MaxAuthority is the agent's ceiling on item authority; empty for an
	// agent made before migration 00017 (its permission's default).
	MaxAuthority string
}

func agentOf(r dbsqlc.Agent) Agent {
	a := Agent{ID: r.ID, Name: r.Name, Role: r.Role, Permission: r.Permission, Projects: r.Projects, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
	if r.CreatedBy != nil {
		a.CreatedBy = *r.CreatedBy
	}
	if r.MaxAuthority != nil {
		a.MaxAuthority = *r.MaxAuthority
	}
	return a
}

// AgentByKeyHash is the agent holding a key.
func (db DB) AgentByKeyHash(ctx context.Context, keySHA256 []byte) (Agent, error) {
	r, err := q.AgentGetByKeyHash(ctx, db.ex, keySHA256)
	if err != nil {
		return Agent{}, interpret(err)
	}
	return agentOf(r), nil
}

// AgentGet is an agent by id.
func (db DB) AgentGet(ctx context.Context, id string) (Agent, error) {
	r, err := q.AgentGet(ctx, db.ex, id)
	if err != nil {
		return Agent{}, interpret(err)
	}
	return agentOf(r), nil
}

// AgentNames is the name of each agent of ids that exists, by id.
func (db DB) AgentNames(ctx context.Context, ids []string) (map[string]string, error) {
	rows, err := q.AgentNames(ctx, db.ex, ids)
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Name
	}
	return out, nil
}

// AgentList is a page of agents by id.
func (db DB) AgentList(ctx context.Context, after string, max int) ([]Agent, error) {
	rows, err := q.AgentList(ctx, db.ex, dbsqlc.AgentListParams{After: after, Max: int32(max)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]Agent, len(rows))
	for i, r := range rows {
		out[i] = agentOf(r)
	}
	return out, nil
}

// AgentInsertParams is a new agent.
type AgentInsertParams struct {
	ID, Name, Role, Permission string
	Projects                   []string
	KeySHA256                  []byte
	CreatedBy                  string // empty for the command line and bootstrap
	MaxAuthority               string
}

// AgentInsert stores a new agent.
func (tx *Tx) AgentInsert(ctx context.Context, p AgentInsertParams) (Agent, error) {
	var by *string
	if p.CreatedBy != "" {
		by = &p.CreatedBy
	}
	r, err := q.AgentInsert(ctx, tx.ex, dbsqlc.AgentInsertParams{
		ID: p.ID, Name: p.Name, Role: p.Role, Permission: p.Permission, Projects: p.Projects, KeySha256: p.KeySHA256, CreatedBy: by,
		MaxAuthority: &p.MaxAuthority,
	})
	if err != nil {
		return Agent{}, interpret(err)
	}
	return agentOf(r), tx.auditAgent(r)
}

// AgentRevoke revokes an agent's key (once; a second revoke keeps the time).
func (tx *Tx) AgentRevoke(ctx context.Context, id string) (Agent, error) {
	r, err := q.AgentRevoke(ctx, tx.ex, id)
	if err != nil {
		return Agent{}, interpret(err)
	}
	return agentOf(r), tx.auditAgent(r)
}

// AgentForUpdate is an agent, locked until the transaction ends.
func (tx *Tx) AgentForUpdate(ctx context.Context, id string) (Agent, error) {
	r, err := q.AgentGetForUpdate(ctx, tx.ex, id)
	if err != nil {
		return Agent{}, interpret(err)
	}
	return agentOf(r), nil
}

// AgentUpdateParams is an agent's changeable columns, all of them.
type AgentUpdateParams struct {
	ID, Name, Role, Permission, MaxAuthority string
	Projects                                 []string
}

// AgentUpdate replaces an agent's changeable columns; the agents_notify
// trigger tells every watching process, and the global chain gets the
// row as it now is.
func (tx *Tx) AgentUpdate(ctx context.Context, p AgentUpdateParams) (Agent, error) {
	r, err := q.AgentUpdate(ctx, tx.ex, dbsqlc.AgentUpdateParams{
		ID: p.ID, Name: p.Name, Role: p.Role, Permission: p.Permission, Projects: p.Projects, MaxAuthority: &p.MaxAuthority,
	})
	if err != nil {
		return Agent{}, interpret(err)
	}
	return agentOf(r), tx.auditAgent(r)
}

// auditAgent adds the global chain's entry of an agent as it now is.
func (tx *Tx) auditAgent(r dbsqlc.Agent) error {
	body, err := audit.AgentBody(agentRow(r))
	return tx.entry(audit.GlobalChain, audit.KindAgent, r.ID, body, err)
}

func agentRow(r dbsqlc.Agent) audit.AgentRow {
	return audit.AgentRow{ID: r.ID, Name: r.Name, Role: r.Role, Permission: r.Permission, Projects: r.Projects,
		KeySHA256: r.KeySha256, CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy, RevokedAt: r.RevokedAt, MaxAuthority: r.MaxAuthority}
}

// AgentBodies is a page of agents by id after afterID, as their entry
// bodies now.
func (db DB) AgentBodies(ctx context.Context, afterID string, limit int) ([]SubjectBody, error) {
	rows, err := q.AgentList(ctx, db.ex, dbsqlc.AgentListParams{After: afterID, Max: int32(limit)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]SubjectBody, len(rows))
	for i, r := range rows {
		out[i] = SubjectBody{Subject: r.ID, Body: bodyOrMark(audit.AgentBody(agentRow(r)))}
	}
	return out, nil
}

// AgentsChannel is the channel the agents_notify trigger (migration
// 00010) notifies with an agent's id whenever its authority changes.
const AgentsChannel = "contextd_agents"

// AgentBootstrapLock serialises first starts; AgentCount then tells
// whether an admin must be made.
func (tx *Tx) AgentBootstrapLock(ctx context.Context) error {
	return interpret(q.AgentBootstrapLock(ctx, tx.ex))
}

// AgentCount is the number of agents.
func (db DB) AgentCount(ctx context.Context) (int64, error) {
	n, err := q.AgentCount(ctx, db.ex)
	return n, interpret(err)
}

// AgentRoleHeld reports whether an agent of role, not revoked, has project
// in its scope.
func (db DB) AgentRoleHeld(ctx context.Context, project, role string) (bool, error) {
	ok, err := q.AgentRoleHeld(ctx, db.ex, dbsqlc.AgentRoleHeldParams{Project: project, Role: role})
	return ok, interpret(err)
}
