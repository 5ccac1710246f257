package ui

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/rolepolicy"
	"github.com/contextd/contextd/internal/store"
)

// The most rows the project page lists.
const (
	itemsShown   = 50
	packetsShown = 20
	rolesShown   = 50
)

type indexView struct {
	Projects []store.Project
}

// index lists the projects the agent may see.
func (h *handler) index(c echo.Context) error {
	s := sessionOf(c)
	ps, err := h.app.Projects.List(c.Request().Context(), s.Agent, "", 200)
	if err != nil {
		return h.fail(c, err)
	}
	return h.render(c, http.StatusOK, "index", "Projects", "", indexView{Projects: ps})
}

// auditView is the audit chain's state as the project page shows it.
type auditView struct {
	// Note says why there is no verification (not an admin of the project).
	Note       string
	Result     *evidence.Result
	Head       string
	Checkpoint *evidence.Checkpoint
	// CheckpointNote says why there is no checkpoint (no audit key).
	CheckpointNote string
}

type projectView struct {
	Project   string
	Query     string
	Items     []*ctxtype.Version
	Next      string // cursor of the next page of items
	Cursor    string
	Packets   []*packet.Packet
	MorePacks bool
	Audit     auditView
	// Roles are the role policies of the project (its own and _shared's),
	// the first rolesShown of them.
	Roles     []rolepolicy.View
	MoreRoles bool
	// Proposals are its pending proposals, the oldest proposalsShown
	// (proposals.go), each linked to its item's page.
	Proposals     []item.Proposal
	MoreProposals bool
}

// project shows a project's items (searched with ?q=, paged with
// ?cursor=), its role policies, its recent packets, its audit chain's verification and a
// checkpoint of its head.
func (h *handler) project(c echo.Context) error {
	s := sessionOf(c)
	ctx := c.Request().Context()
	proj := param(c, "project")
	v := &projectView{Project: proj, Query: c.QueryParam("q"), Cursor: c.QueryParam("cursor")}
	pg, err := h.app.Items.List(ctx, s.Agent, proj, item.ListParams{Query: v.Query, Cursor: v.Cursor, Limit: itemsShown})
	if err != nil {
		return h.fail(c, err)
	}
	v.Items, v.Next = pg.Versions, pg.Next
	if proj != auth.SharedProject {
		ps, next, err := h.app.Packets.List(ctx, s.Agent, proj, packet.ListParams{Limit: packetsShown})
		if err != nil {
			return h.fail(c, err)
		}
		v.Packets, v.MorePacks = ps, next != ""
	}
	roles, err := h.app.RolePolicies.List(ctx, s.Agent, proj, "", rolesShown+1)
	if err != nil {
		return h.fail(c, err)
	}
	v.Roles, v.MoreRoles = roles[:min(len(roles), rolesShown)], len(roles) > rolesShown
	if v.Proposals, v.MoreProposals, err = h.projectProposals(ctx, s.Agent, proj); err != nil {
		return h.fail(c, err)
	}
	if v.Audit, err = h.audit(ctx, s.Agent, proj); err != nil {
		return h.fail(c, err)
	}
	return h.render(c, http.StatusOK, "project", "Project "+proj, proj, v)
}

// audit verifies the project's chain and signs a checkpoint of its head
// (the evidence service), both for admins of the project only: for anyone
// else the page says so instead.
func (h *handler) audit(ctx context.Context, agent *auth.Agent, proj string) (auditView, error) {
	res, err := h.app.Evidence.Verify(ctx, agent, proj)
	if errors.Is(err, fault.ErrForbidden) {
		return auditView{Note: "The audit chain is shown to admins of this project only."}, nil
	}
	if err != nil {
		return auditView{}, err
	}
	a := auditView{Result: &res, Head: audit.HexHead(res.Head)}
	cp, err := h.app.Evidence.Checkpoint(ctx, agent, proj)
	switch {
	case errors.Is(err, evidence.ErrNoKey):
		a.CheckpointNote = "No checkpoint: the deployment has no audit key (--audit-key-file or CONTEXTD_AUDIT_KEY)."
	case err != nil:
		return auditView{}, err
	default:
		a.Checkpoint = &cp
	}
	return a, nil
}
