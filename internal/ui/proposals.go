package ui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/item"
)

// An item page lists the item's pending proposals (docs/proposals.md),
// with a promote and a reject form for an agent that may decide them:
// the explorer's only controls that write, each a POST with the
// session's anti-forgery token, decided by the item service as for any
// other caller.

// proposalView is a pending proposal and the decisions the page offers.
type proposalView struct {
	P               item.Proposal
	Promote, Reject bool
}

// pendingProposals reads the item's pending proposals the agent may see.
func (h *handler) pendingProposals(ctx context.Context, agent *auth.Agent, proj, key string) ([]proposalView, error) {
	ps, _, err := h.app.Items.Proposals(ctx, agent, proj, item.ProposalListParams{Key: key, Status: item.ProposalPending, Limit: item.MaxPending})
	if errors.Is(err, fault.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]proposalView, len(ps))
	for i, p := range ps {
		out[i].P = p
		out[i].Promote, out[i].Reject = p.DecidableBy(agent)
	}
	return out, nil
}

// proposalsOnly shows the page of a key that has no version the agent may
// see but pending proposals it may: ok false when it has none either.
func (h *handler) proposalsOnly(c echo.Context, proj, key string) (bool, error) {
	s := sessionOf(c)
	ps, err := h.pendingProposals(c.Request().Context(), s.Agent, proj, key)
	if err != nil || len(ps) == 0 {
		return false, err
	}
	v := &itemView{Project: proj, Key: key, Proposals: ps, UsesNote: "The item has no version yet: only proposals."}
	if err := h.nameAgents(c, proposalAuthors(ps)...); err != nil {
		return false, err
	}
	return true, h.render(c, http.StatusOK, "item", "Item "+key, proj, v)
}

func proposalAuthors(ps []proposalView) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.P.CreatedBy
	}
	return out
}

// promoteProposal promotes a proposal from its item page (its form), and
// goes back to the page.
func (h *handler) promoteProposal(c echo.Context) error {
	return h.decideProposal(c, func(ctx context.Context, agent *auth.Agent, proj, key string, n int) error {
		_, err := h.app.Items.Promote(ctx, agent, proj, key, n, item.DecideParams{Rebase: c.FormValue("rebase") != "", Reason: c.FormValue("reason")})
		return err
	})
}

// rejectProposal rejects a proposal from its item page, with the form's
// reason.
func (h *handler) rejectProposal(c echo.Context) error {
	return h.decideProposal(c, func(ctx context.Context, agent *auth.Agent, proj, key string, n int) error {
		_, err := h.app.Items.Reject(ctx, agent, proj, key, n, c.FormValue("reason"))
		return err
	})
}

func (h *handler) decideProposal(c echo.Context, decide func(ctx context.Context, agent *auth.Agent, proj, key string, n int) error) error {
	proj, key := param(c, "project"), param(c, "key")
	n, err := strconv.Atoi(param(c, "n"))
	if err != nil || n < 1 {
		return h.fail(c, item.ErrNotFound)
	}
	if err := decide(c.Request().Context(), sessionOf(c).Agent, proj, key, n); err != nil {
		return h.fail(c, err)
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"/projects/"+url.PathEscape(proj)+"/items/"+url.PathEscape(key)+"#proposals")
}

// proposalsShown is the most pending proposals a project page lists.
const proposalsShown = 20

// projectProposals reads a project's oldest pending proposals the agent
// may see, and whether more wait.
func (h *handler) projectProposals(ctx context.Context, agent *auth.Agent, proj string) ([]item.Proposal, bool, error) {
	ps, next, err := h.app.Items.Proposals(ctx, agent, proj, item.ProposalListParams{Status: item.ProposalPending, Limit: proposalsShown})
	return ps, next != "", err
}
