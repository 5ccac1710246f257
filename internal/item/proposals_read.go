package item

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// ProposalListParams filter a listing of proposals: one item's (Key) or
// the project's, of one Status ("" any).
type ProposalListParams struct {
	Key, Status, Cursor string
	Limit               int
}

type proposalCursor struct {
	Seq int64 `json:"s"`
}

func proposalsListing(proj, key, status string) string {
	return page.Listing("proposals", proj, key, status)
}

// Proposals lists the proposals the agent may see, oldest first: a
// project's, or with lp.Key an item's. An item the agent may not see, or
// a key with neither a version nor a proposal it may see, is not found.
func (s *Service) Proposals(ctx context.Context, agent *auth.Agent, proj string, lp ProposalListParams) ([]Proposal, string, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, "", err
	}
	if lp.Status != "" && !validation.OneOf(lp.Status, ProposalStatuses...) {
		return nil, "", validation.One("status", "enum", "status must be pending, promoted or rejected, not %s", validation.QuoteShort(lp.Status))
	}
	itemSeen := false
	if lp.Key != "" {
		if !ValidKey(lp.Key) {
			return nil, "", fmt.Errorf("%w: %s", ErrNotFound, lp.Key)
		}
		cur, err := s.store.ItemVersionCurrent(ctx, proj, lp.Key)
		switch {
		case errors.Is(err, fault.ErrNotFound):
		case err != nil:
			return nil, "", err
		case !agent.SeesAllRoles() && !cur.Roles.Visible(agent.Role):
			return nil, "", fmt.Errorf("%w: %s", ErrNotFound, lp.Key)
		default:
			itemSeen = true
		}
	}
	listing := proposalsListing(proj, lp.Key, lp.Status)
	var c proposalCursor
	if _, err := page.Decode(lp.Cursor, listing, &c); err != nil {
		return nil, "", err
	}
	ps, ds, err := s.store.ProposalList(ctx, store.ProposalListParams{Project: proj, Key: lp.Key, Status: lp.Status,
		AfterSeq: c.Seq, SeeAll: agent.SeesAllRoles(), Role: agent.Role, Max: lp.Limit + 1})
	if err != nil {
		return nil, "", fmt.Errorf("list proposals: %w", err)
	}
	if lp.Key != "" && !itemSeen && len(ps) == 0 && lp.Cursor == "" {
		return nil, "", fmt.Errorf("%w: %s", ErrNotFound, lp.Key)
	}
	out := make([]Proposal, 0, min(len(ps), lp.Limit))
	next := ""
	for i, p := range ps {
		if i == lp.Limit {
			next = page.Encode(listing, proposalCursor{Seq: ps[i-1].Seq})
			break
		}
		out = append(out, Proposal{Proposal: p, Decision: ds[i]})
	}
	return out, next, nil
}

// ProposalGet is one proposal with its decision, and the roles that may
// promote it now (none once it is decided).
func (s *Service) ProposalGet(ctx context.Context, agent *auth.Agent, proj, key string, n int) (Proposal, []string, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return Proposal{}, nil, err
	}
	if !ValidKey(key) || n < 1 {
		return Proposal{}, nil, proposalNotFound(key, n)
	}
	sp, d, err := s.store.ProposalGet(ctx, proj, key, n)
	if err != nil {
		return Proposal{}, nil, notFoundProposal(err, key, n)
	}
	var roles *ctxtype.Roles
	cur, err := s.store.ItemVersionCurrent(ctx, proj, key)
	switch {
	case err == nil:
		roles = &cur.Roles
	case !errors.Is(err, fault.ErrNotFound):
		return Proposal{}, nil, err
	}
	if !seesProposal(agent, sp.Fields, roles) {
		return Proposal{}, nil, proposalNotFound(key, n)
	}
	p := Proposal{Proposal: sp, Decision: d}
	promoters := []string{}
	if d == nil {
		if promoters, err = s.Promoters(ctx, s.store.DB, sp, roles); err != nil {
			return Proposal{}, nil, err
		}
	}
	return p, promoters, nil
}

// Pending is what an item's why says of its pending proposals: how many
// wait, their numbers (the first MaxPending), and the roles that may
// promote at least one of them.
type Pending struct {
	Count     int
	Numbers   []int
	Promoters []string
}

// PendingIn is the pending proposals of an item that agent may see, read
// through db, nil when there are none: why names them and who may
// promote them. The caller has authorized agent to read the project.
func PendingIn(ctx context.Context, db store.DB, agent *auth.Agent, proj, key string) (*Pending, error) {
	var roles *ctxtype.Roles
	cur, err := db.ItemVersionCurrent(ctx, proj, key)
	switch {
	case err == nil:
		if !agent.SeesAllRoles() && !cur.Roles.Visible(agent.Role) {
			return nil, nil
		}
		roles = &cur.Roles
	case !errors.Is(err, fault.ErrNotFound):
		return nil, err
	}
	ps, _, err := db.ProposalList(ctx, store.ProposalListParams{Project: proj, Key: key, Status: ProposalPending,
		SeeAll: agent.SeesAllRoles(), Role: agent.Role, Max: MaxPending})
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	out := &Pending{Count: len(ps), Promoters: []string{}}
	for _, p := range ps {
		out.Numbers = append(out.Numbers, p.Number)
		grants, err := db.ProposalPromoters(ctx, p.Project, p.CreatedBy, p.CreatedByName)
		if err != nil {
			return nil, err
		}
		rs := promoterRoles(grants, p.Project, p.Fields, roles)
		for _, r := range rs {
			if !slices.Contains(out.Promoters, r) {
				out.Promoters = append(out.Promoters, r)
			}
		}
	}
	return out, nil
}

// Describe is the pending proposals as why says them.
func (p *Pending) Describe() string {
	who := "no agent's grant covers them yet"
	if len(p.Promoters) > 0 {
		who = "an agent of role " + strings.Join(p.Promoters, ", ") + " may promote them (not their author)"
	}
	return fmt.Sprintf("%d proposals of this item wait for promotion, never served until promoted; %s.", p.Count, who)
}

// ItemView is an item's version as its GET answers it: with, for the
// current version, how many proposals wait; the promotion that made it,
// if one did; and the promotion that superseded it, if one did.
type ItemView struct {
	Version *ctxtype.Version
	// Pending is the count of pending proposals (the current version's
	// GET only).
	Pending      int
	PromotedFrom *store.ProposalLink
	SupersededBy *store.ProposalLink
}

// GetView is Get with what its answer says of proposals: the current
// version in one statement, or the version current at asOf with its
// links. A state item's version that a promotion superseded shows that
// moment as its valid_until (unless its own ends sooner).
func (s *Service) GetView(ctx context.Context, agent *auth.Agent, proj, key string, asOf *time.Time) (ItemView, error) {
	if asOf != nil {
		v, err := s.Get(ctx, agent, proj, key, asOf)
		if err != nil {
			return ItemView{}, err
		}
		views, err := s.withLinks(ctx, proj, key, []*ctxtype.Version{v})
		if err != nil {
			return ItemView{}, err
		}
		return views[0], nil
	}
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return ItemView{}, err
	}
	if !ValidKey(key) {
		return ItemView{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	c, err := s.store.ItemVersionCurrentProposals(ctx, proj, key, agent.Role, agent.SeesAllRoles())
	if err != nil {
		return ItemView{}, notFound(err, key)
	}
	v := c.Version
	if !agent.SeesAllRoles() && !v.Roles.Visible(agent.Role) {
		return ItemView{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if v.Deleted {
		return ItemView{}, fmt.Errorf("%w: %s is deleted", ErrNotFound, key)
	}
	out := ItemView{Version: v, Pending: c.Pending}
	if c.PromotedFrom > 0 {
		out.PromotedFrom = &store.ProposalLink{Proposal: c.PromotedFrom, Version: v.Version, ProposedBy: c.ProposedBy}
	}
	return out, nil
}

// withLinks is versions (of one item) with the promotions that made or
// superseded them, one read.
func (s *Service) withLinks(ctx context.Context, proj, key string, vs []*ctxtype.Version) ([]ItemView, error) {
	nums := make([]int, len(vs))
	for i, v := range vs {
		nums[i] = v.Version
	}
	links, err := s.store.ProposalLinks(ctx, proj, key, nums)
	if err != nil {
		return nil, err
	}
	out := make([]ItemView, len(vs))
	for i, v := range vs {
		out[i] = ItemView{Version: v}
		for j := range links {
			l := &links[j]
			if l.Version == v.Version && out[i].PromotedFrom == nil {
				out[i].PromotedFrom = l
			}
			if l.SupersededVersion == v.Version && out[i].SupersededBy == nil {
				out[i].SupersededBy = l
				out[i].Version = supersededState(v, l.At)
			}
		}
	}
	return out, nil
}

// supersededState is a version a promotion superseded at at: a state
// item's (kind state, or a state key) ends then, so its valid_until says
// so unless it ends sooner. Versions are immutable: the stored row keeps
// its own, and replay and packets read that; reads show this one.
func supersededState(v *ctxtype.Version, at time.Time) *ctxtype.Version {
	if v.Kind != "state" && v.StateKey == "" {
		return v
	}
	if v.ValidUntil != nil && !v.ValidUntil.After(at) {
		return v
	}
	c := *v
	t := at.UTC()
	c.ValidUntil = &t
	return &c
}

// VersionView is GetVersion with the version's promotion links.
func (s *Service) VersionView(ctx context.Context, agent *auth.Agent, proj, key string, n int) (ItemView, error) {
	v, err := s.GetVersion(ctx, agent, proj, key, n)
	if err != nil {
		return ItemView{}, err
	}
	views, err := s.withLinks(ctx, proj, key, []*ctxtype.Version{v})
	if err != nil {
		return ItemView{}, err
	}
	return views[0], nil
}

// VersionsView is Versions with each version's promotion links.
func (s *Service) VersionsView(ctx context.Context, agent *auth.Agent, proj, key, cur string, limit int) ([]ItemView, string, error) {
	pg, err := s.Versions(ctx, agent, proj, key, cur, limit)
	if err != nil {
		return nil, "", err
	}
	if len(pg.Versions) == 0 {
		return []ItemView{}, pg.Next, nil
	}
	views, err := s.withLinks(ctx, proj, key, pg.Versions)
	return views, pg.Next, err
}
