package item

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
)

// NotifyChannel is the channel that wakes the project event streams
// (handoff.NotifyChannel, which carries proposal events too): the item
// package cannot import handoff, which imports what imports it.
const NotifyChannel = "contextd_handoff_events"

// cause is why a write becomes a proposal ("" for none: it is written),
// with the detail of a write over its grant.
type cause struct{ cause, detail string }

// proposalCauses says, for each item of a write, whether it becomes a
// proposal: those whose write asked to be one (propose) with cause asked,
// and those whose claim (claims, by position) breaks the writer's grant or
// its source's ceiling with CauseExcess when the project's
// on_excess_authority is propose; else the claims are refused as before
// (403 authority_exceeds_grant). The project is read only when a claim
// breaks a ceiling.
func (s *Service) proposalCauses(ctx context.Context, db store.DB, agent *auth.Agent, proj, asked string, propose []bool, claims []auth.Claim) ([]cause, error) {
	out := make([]cause, len(claims))
	var over []auth.Claim
	var at []int
	for i, c := range claims {
		if propose[i] {
			out[i] = cause{cause: asked}
			continue
		}
		if err := agent.CheckAuthority([]auth.Claim{c}); err != nil {
			over, at = append(over, c), append(at, i)
		}
	}
	if len(over) == 0 {
		return out, nil
	}
	refusal := agent.CheckAuthority(over)
	policy, err := s.projects.OnExcessAuthority(ctx, db, proj)
	if err != nil {
		return nil, err
	}
	if policy != project.ExcessPropose {
		return nil, refusal
	}
	for j, i := range at {
		var ge *auth.GrantError
		detail := ""
		if errors.As(agent.CheckAuthority(over[j:j+1]), &ge) && len(ge.Fields) > 0 {
			detail = ge.Fields[0].Detail
		}
		out[i] = cause{cause: CauseExcess, detail: detail}
	}
	return out, nil
}

// splitByCause is the positions of the items written and of those
// proposed.
func splitByCause(causes []cause) (written, proposed []int) {
	for i, c := range causes {
		if c.cause == "" {
			written = append(written, i)
		} else {
			proposed = append(proposed, i)
		}
	}
	return written, proposed
}

// pick is the elements of xs at positions at.
func pick[T any](xs []T, at []int) []T {
	out := make([]T, len(at))
	for j, i := range at {
		out[j] = xs[i]
	}
	return out
}

// proposeBatch proposes a batch's items at positions proposed, whose rows
// tx holds (current), and puts their entries in out.
func (s *Service) proposeBatch(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, keys []string, fields []ctxtype.Fields,
	causes []cause, proposed []int, current map[string]store.CurrentItem, out []BatchEntry) error {
	ps, err := prepareAll(pick(keys, proposed), pick(fields, proposed), runtime.GOMAXPROCS(0))
	if err != nil {
		return err
	}
	es, _, err := s.proposeLocked(ctx, tx, agent, proj, ps, pick(causes, proposed), current, nil)
	if err != nil {
		return err
	}
	for j, i := range proposed {
		out[i] = es[j]
	}
	return nil
}

// proposeImported proposes an import's items at positions proposed,
// locking their rows first (the import's writes locked theirs).
func (s *Service) proposeImported(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, ps []prepared, causes []cause, proposed []int, out []BatchEntry) error {
	todo := pick(ps, proposed)
	keys := make([]string, len(todo))
	for i, p := range todo {
		keys[i] = p.key
	}
	current, err := tx.ItemLockCurrent(ctx, proj, sortedCopy(keys))
	if err != nil {
		return err
	}
	es, _, err := s.proposeLocked(ctx, tx, agent, proj, todo, pick(causes, proposed), current, nil)
	if err != nil {
		return err
	}
	for j, i := range proposed {
		out[i] = es[j]
	}
	return nil
}

// proposeOne is a single write that became a proposal, in tx.
func (s *Service) proposeOne(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, p prepared, c cause, ifMatch *Precondition) (PutResult, error) {
	if err := s.projects.Writable(ctx, tx, proj); err != nil {
		return PutResult{}, err
	}
	current, err := tx.ItemLockCurrent(ctx, proj, []string{p.key})
	if err != nil {
		return PutResult{}, err
	}
	es, props, err := s.proposeLocked(ctx, tx, agent, proj, []prepared{p}, []cause{c}, current, ifMatch)
	if err != nil {
		return PutResult{}, fmt.Errorf("propose item %s/%s: %w", proj, p.key, err)
	}
	if props[0] == nil { // the item holds these fields already
		v, err := tx.ItemVersionCurrent(ctx, proj, p.key)
		if err != nil {
			return PutResult{}, err
		}
		return PutResult{Version: v, Status: Unchanged}, nil
	}
	return PutResult{Status: es[0].Status, Proposal: props[0]}, nil
}

// proposeLocked stores the proposals of ps (distinct keys), whose item
// rows tx holds (current), each for its cause: a batch entry for each,
// and the proposal it made or found (nil when the item's live version has
// these fields already: there is nothing to propose). It refuses as a
// write would an item the writer may not see, and a failed If-Match; a
// writer's pending proposal of the same fields is answered again (an
// import run twice changes nothing); past MaxPending pending proposals an
// item takes no more (409 too_many_proposals).
func (s *Service) proposeLocked(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, ps []prepared, causes []cause,
	current map[string]store.CurrentItem, ifMatch *Precondition) ([]BatchEntry, []*Proposal, error) {
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.key
	}
	keys = sortedCopy(keys)
	if err := tx.ProposalLockKeys(ctx, proj, keys); err != nil {
		return nil, nil, err
	}
	var (
		heads  map[string]store.ProposalHead
		mine   []store.Proposal
		grants []store.PromoterGrant
	)
	err := tx.Reads(ctx,
		func(db store.DB) (err error) { heads, err = db.ProposalHeads(ctx, proj, keys); return err },
		func(db store.DB) (err error) { mine, err = db.ProposalPendingBy(ctx, proj, keys, agent.ID); return err },
		func(db store.DB) (err error) {
			grants, err = db.ProposalPromoters(ctx, proj, agent.ID, agent.Name)
			return err
		})
	if err != nil {
		return nil, nil, err
	}
	es, props := make([]BatchEntry, len(ps)), make([]*Proposal, len(ps))
	for i, p := range ps {
		cur, exists := current[p.key]
		if err := checkProposal(agent, p, cur, exists, ifMatch); err != nil {
			return nil, nil, err
		}
		base := 0
		if exists {
			base = cur.Version
		}
		es[i] = BatchEntry{Key: p.key, Version: base, Status: Proposed}
		if exists && cur.Live && bytes.Equal(cur.FieldsSHA256, p.fieldsHash) {
			es[i].Status = Unchanged
			continue
		}
		if j := slices.IndexFunc(mine, func(m store.Proposal) bool { return m.Key == p.key && bytes.Equal(m.FieldsSHA256, p.fieldsHash) }); j >= 0 {
			es[i].Status, es[i].Proposal, props[i] = Unchanged, mine[j].Number, &Proposal{Proposal: mine[j]}
			continue
		}
		if heads[p.key].Pending >= MaxPending {
			return nil, nil, tooManyProposals(p.key)
		}
		var roles *ctxtype.Roles
		if exists {
			roles = &cur.Roles
		}
		sp, err := tx.ProposalInsert(ctx, store.Proposal{Project: proj, Key: p.key, Number: heads[p.key].Last + 1, BaseVersion: base,
			Cause: causes[i].cause, CauseDetail: causes[i].detail, Fields: p.fields, FieldsSHA256: p.fieldsHash,
			PromoterRoles: promoterRoles(grants, proj, p.fields, roles), CreatedBy: agent.ID, CreatedByName: agent.Name,
			CreatedByRole: agent.Role}, NotifyChannel)
		if err != nil {
			return nil, nil, err
		}
		es[i].Proposal, props[i] = sp.Number, &Proposal{Proposal: sp}
	}
	return es, props, nil
}

// checkProposal refuses a proposal as a write is refused: an item hidden
// from its writer does not exist for it (or fails its If-Match), and an
// If-Match must name the current version.
func checkProposal(agent *auth.Agent, p prepared, cur store.CurrentItem, exists bool, ifMatch *Precondition) error {
	if exists && !agent.SeesAllRoles() && !cur.Roles.Visible(agent.Role) {
		if ifMatch != nil {
			return fmt.Errorf("%w: If-Match %s, but the item has no live version", fault.ErrPreconditionFailed, ifMatch)
		}
		return fmt.Errorf("%w: %s", ErrNotFound, p.key)
	}
	if ifMatch != nil && (!exists || !ifMatch.Holds(cur.Live, cur.Version)) {
		have := "no live version"
		if exists && cur.Live {
			have = fmt.Sprintf("version %d", cur.Version)
		}
		return fmt.Errorf("%w: If-Match %s, but the item has %s", fault.ErrPreconditionFailed, ifMatch, have)
	}
	return nil
}

// tooManyProposals refuses a proposal of an item that has MaxPending
// pending already.
func tooManyProposals(key string) error {
	return &ProposalError{Kind: fault.ErrConflict, Code: "too_many_proposals",
		Msg:   fmt.Sprintf("item %s has %d pending proposals, the most it may have; promote or reject some first", key, MaxPending),
		Extra: map[string]any{"max_pending": MaxPending}}
}
