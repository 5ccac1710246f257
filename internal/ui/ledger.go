package ui

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/ledger"
	"github.com/contextd/contextd/internal/store"
)

// ledgerShown is how many items a page of the project ledger lists
// unless ?limit= asks for another number (the ledger service bounds it).
const ledgerShown = 50

// reasonCount is one reason candidates were excluded for, and how many
// packets excluded the item for it.
type reasonCount struct {
	Reason string
	N      int64
}

// figuresView is a ledger's figures as a row shows them: the counters,
// the exclusions by reason (most first) and the rates as percentages (""
// without outcomes, where a rate means nothing).
type figuresView struct {
	store.LedgerFigures
	Reasons               []reasonCount
	Outcomes              int64
	EarnRate, FailureRate string
}

func figuresOf(lf store.LedgerFigures) figuresView {
	f := figuresView{LedgerFigures: lf, Outcomes: lf.Outcomes()}
	for r, n := range lf.ExcludedBy {
		f.Reasons = append(f.Reasons, reasonCount{Reason: r, N: n})
	}
	slices.SortFunc(f.Reasons, func(a, b reasonCount) int {
		return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Reason, b.Reason))
	})
	if earn, fail, ok := lf.Rates(); ok {
		f.EarnRate, f.FailureRate = ratePercent(earn), ratePercent(fail)
	}
	return f
}

func ratePercent(r float64) string { return fmt.Sprintf("%.0f%%", 100*r) }

// versionFigures is one version's row of an item's ledger.
type versionFigures struct {
	Version int
	figuresView
}

// itemLedgerView is the item page's ledger: the item's figures in one
// project's packets, over every version and per version (a page of them).
type itemLedgerView struct {
	// Of is the packets' project.
	Of       string
	Totals   figuresView
	Versions []versionFigures
	// Next is the link to the next page of versions ("" on the last).
	Next    string
	Pending int64
}

// itemLedger reads the item's ledger as the agent may see it (the ledger
// service), in the packets of the project ?project= names (the same
// choice the item's uses take), a page of versions from ?ledger_cursor=.
func (h *handler) itemLedger(c echo.Context, proj, key string) (*itemLedgerView, error) {
	s := sessionOf(c)
	l, err := h.app.Ledger.Item(c.Request().Context(), s.Agent, proj, key, ledger.ItemParams{
		Project: c.QueryParam("project"), Cursor: c.QueryParam("ledger_cursor")})
	if err != nil {
		return nil, err
	}
	v := &itemLedgerView{Of: l.Project, Totals: figuresOf(l.Totals), Pending: l.Pending}
	for _, lv := range l.Versions {
		v.Versions = append(v.Versions, versionFigures{Version: lv.Version, figuresView: figuresOf(lv.LedgerFigures)})
	}
	if l.Next != "" {
		q := url.Values{"ledger_cursor": {l.Next}}
		if p := c.QueryParam("project"); p != "" {
			q.Set("project", p)
		}
		v.Next = "?" + q.Encode() + "#ledger"
	}
	return v, nil
}

// ledgerEntry is one item of the project ledger.
type ledgerEntry struct {
	// Project is the item's (the ledger's own, or _shared); Link opens
	// the item's page on this project's packets.
	Project, Key, Link string
	figuresView
}

// sortLink is one of the project ledger's orders, as a link.
type sortLink struct {
	Sort, Label, Href string
	Current           bool
}

type projectLedgerView struct {
	Project string
	Sorts   []sortLink
	Entries []ledgerEntry
	// Next is the link to the next page ("" on the last).
	Next    string
	Pending int64
}

// sortLabels name the project ledger's orders (ledger.Sorts) for people.
var sortLabels = map[string]string{
	string(store.LedgerByFailureRate): "highest failure rate",
	string(store.LedgerByTokens):      "most tokens",
	string(store.LedgerByUnused):      "least used",
}

// projectLedger shows a project's ledger: its packets' items in one of
// the ledger's orders (?sort=), a page at a time (?cursor=, ?limit=), as
// the ledger service answers the session's agent (an item hidden from its
// role is not listed).
func (h *handler) projectLedger(c echo.Context) error {
	s := sessionOf(c)
	proj := param(c, "project")
	limit, err := strconv.Atoi(c.QueryParam("limit"))
	if err != nil || limit <= 0 {
		limit = 0
	}
	l, err := h.app.Ledger.List(c.Request().Context(), s.Agent, proj, ledger.ListParams{
		Sort: c.QueryParam("sort"), Cursor: c.QueryParam("cursor"), Limit: cmp.Or(limit, ledgerShown)})
	if err != nil {
		return h.fail(c, err)
	}
	base := func(sort string) url.Values {
		q := url.Values{"sort": {sort}}
		if limit > 0 {
			q.Set("limit", strconv.Itoa(limit))
		}
		return q
	}
	here := Prefix + "/projects/" + url.PathEscape(proj) + "/ledger?"
	v := &projectLedgerView{Project: proj, Pending: l.Pending}
	for _, so := range ledger.Sorts {
		v.Sorts = append(v.Sorts, sortLink{Sort: so, Label: cmp.Or(sortLabels[so], so), Href: here + base(so).Encode(), Current: so == l.Sort})
	}
	for _, e := range l.Entries {
		link := Prefix + "/projects/" + url.PathEscape(e.Project) + "/items/" + url.PathEscape(e.Key)
		if e.Project == ctxtype.SharedProject {
			link += "?project=" + url.QueryEscape(proj)
		}
		v.Entries = append(v.Entries, ledgerEntry{Project: e.Project, Key: e.Key, Link: link, figuresView: figuresOf(e.LedgerFigures)})
	}
	if l.Next != "" {
		q := base(l.Sort)
		q.Set("cursor", l.Next)
		v.Next = here + q.Encode()
	}
	return h.render(c, http.StatusOK, "ledger", "Ledger of "+proj, proj, v)
}
