package item

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// A proposal is an item write that is stored but is not current: no
// packet serves it, and an item's GET shows its current version and how
// many proposals wait. Another principal, whose grant covers the
// authority the proposal asks for, promotes it (it becomes the item's next
// version) or rejects it with a reason (docs/proposals.md). Proposals and
// their decisions are append-only, like versions, and each is an entry of
// the project's audit chain.

// MaxPending is the most pending proposals one item may have: past it a
// proposal is 409 too_many_proposals, so that a writer cannot bury an
// item's reviewers (nor the item's GET, which counts them).
const MaxPending = 20

// The causes of a proposal: the write asked to be one, it claimed more
// authority than its writer's grant or its source's ceiling allow in a
// project whose on_excess_authority is propose, or a KXM import said
// status proposed.
const (
	CauseAsked  = "asked"
	CauseExcess = "excess_authority"
	CauseImport = "import"
)

// The statuses of a proposal, and of its decision.
const (
	ProposalPending  = "pending"
	ProposalPromoted = "promoted"
	ProposalRejected = "rejected"
)

// ProposalStatuses are the statuses a listing filters by.
var ProposalStatuses = []string{ProposalPending, ProposalPromoted, ProposalRejected}

// Proposed is a batch entry's status for an item that became a proposal.
const Proposed Status = "proposed"

// Proposal is a proposal with its decision (nil while it is pending).
type Proposal struct {
	store.Proposal
	Decision *store.ProposalDecision
}

// Status is pending, promoted or rejected.
func (p Proposal) Status() string {
	if p.Decision == nil {
		return ProposalPending
	}
	return p.Decision.Decision
}

// ProposalError is a refusal of a proposal's write or decision with a
// problem code of its own: Kind is its fault kind (its status), Code the
// problem's code, Extra the problem's further members. A state conflict
// (a proposal decided already) carries its State.
type ProposalError struct {
	Kind  error
	Code  string
	Msg   string
	State string
	Extra map[string]any
}

func (e *ProposalError) Error() string { return e.Msg }

// Is makes a ProposalError its kind.
func (e *ProposalError) Is(target error) bool { return target == e.Kind }

// ProblemCode is the problem's code ("" leaves the kind's own).
func (e *ProposalError) ProblemCode() string { return e.Code }

// ProblemExtra is the problem's further members.
func (e *ProposalError) ProblemExtra() map[string]any { return e.Extra }

// CurrentState is the state of a proposal decided already.
func (e *ProposalError) CurrentState() string { return e.State }

// proposalNotFound is a proposal that does not exist or that the caller
// may not see, which must look the same.
func proposalNotFound(key string, n int) error {
	return fmt.Errorf("%w: proposal %d of %s", ErrNotFound, n, key)
}

// proposalFields are a stored proposal's fields as its write normalised
// them: jsonb gives metadata back with its keys in its own order, so they
// are put back in canonical form, and the version a promotion makes
// hashes as the same write sent directly would.
func proposalFields(f ctxtype.Fields) ctxtype.Fields {
	var errs validation.List
	if len(f.Metadata) == 0 {
		f.Metadata = json.RawMessage(`{}`)
	} else {
		f.Metadata = normalizeMetadata("", f.Metadata, &errs)
	}
	f.Roles = ctxtype.Roles{VisibleTo: nonNil(f.Roles.VisibleTo), HiddenFrom: nonNil(f.Roles.HiddenFrom)}
	f.Provenance.DerivedFrom = nonNil(f.Provenance.DerivedFrom)
	if f.ValidFrom != nil {
		t := f.ValidFrom.UTC()
		f.ValidFrom = &t
	}
	if f.ValidUntil != nil {
		t := f.ValidUntil.UTC()
		f.ValidUntil = &t
	}
	return f
}

// seesProposal reports whether agent may see a proposal of fields on an
// item whose current roles are cur (nil: the key has no version): both
// must let its role see, unless it sees every role.
func seesProposal(agent *auth.Agent, f ctxtype.Fields, cur *ctxtype.Roles) bool {
	if agent.SeesAllRoles() {
		return true
	}
	return f.Roles.Visible(agent.Role) && (cur == nil || cur.Visible(agent.Role))
}

// covers reports whether an agent's grant covers an authority.
func covers(agent *auth.Agent, authority string) bool {
	return auth.Capped(authority, agent.Ceiling()) == authority
}

// sameAuthor reports whether agent is the proposal's author: the same
// agent, or an agent of the author's name (two keys of one principal).
func sameAuthor(agent *auth.Agent, p store.Proposal, authorNow string) bool {
	return agent.ID == p.CreatedBy || agent.Name == p.CreatedByName || (authorNow != "" && agent.Name == authorNow)
}

// promoterRoles are the roles of the agents, among grants, that could
// promote a proposal of fields in project proj on an item of current
// roles cur: they may edit the project, their grant covers the
// authority, and they may see the item and the proposal. grants come
// from store.DB.ProposalPromoters, which leaves the author out.
func promoterRoles(grants []store.PromoterGrant, proj string, f ctxtype.Fields, cur *ctxtype.Roles) []string {
	var out []string
	for _, g := range grants {
		// The grants are of agents whose scope holds proj; for _shared
		// only SharedScope says how.
		a := &auth.Agent{Role: g.Role, Permission: auth.Permission(g.Permission), MaxAuthority: g.MaxAuthority, Projects: []string{proj}}
		switch {
		case g.SharedScope:
			a.Projects = []string{auth.AllProjects}
		case proj == auth.SharedProject:
			a.Projects = nil
		}
		if a.Can(proj, auth.Edit) && covers(a, f.Authority) && seesProposal(a, f, cur) && !slices.Contains(out, g.Role) {
			out = append(out, g.Role)
		}
	}
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// Promoters are the roles that may promote a proposal now: the roles of
// the live agents other than its author whose grant covers its authority,
// that may edit the project and see the item. It is who an item's why
// names, and the proposal's answer; the roles whose inboxes got its event
// were those when it was made (store.Proposal.PromoterRoles).
func (s *Service) Promoters(ctx context.Context, db store.DB, p store.Proposal, cur *ctxtype.Roles) ([]string, error) {
	grants, err := db.ProposalPromoters(ctx, p.Project, p.CreatedBy, p.CreatedByName)
	if err != nil {
		return nil, err
	}
	return promoterRoles(grants, p.Project, p.Fields, cur), nil
}

// decidedError is a decision of a proposal decided already: 409 with its
// state.
func decidedError(p Proposal) error {
	return &ProposalError{Kind: fault.ErrStateConflict, State: p.Status(),
		Msg: fmt.Sprintf("proposal %d of %s is %s already; only a pending proposal can be promoted or rejected", p.Number, p.Key, p.Status())}
}

// DecidableBy says whether agent may promote the proposal, and reject it,
// as PromoteTx and RejectTx would decide for an agent that may edit its
// project: not its author (who may reject, taking it back), and with a
// grant that covers its authority. The explorer offers the controls it
// allows; the decision itself is the service's.
func (p Proposal) DecidableBy(agent *auth.Agent) (promote, reject bool) {
	if p.Decision != nil || !agent.Can(p.Project, auth.Edit) {
		return false, false
	}
	if sameAuthor(agent, p.Proposal, "") {
		return false, true
	}
	ok := covers(agent, p.Fields.Authority)
	return ok, ok
}
