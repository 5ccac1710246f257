package item

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// DecideParams are a promotion's or a rejection's: Reason (required to
// reject; a promotion's note, optional) and, to promote a proposal made
// against a version that is no longer current, Rebase.
type DecideParams struct {
	Reason string
	Rebase bool
}

// Decided is a decision's outcome: the proposal decided, and for a
// promotion the item's version it became.
type Decided struct {
	Proposal Proposal
	Version  *ctxtype.Version
}

// Link is the promotion that made the decided version, as its reads
// show it.
func (d Decided) Link() *store.ProposalLink {
	if d.Proposal.Decision == nil {
		return nil
	}
	return &store.ProposalLink{Proposal: d.Proposal.Number, Version: d.Proposal.Decision.Version,
		At: d.Proposal.Decision.CreatedAt, ProposedBy: d.Proposal.CreatedBy}
}

// Promote makes a pending proposal the item's next version, in a
// transaction of its own.
func (s *Service) Promote(ctx context.Context, agent *auth.Agent, proj, key string, n int, dp DecideParams) (Decided, error) {
	var out Decided
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.PromoteTx(ctx, tx, agent, proj, key, n, dp)
		return err
	})
	return out, err
}

// PromoteTx makes a pending proposal the item's next version, as agent,
// in tx. agent must be allowed to edit the project and see the item, its
// grant must cover the authority the proposal asks for (the source's
// ceiling is what the promotion vouches for: a person or process with the
// grant read it), and it must not be the proposal's author: 403
// self_promotion, admins included, for the author's own agent and for any
// agent of the author's name. A proposal made against a version that is
// no longer current is 409 stale_proposal unless dp.Rebase. The new
// version is written by the promoter (its created_by), through the one
// write path; it supersedes the live version before it, which reads then
// show superseded, and a state item's with its valid_until.
func (s *Service) PromoteTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, key string, n int, dp DecideParams) (Decided, error) {
	var errs validation.List
	limits.Chars(&errs, "/reason", dp.Reason, limits.Get().Text)
	if err := errs.Err(); err != nil {
		return Decided{}, err
	}
	p, cur, exists, err := s.lockProposal(ctx, tx, agent, proj, key, n)
	if err != nil {
		return Decided{}, err
	}
	if err := s.mayDecide(ctx, tx, agent, p, true); err != nil {
		return Decided{}, err
	}
	if p.Decision != nil {
		return Decided{}, decidedError(p)
	}
	curVersion := 0
	if exists {
		curVersion = cur.Version
	}
	stale := curVersion != p.BaseVersion
	if stale && !dp.Rebase {
		return Decided{}, &ProposalError{Kind: fault.ErrConflict, Code: "stale_proposal",
			Msg: fmt.Sprintf(`proposal %d of %s was made against version %d, and the current version is %d; promote it with "rebase": true to replace it anyway`,
				n, key, p.BaseVersion, curVersion),
			Extra: map[string]any{"base_version": p.BaseVersion, "current_version": curVersion}}
	}
	if err := promotable(p.Fields); err != nil {
		return Decided{}, err
	}
	pr, err := prepare(key, proposalFields(p.Fields))
	if err != nil {
		return Decided{}, err
	}
	current := map[string]store.CurrentItem{}
	if exists {
		current[key] = cur
	}
	es, err := s.writeLocked(ctx, tx, agent, proj, []prepared{pr}, current, nil)
	if err != nil {
		return Decided{}, err
	}
	d := store.ProposalDecision{Project: proj, Key: key, Number: n, Decision: ProposalPromoted, Reason: dp.Reason,
		Version: es[0].Version, Rebased: stale, CreatedBy: agent.ID, CreatedByRole: agent.Role}
	if es[0].Status == Updated {
		d.SupersededVersion = curVersion
	}
	if p.Decision, err = s.decide(ctx, tx, d); err != nil {
		return Decided{}, err
	}
	v, err := tx.ItemVersionGet(ctx, proj, key, es[0].Version)
	if err != nil {
		return Decided{}, err
	}
	return Decided{Proposal: p, Version: v}, nil
}

// Reject decides a pending proposal rejected, with a reason, in a
// transaction of its own.
func (s *Service) Reject(ctx context.Context, agent *auth.Agent, proj, key string, n int, reason string) (Proposal, error) {
	var out Proposal
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.RejectTx(ctx, tx, agent, proj, key, n, reason)
		return err
	})
	return out, err
}

// RejectTx rejects a pending proposal in tx. A reason is required (422
// without one). Who may promote it may reject it, and so may its author
// (taking it back).
func (s *Service) RejectTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, key string, n int, reason string) (Proposal, error) {
	var errs validation.List
	if strings.TrimSpace(reason) == "" {
		errs.Add("/reason", "required", "a rejection needs a reason")
	}
	limits.Chars(&errs, "/reason", reason, limits.Get().Text)
	if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Edit); err != nil {
		return Proposal{}, err
	}
	if err := errs.Err(); err != nil {
		return Proposal{}, err
	}
	p, _, _, err := s.lockProposal(ctx, tx, agent, proj, key, n)
	if err != nil {
		return Proposal{}, err
	}
	if err := s.mayDecide(ctx, tx, agent, p, false); err != nil {
		return Proposal{}, err
	}
	if p.Decision != nil {
		return Proposal{}, decidedError(p)
	}
	p.Decision, err = s.decide(ctx, tx, store.ProposalDecision{Project: proj, Key: key, Number: n, Decision: ProposalRejected,
		Reason: reason, CreatedBy: agent.ID, CreatedByRole: agent.Role})
	return p, err
}

// lockProposal authorizes a decision of proposal n of key (edit in the
// project), locks the item's row and its proposals, and reads the
// proposal with its decision and the item's current row. A proposal that
// does not exist, or that agent may not see, is not found.
func (s *Service) lockProposal(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, key string, n int) (Proposal, store.CurrentItem, bool, error) {
	if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Edit); err != nil {
		return Proposal{}, store.CurrentItem{}, false, err
	}
	if !ValidKey(key) || n < 1 {
		return Proposal{}, store.CurrentItem{}, false, proposalNotFound(key, n)
	}
	if err := s.projects.Writable(ctx, tx, proj); err != nil {
		return Proposal{}, store.CurrentItem{}, false, err
	}
	current, err := tx.ItemLockCurrent(ctx, proj, []string{key})
	if err != nil {
		return Proposal{}, store.CurrentItem{}, false, err
	}
	if err := tx.ProposalLockKeys(ctx, proj, []string{key}); err != nil {
		return Proposal{}, store.CurrentItem{}, false, err
	}
	sp, d, err := tx.ProposalGet(ctx, proj, key, n)
	if err != nil {
		return Proposal{}, store.CurrentItem{}, false, notFoundProposal(err, key, n)
	}
	cur, exists := current[key]
	var roles *ctxtype.Roles
	if exists {
		roles = &cur.Roles
	}
	if !seesProposal(agent, sp.Fields, roles) {
		return Proposal{}, store.CurrentItem{}, false, proposalNotFound(key, n)
	}
	return Proposal{Proposal: sp, Decision: d}, cur, exists, nil
}

// mayDecide refuses a decision agent may not take: the author promoting
// its own proposal (self_promotion, admins included), or anyone but its
// author deciding it without a grant that covers its authority. The
// author may reject its own (promote false).
func (s *Service) mayDecide(ctx context.Context, tx *store.Tx, agent *auth.Agent, p Proposal, promote bool) error {
	nameNow := ""
	if a, err := tx.AgentGet(ctx, p.CreatedBy); err == nil {
		nameNow = a.Name // an author renamed since is still its author
	}
	if sameAuthor(agent, p.Proposal, nameNow) {
		if !promote {
			return nil
		}
		return &ProposalError{Kind: fault.ErrForbidden, Code: "self_promotion",
			Msg: fmt.Sprintf("proposal %d of %s was made by %s (%s); another principal must promote it", p.Number, p.Key, p.CreatedByName, p.CreatedBy)}
	}
	if !covers(agent, p.Fields.Authority) {
		return &ProposalError{Kind: fault.ErrForbidden, Code: "authority_exceeds_grant",
			Msg: fmt.Sprintf("proposal %d of %s asks for authority %q, above this agent's max_authority %q", p.Number, p.Key, p.Fields.Authority, agent.Ceiling())}
	}
	return nil
}

// decide stores a decision; its event goes to the same inboxes as the
// proposal's.
func (s *Service) decide(ctx context.Context, tx *store.Tx, d store.ProposalDecision) (*store.ProposalDecision, error) {
	out, err := tx.ProposalDecide(ctx, d, NotifyChannel)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// notFoundProposal names the proposal in a store's not-found.
func notFoundProposal(err error, key string, n int) error {
	if errors.Is(err, fault.ErrNotFound) {
		return proposalNotFound(key, n)
	}
	return err
}

// promotable refuses, as a write of them would be refused, the fields of a
// proposal stored before a limit they exceed: a trigger's tool over
// maxTool characters (the limit came with 00041; such a tool overflows
// the index entries of the item row's lanes).
func promotable(f ctxtype.Fields) error {
	var errs validation.List
	if t := f.Trigger.Tool; t != nil {
		limits.Chars(&errs, "/trigger/tool", *t, maxTool)
	}
	return errs.Err()
}
