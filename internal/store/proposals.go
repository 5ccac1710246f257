package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// Proposal is a proposed item write: one row of item_proposals
// (migration 00036), immutable.
type Proposal struct {
	Project, Key string
	// Number numbers the item's proposals from 1.
	Number int
	// Seq is its event's number among the project's handoff events.
	Seq int64
	// BaseVersion is the item's current version when it was proposed (0:
	// the key had none).
	BaseVersion int
	// Cause is asked, excess_authority or import; CauseDetail says, for
	// excess_authority, which ceiling the write broke.
	Cause, CauseDetail string
	Fields             ctxtype.Fields
	FieldsSHA256       []byte
	// PromoterRoles are the roles that could promote it when it was made.
	PromoterRoles []string
	CreatedAt     time.Time
	// CreatedBy is its author's agent id; CreatedByName and CreatedByRole
	// its name and role then.
	CreatedBy, CreatedByName, CreatedByRole string
}

// ProposalDecision is what became of a proposal: one row of
// item_proposal_decisions, immutable.
type ProposalDecision struct {
	Project, Key string
	Number       int
	Seq          int64
	// Decision is promoted or rejected; Reason the rejection's reason (or
	// the promoter's note).
	Decision, Reason string
	// Version is the version a promotion made (or found already holding
	// the proposal's fields); SupersededVersion the live version it
	// superseded (0: none). Rebased says the item had moved on since the
	// proposal was made and the promoter said so.
	Version, SupersededVersion int
	Rebased                    bool
	CreatedAt                  time.Time
	CreatedBy, CreatedByRole   string
}

func proposalOf(r dbsqlc.ItemProposal) (Proposal, error) {
	p := Proposal{Project: r.Project, Key: r.Key, Number: int(r.Proposal), Seq: r.Seq, BaseVersion: int(r.BaseVersion),
		Cause: r.Cause, CauseDetail: r.CauseDetail, FieldsSHA256: r.FieldsSha256, PromoterRoles: nonNil(r.PromoterRoles),
		CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, CreatedByName: r.CreatedByName, CreatedByRole: r.CreatedByRole}
	if err := json.Unmarshal(r.Fields, &p.Fields); err != nil {
		return Proposal{}, fmt.Errorf("decode proposal %s: %w", audit.ProposalSubject(r.Key, int(r.Proposal)), err)
	}
	return p, nil
}

func proposalsOf(rows []dbsqlc.ItemProposal) ([]Proposal, error) {
	out := make([]Proposal, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = proposalOf(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decisionOf(r dbsqlc.ItemProposalDecision) ProposalDecision {
	d := ProposalDecision{Project: r.Project, Key: r.Key, Number: int(r.Proposal), Seq: r.Seq, Decision: r.Decision,
		Reason: r.Reason, Rebased: r.Rebased, CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, CreatedByRole: r.CreatedByRole}
	if r.Version != nil {
		d.Version = int(*r.Version)
	}
	if r.SupersededVersion != nil {
		d.SupersededVersion = int(*r.SupersededVersion)
	}
	return d
}

func proposalRow(r dbsqlc.ItemProposal) audit.ProposalRow {
	return audit.ProposalRow{Project: r.Project, Key: r.Key, Proposal: int(r.Proposal), Seq: r.Seq, BaseVersion: int(r.BaseVersion),
		Cause: r.Cause, CauseDetail: r.CauseDetail, Fields: r.Fields, FieldsSHA256: r.FieldsSha256, PromoterRoles: nonNil(r.PromoterRoles),
		CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy, CreatedByName: r.CreatedByName, ByRole: r.CreatedByRole}
}

func decisionRow(r dbsqlc.ItemProposalDecision) audit.ProposalDecisionRow {
	return audit.ProposalDecisionRow{Project: r.Project, Key: r.Key, Proposal: int(r.Proposal), Seq: r.Seq, Decision: r.Decision,
		Reason: r.Reason, Version: r.Version, SupersededVersion: r.SupersededVersion, Rebased: r.Rebased,
		CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy, ByRole: r.CreatedByRole}
}

// ProposalLockKeys serialises the proposal writes and decisions of keys
// until tx ends (in key order); a key without an item row has nothing
// else to lock.
func (tx *Tx) ProposalLockKeys(ctx context.Context, project string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := q.ProposalLockKeys(ctx, tx.ex, dbsqlc.ProposalLockKeysParams{Project: project, Keys: keys})
	return interpret(err)
}

// ProposalHead is an item's proposals at a glance: its last number and
// how many wait.
type ProposalHead struct{ Last, Pending int }

// ProposalHeads is the ProposalHead of each key that has proposals.
func (db DB) ProposalHeads(ctx context.Context, project string, keys []string) (map[string]ProposalHead, error) {
	rows, err := q.ProposalHeads(ctx, db.ex, dbsqlc.ProposalHeadsParams{Project: project, Keys: keys})
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[string]ProposalHead, len(rows))
	for _, r := range rows {
		out[r.Key] = ProposalHead{Last: int(r.Last), Pending: int(r.Pending)}
	}
	return out, nil
}

// ProposalPendingBy is the pending proposals of keys by one author.
func (db DB) ProposalPendingBy(ctx context.Context, project string, keys []string, author string) ([]Proposal, error) {
	rows, err := q.ProposalPendingBy(ctx, db.ex, dbsqlc.ProposalPendingByParams{Project: project, Keys: keys, CreatedBy: author})
	if err != nil {
		return nil, interpret(err)
	}
	return proposalsOf(rows)
}

// ProposalInsert stores a proposal (its Number given by the caller, its
// Seq taken from the project's event counter), with its audit entry, and
// wakes the event streams on channel when the transaction commits.
func (tx *Tx) ProposalInsert(ctx context.Context, p Proposal, channel string) (Proposal, error) {
	fields, err := json.Marshal(p.Fields)
	if err != nil {
		return Proposal{}, fmt.Errorf("encode proposal: %w", err)
	}
	seq, err := q.ProjectCounterNextHandoffSeq(ctx, tx.ex, p.Project)
	if err != nil {
		return Proposal{}, interpret(err)
	}
	r, err := q.ProposalInsert(ctx, tx.ex, dbsqlc.ProposalInsertParams{Project: p.Project, Key: p.Key, Proposal: int32(p.Number),
		Seq: seq, BaseVersion: int32(p.BaseVersion), Cause: p.Cause, CauseDetail: p.CauseDetail, Fields: fields,
		FieldsSha256: p.FieldsSHA256, PromoterRoles: nonNil(p.PromoterRoles), CreatedBy: p.CreatedBy,
		CreatedByName: p.CreatedByName, CreatedByRole: p.CreatedByRole})
	if err != nil {
		return Proposal{}, interpret(err)
	}
	body, err := audit.ProposalBody(proposalRow(r))
	if err := tx.entry(r.Project, audit.KindProposal, audit.ProposalSubject(r.Key, int(r.Proposal)), body, err); err != nil {
		return Proposal{}, err
	}
	if err := q.HandoffNotify(ctx, tx.ex, dbsqlc.HandoffNotifyParams{Channel: channel, Project: p.Project}); err != nil {
		return Proposal{}, interpret(err)
	}
	return proposalOf(r)
}

// ProposalGet is a proposal and its decision (nil while it is pending).
func (db DB) ProposalGet(ctx context.Context, project, key string, n int) (Proposal, *ProposalDecision, error) {
	r, err := q.ProposalGet(ctx, db.ex, dbsqlc.ProposalGetParams{Project: project, Key: key, Proposal: int32(n)})
	if err != nil {
		return Proposal{}, nil, interpret(err)
	}
	p, err := proposalOf(r)
	if err != nil {
		return Proposal{}, nil, err
	}
	d, err := q.ProposalDecisionGet(ctx, db.ex, dbsqlc.ProposalDecisionGetParams{Project: project, Key: key, Proposal: int32(n)})
	if err != nil {
		if err := interpret(err); !errors.Is(err, fault.ErrNotFound) {
			return Proposal{}, nil, err
		}
		return p, nil, nil
	}
	dec := decisionOf(d)
	return p, &dec, nil
}

// ProposalDecide stores a proposal's decision (its Seq taken from the
// project's event counter) with its audit entry, and wakes the event
// streams on channel when the transaction commits.
func (tx *Tx) ProposalDecide(ctx context.Context, d ProposalDecision, channel string) (ProposalDecision, error) {
	seq, err := q.ProjectCounterNextHandoffSeq(ctx, tx.ex, d.Project)
	if err != nil {
		return ProposalDecision{}, interpret(err)
	}
	var version, superseded *int32
	if d.Version > 0 {
		v := int32(d.Version)
		version = &v
	}
	if d.SupersededVersion > 0 {
		v := int32(d.SupersededVersion)
		superseded = &v
	}
	r, err := q.ProposalDecisionInsert(ctx, tx.ex, dbsqlc.ProposalDecisionInsertParams{Project: d.Project, Key: d.Key,
		Proposal: int32(d.Number), Seq: seq, Decision: d.Decision, Reason: d.Reason, Version: version,
		SupersededVersion: superseded, Rebased: d.Rebased, CreatedBy: d.CreatedBy, CreatedByRole: d.CreatedByRole})
	if err != nil {
		return ProposalDecision{}, interpret(err)
	}
	body, err := audit.ProposalDecisionBody(decisionRow(r))
	if err := tx.entry(r.Project, audit.KindProposalDecision, audit.ProposalSubject(r.Key, int(r.Proposal)), body, err); err != nil {
		return ProposalDecision{}, err
	}
	if err := q.HandoffNotify(ctx, tx.ex, dbsqlc.HandoffNotifyParams{Channel: channel, Project: d.Project}); err != nil {
		return ProposalDecision{}, interpret(err)
	}
	return decisionOf(r), nil
}

// ProposalListParams pages through a project's proposals, or one item's
// (Key), oldest first, of one Status ("" any, pending, promoted,
// rejected), as a caller of Role sees them (SeeAll: every one).
type ProposalListParams struct {
	Project, Key, Status string
	AfterSeq             int64
	SeeAll               bool
	Role                 string
	Max                  int
}

// ProposalList is a page of proposals, each with its decision (by
// position; nil while pending).
func (db DB) ProposalList(ctx context.Context, p ProposalListParams) ([]Proposal, []*ProposalDecision, error) {
	rows, err := q.ProposalList(ctx, db.ex, dbsqlc.ProposalListParams{Project: p.Project, AfterSeq: p.AfterSeq,
		Key: nullable(p.Key), Status: p.Status, SeeAll: p.SeeAll, Role: p.Role, Lim: int32(p.Max)})
	if err != nil {
		return nil, nil, interpret(err)
	}
	ps, err := proposalsOf(rows)
	if err != nil {
		return nil, nil, err
	}
	ds, err := db.proposalDecisions(ctx, p.Project, ps)
	return ps, ds, err
}

// proposalDecisions reads the decisions of ps, by position.
func (db DB) proposalDecisions(ctx context.Context, project string, ps []Proposal) ([]*ProposalDecision, error) {
	out := make([]*ProposalDecision, len(ps))
	if len(ps) == 0 {
		return out, nil
	}
	keys, nums := make([]string, len(ps)), make([]int32, len(ps))
	at := make(map[string]int, len(ps))
	for i, p := range ps {
		keys[i], nums[i] = p.Key, int32(p.Number)
		at[audit.ProposalSubject(p.Key, p.Number)] = i
	}
	rows, err := q.ProposalDecisionsOf(ctx, db.ex, dbsqlc.ProposalDecisionsOfParams{Project: project, Keys: keys, Proposals: nums})
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		d := decisionOf(r)
		out[at[audit.ProposalSubject(d.Key, d.Number)]] = &d
	}
	return out, nil
}

// ProposalLink is a promotion that made or superseded a version.
type ProposalLink struct {
	Proposal                   int
	Version, SupersededVersion int
	At                         time.Time
	ProposedBy                 string
}

// ProposalLinks is the promotions that made or superseded any of an
// item's versions, by proposal.
func (db DB) ProposalLinks(ctx context.Context, project, key string, versions []int) ([]ProposalLink, error) {
	vs := make([]int32, len(versions))
	for i, v := range versions {
		vs[i] = int32(v)
	}
	rows, err := q.ProposalLinks(ctx, db.ex, dbsqlc.ProposalLinksParams{Project: project, Key: key, Versions: vs})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]ProposalLink, len(rows))
	for i, r := range rows {
		out[i] = ProposalLink{Proposal: int(r.Proposal), At: r.CreatedAt.UTC(), ProposedBy: r.ProposedBy}
		if r.Version != nil {
			out[i].Version = int(*r.Version)
		}
		if r.SupersededVersion != nil {
			out[i].SupersededVersion = int(*r.SupersededVersion)
		}
	}
	return out, nil
}

// CurrentWithProposals is an item's current version with its pending
// proposals' count and the promotion that made it (PromotedFrom 0: none).
type CurrentWithProposals struct {
	Version      *ctxtype.Version
	Pending      int
	PromotedFrom int
	ProposedBy   string
}

// ItemVersionCurrentProposals is ItemVersionCurrent with what an item's
// GET says of its proposals to a caller of role (every one with seesAll),
// in one statement.
func (db DB) ItemVersionCurrentProposals(ctx context.Context, project, key, role string, seesAll bool) (CurrentWithProposals, error) {
	r, err := q.ItemVersionCurrentProposals(ctx, db.ex, dbsqlc.ItemVersionCurrentProposalsParams{Project: project, Key: key,
		Role: role, SeeAll: seesAll})
	if err != nil {
		return CurrentWithProposals{}, interpret(err)
	}
	return CurrentWithProposals{Version: versionOf(r.ItemVersionRow), Pending: int(r.PendingProposals),
		PromotedFrom: int(r.PromotedFrom), ProposedBy: r.ProposedBy}, nil
}

// PromoterGrant is one distinct grant of the agents that may edit a
// project (ProposalPromoters).
type PromoterGrant struct {
	Role, Permission, MaxAuthority string
	// SharedScope: the agent's scope is every project or names _shared.
	SharedScope bool
}

// ProposalPromoters is the distinct grants of the live agents that may
// edit project, other than the author (by id, and by name).
func (db DB) ProposalPromoters(ctx context.Context, project, author, authorName string) ([]PromoterGrant, error) {
	rows, err := q.ProposalPromoters(ctx, db.ex, dbsqlc.ProposalPromotersParams{Project: project, Author: author, AuthorName: authorName})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]PromoterGrant, len(rows))
	for i, r := range rows {
		out[i] = PromoterGrant{Role: r.Role, Permission: r.Permission, MaxAuthority: r.MaxAuthority, SharedScope: r.SharedScope}
	}
	return out, nil
}

// ProposalEvent is one event of a proposal in a project's event stream:
// its creation (proposal_created) or its decision (proposal_promoted,
// proposal_rejected).
type ProposalEvent struct {
	Seq                      int64
	Event, Key               string
	Proposal                 int
	Authority                string
	PromoterRoles            []string
	Author, AuthorRole       string
	Actor, ActorRole, Reason string
	Version                  int
	CreatedAt                time.Time
}

// ProposalEventMaxSeq is the number of the project's last proposal event.
func (db DB) ProposalEventMaxSeq(ctx context.Context, project string) (int64, error) {
	n, err := q.ProposalEventMaxSeq(ctx, db.ex, project)
	return n, interpret(err)
}

// ProposalStreamFilter is which proposal events a stream carries: those
// for the inbox of a role that may promote them (TargetRole) and of their
// authors' role (SourceRole), "" for any; of them, those whose item and
// proposal the listener's role (Viewer) may see, every one with SeesAll.
type ProposalStreamFilter struct {
	TargetRole, SourceRole, Viewer string
	SeesAll                        bool
}

// ProposalEventStream is up to max proposal events after seq that f lets
// through.
func (db DB) ProposalEventStream(ctx context.Context, project string, after int64, f ProposalStreamFilter, max int) ([]ProposalEvent, error) {
	rows, err := q.ProposalEventStream(ctx, db.ex, dbsqlc.ProposalEventStreamParams{Project: project, After: after,
		TargetRole: nullable(f.TargetRole), SourceRole: nullable(f.SourceRole), SeeAll: f.SeesAll, Role: f.Viewer, Max: int32(max)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]ProposalEvent, len(rows))
	for i, r := range rows {
		out[i] = ProposalEvent{Seq: r.Seq, Event: r.Event, Key: r.Key, Proposal: int(r.Proposal), Authority: r.Authority,
			PromoterRoles: nonNil(r.PromoterRoles), Author: r.Author, AuthorRole: r.AuthorRole, Actor: r.Actor,
			ActorRole: r.ActorRole, Reason: r.Reason, Version: int(r.Version), CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}
