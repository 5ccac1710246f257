package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestItemPageProposals: an item page lists the item's pending proposals,
// with promote and reject forms only for an agent that may decide them
// (its author may only take it back; a read-only agent gets none), and
// the forms decide as the API does, with the session's token.
func TestItemPageProposals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	e.must(202, "PUT", "/v1/projects/acme/items/refunds", w.implementer, map[string]any{"content": "Refunds take one day.", "proposal": true})
	e.must(202, "PUT", "/v1/projects/acme/items/fresh", w.implementer, map[string]any{"content": "A fresh idea.", "proposal": true})

	ro := e.browser()
	e.signIn(ro, w.planner)
	_, _, body := e.page(ro, "/ui/projects/acme/items/refunds")
	require.Contains(t, body, "Pending proposals (1)")
	require.Contains(t, body, "Refunds take one day.")
	require.NotContains(t, body, `data-form="promote"`)
	require.NotContains(t, body, `data-form="reject"`)

	author := e.browser()
	e.signIn(author, w.implementer)
	_, _, body = e.page(author, "/ui/projects/acme/items/refunds")
	require.NotContains(t, body, `data-form="promote"`, "its author may not promote it")
	require.Contains(t, body, `data-form="reject"`, "but may take it back")

	admin := e.browser()
	e.signIn(admin, w.admin)
	_, _, proj := e.page(admin, "/ui/projects/acme")
	require.Contains(t, proj, `data-proposal="refunds#1"`, "the project page lists what waits")
	require.Contains(t, proj, `data-proposal="fresh#1"`)
	status, _, body := e.page(admin, "/ui/projects/acme/items/refunds")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `data-form="promote"`)
	tok := csrfOf(t, body[strings.Index(body, `data-form="promote"`):])
	status, _, _ = e.post(admin, "/ui/projects/acme/items/refunds/proposals/1/promote", url.Values{})
	require.Equal(t, http.StatusForbidden, status, "without the token")
	status, loc, _ := e.post(admin, "/ui/projects/acme/items/refunds/proposals/1/promote", url.Values{"csrf": {tok}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/ui/projects/acme/items/refunds#proposals", loc)
	cur := e.must(200, "GET", "/v1/projects/acme/items/refunds", w.admin, nil)
	require.Equal(t, "Refunds take one day.", cur["content"])
	_, _, body = e.page(admin, "/ui/projects/acme/items/refunds")
	require.NotContains(t, body, "Pending proposals")

	// A key with proposals only has a page too, until they are decided.
	status, _, body = e.page(admin, "/ui/projects/acme/items/fresh")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "A fresh idea.")
	status, _, _ = e.post(admin, "/ui/projects/acme/items/fresh/proposals/1/reject", url.Values{"csrf": {tok}})
	require.Equal(t, http.StatusUnprocessableEntity, status, "a rejection needs a reason")
	status, _, _ = e.post(admin, "/ui/projects/acme/items/fresh/proposals/1/reject", url.Values{"csrf": {tok}, "reason": {"not for now"}})
	require.Equal(t, http.StatusSeeOther, status)
	status, _, _ = e.page(admin, "/ui/projects/acme/items/fresh")
	require.Equal(t, http.StatusNotFound, status)
}
