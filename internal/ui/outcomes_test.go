package ui_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// TestPacketPageShowsItsOutcomes: the packet page lists the packet's
// outcomes with what each answer used, linked to the item.
func TestPacketPageShowsItsOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	b := e.browser()
	e.signIn(b, w.admin)
	_, _, body := e.page(b, "/ui/projects/acme/packets/"+w.packet)
	require.Contains(t, body, "Outcomes (0)")

	answer := "I looked it up. Refunds take three days. Ask for the order number."
	e.must(201, "POST", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.admin,
		api.RecordOutcomeJSONRequestBody{Status: "failure", Label: ptr("wrong_refund_time"), Answer: &answer, Source: ptr("human")})
	status, _, body := e.page(b, "/ui/projects/acme/packets/"+w.packet)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "Outcomes (1)")
	require.Contains(t, body, `<td class="outcome-failure">failure</td><td>human</td>`)
	require.Contains(t, body, "wrong_refund_time")
	require.Contains(t, body, `<a href="/ui/projects/acme/items/refunds">refunds</a> v2`)
}
