package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/packet"
)

// The most versions and uses an item page reads: past them it says so.
const (
	maxVersions   = 500
	maxInjections = 2000
	pageOf        = 200
)

type versionView struct {
	V *ctxtype.Version
	// Diff is against the previous version (nil for the first).
	Diff  []DiffLine
	Prev  int // the version Diff is against
	Uses  []packet.Injection
	Chart *chart
}

type itemView struct {
	Project, Key  string
	Versions      []versionView // newest first
	MoreVersions  bool
	Chart         *chart // every use, all versions
	Uses          int
	MoreUses      bool
	UsesOf        string   // the project whose packets are listed
	ChooseProject []string // for a _shared item: the projects to pick from
	UsesNote      string
	// Ledger is what the item cost and earned in the packets of UsesOf
	// (nil while a _shared item's project is to be picked).
	Ledger *itemLedgerView
	// Proposals are its pending proposals, with the decisions the agent
	// may take (proposals.go).
	Proposals []proposalView
}

// item shows an item's versions with the diff of each against the one
// before, and every packet that included each version, charted per day.
func (h *handler) item(c echo.Context) error {
	s := sessionOf(c)
	ctx := c.Request().Context()
	proj, key := param(c, "project"), param(c, "key")
	vs, more, err := h.versions(ctx, s.Agent, proj, key)
	if errors.Is(err, fault.ErrNotFound) {
		if shown, perr := h.proposalsOnly(c, proj, key); shown || perr != nil {
			return perr
		}
	}
	if err != nil {
		return h.fail(c, err)
	}
	v := &itemView{Project: proj, Key: key, MoreVersions: more}
	if v.Proposals, err = h.pendingProposals(ctx, s.Agent, proj, key); err != nil {
		return h.fail(c, err)
	}
	uses, of, moreUses, err := h.injections(ctx, s.Agent, proj, key, c.QueryParam("project"))
	switch {
	case errors.Is(err, fault.ErrInvalid) && proj == ctxtype.SharedProject:
		// A _shared item is used by every project's packets: pick one.
		v.UsesNote = err.Error()
		if v.ChooseProject, err = h.projectNames(ctx, s.Agent); err != nil {
			return h.fail(c, err)
		}
	case err != nil:
		return h.fail(c, err)
	}
	v.UsesOf, v.MoreUses, v.Uses = of, moreUses, len(uses)
	if v.UsesNote == "" {
		if v.Ledger, err = h.itemLedger(c, proj, key); err != nil {
			return h.fail(c, err)
		}
	}
	byVersion := map[int][]packet.Injection{}
	var all []time.Time
	for _, u := range uses {
		byVersion[u.Version] = append(byVersion[u.Version], u)
		all = append(all, u.CreatedAt)
	}
	v.Chart = usesPerDay(all)
	for i := len(vs) - 1; i >= 0; i-- {
		vv := versionView{V: vs[i], Uses: byVersion[vs[i].Version]}
		if i > 0 {
			vv.Diff, vv.Prev = LineDiff(versionText(vs[i-1]), versionText(vs[i])), vs[i-1].Version
		}
		var ts []time.Time
		for _, u := range vv.Uses {
			ts = append(ts, u.CreatedAt)
		}
		vv.Chart = usesPerDay(ts)
		v.Versions = append(v.Versions, vv)
	}
	var agents []string
	for _, ver := range vs {
		agents = append(agents, ver.CreatedBy)
	}
	for _, u := range uses {
		agents = append(agents, u.Agent)
	}
	agents = append(agents, proposalAuthors(v.Proposals)...)
	if err := h.nameAgents(c, agents...); err != nil {
		return h.fail(c, err)
	}
	return h.render(c, http.StatusOK, "item", "Item "+key, proj, v)
}

// versions reads an item's versions oldest first, as the agent may see
// them (the item service), up to maxVersions.
func (h *handler) versions(ctx context.Context, agent *auth.Agent, proj, key string) ([]*ctxtype.Version, bool, error) {
	var out []*ctxtype.Version
	cur := ""
	for {
		pg, err := h.app.Items.Versions(ctx, agent, proj, key, cur, pageOf)
		if err != nil {
			return nil, false, err
		}
		out = append(out, pg.Versions...)
		if pg.Next == "" {
			return out, false, nil
		}
		if len(out) >= maxVersions {
			return out, true, nil
		}
		cur = pg.Next
	}
}

// injections reads the packets that included the item (the injections
// service), newest first, up to maxInjections.
func (h *handler) injections(ctx context.Context, agent *auth.Agent, proj, key, of string) ([]packet.Injection, string, bool, error) {
	var out []packet.Injection
	ip := packet.InjectionParams{Project: of, Limit: pageOf}
	for {
		page, next, in, err := h.app.Packets.Injections(ctx, agent, proj, key, ip)
		if err != nil {
			return nil, "", false, err
		}
		out = append(out, page...)
		if next == "" {
			return out, in, false, nil
		}
		if len(out) >= maxInjections {
			return out, in, true, nil
		}
		ip.Cursor = next
	}
}

func (h *handler) projectNames(ctx context.Context, agent *auth.Agent) ([]string, error) {
	ps, err := h.app.Projects.List(ctx, agent, "", 200)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ps {
		if p.Name != ctxtype.SharedProject {
			out = append(out, p.Name)
		}
	}
	return out, nil
}

// versionText is what a diff compares: the fields a writer sets, one a
// line, then the content.
func versionText(v *ctxtype.Version) string {
	var b strings.Builder
	if v.Deleted {
		b.WriteString("(deleted)\n")
	}
	fmt.Fprintf(&b, "kind: %s\nsource: %s\nauthority: %s\nconfidence: %s\npriority: %d\n", v.Kind, v.Source, v.Authority, v.Confidence, v.Priority)
	if v.StateKey != "" {
		fmt.Fprintf(&b, "state_key: %s\n", v.StateKey)
	}
	if t := v.Trigger.Kind(); t != "" {
		fmt.Fprintf(&b, "trigger: %s\n", t)
	}
	if len(v.Roles.VisibleTo) > 0 || len(v.Roles.HiddenFrom) > 0 {
		fmt.Fprintf(&b, "visible_to: %s\nhidden_from: %s\n", strings.Join(v.Roles.VisibleTo, ", "), strings.Join(v.Roles.HiddenFrom, ", "))
	}
	if v.Title != "" {
		fmt.Fprintf(&b, "title: %s\n", v.Title)
	}
	if v.Summary != "" {
		fmt.Fprintf(&b, "summary: %s\n", v.Summary)
	}
	b.WriteString("\n")
	b.WriteString(v.Content)
	return b.String()
}
