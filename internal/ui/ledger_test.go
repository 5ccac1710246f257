package ui_test

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// ledgerRow is the row of a ledger table whose opening tag has attr, ""
// when the page has none.
func ledgerRow(body, attr string) string {
	_, row, ok := strings.Cut(body, "<tr "+attr+">")
	if !ok {
		return ""
	}
	row, _, _ = strings.Cut(row, "</tr>")
	return row
}

// cells is what a ledger row's figures should read, in the columns' order.
func cells(offered, included, excluded, tokens, success, failure, partial, answered, used int, earn, fail string) string {
	return fmt.Sprintf(`<td class="offered">%d</td><td class="included">%d</td><td class="excluded">%d`, offered, included, excluded) +
		fmt.Sprintf(`</td><td class="tokens">%d</td><td class="success">%d</td><td class="failure">%d</td><td class="partial">%d</td>`, tokens, success, failure, partial) +
		fmt.Sprintf(`<td class="answered">%d</td><td class="used">%d</td><td class="earn-rate">%s</td><td class="failure-rate">%s</td>`, answered, used, earn, fail)
}

// included is the tokens of key's included record in a packet (the API's
// records), 0 when the packet did not include it.
func (e *env) included(packet, key string) int {
	e.t.Helper()
	recs := e.must(200, "GET", "/v1/projects/acme/packets/"+packet+"/records", e.admin, nil)
	for _, r := range recs["data"].([]any) {
		if m := r.(map[string]any); m["key"] == key && m["decision"] == "included" {
			return int(m["tokens"].(float64))
		}
	}
	return 0
}

// ledgerOutcomes records a failure whose answer quotes refunds on the
// planner's packet and a success on the implementer's.
func (e *env) ledgerOutcomes(w world) {
	e.t.Helper()
	answer := "I looked it up. Refunds take three days. Ask for the order number."
	e.must(201, "POST", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.admin,
		api.RecordOutcomeJSONRequestBody{Status: "failure", Answer: &answer, Source: ptr("human")})
	e.must(201, "POST", "/v1/projects/acme/packets/"+w.implPacket+"/outcomes", w.admin,
		api.RecordOutcomeJSONRequestBody{Status: "success", Source: ptr("human")})
}

// TestItemPageShowsItsLedger: both packets included refunds v2, one
// failed with an answer quoting it, the other succeeded. Its page's
// ledger says so per version and in all (v1 was never offered: no row),
// with the tokens the records spent and the rates, linked to the
// project's ledger; the secret's page shows the implementer's packet
// excluding it as hidden.
func TestItemPageShowsItsLedger(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	e.ledgerOutcomes(w)
	tokens := e.included(w.packet, "refunds") + e.included(w.implPacket, "refunds")
	require.Positive(t, tokens)
	b := e.browser()
	e.signIn(b, w.planner)
	status, _, body := e.page(b, "/ui/projects/acme/items/refunds")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<a href="/ui/projects/acme/ledger">acme</a>`)
	want := cells(2, 2, 0, tokens, 1, 1, 0, 1, 1, "50%", "50%")
	require.Equal(t, `<td><a href="#v2">2</a></td>`+want, ledgerRow(body, `data-ledger-version="2"`))
	require.Equal(t, `<td>all</td>`+want, ledgerRow(body, `data-ledger-version="all" class="totals"`))
	require.Empty(t, ledgerRow(body, `data-ledger-version="1"`), "v1 was in no packet")
	require.NotContains(t, body, "not counted yet", "the read folded everything first")

	_, _, body = e.page(b, "/ui/projects/acme/items/secret")
	want = `<td>all</td><td class="offered">2</td><td class="included">1</td><td class="excluded">1 <span class="hint">(hidden 1)</span>` +
		fmt.Sprintf(`</td><td class="tokens">%d</td><td class="success">0</td><td class="failure">1</td>`, e.included(w.packet, "secret"))
	row := ledgerRow(body, `data-ledger-version="all" class="totals"`)
	require.True(t, strings.HasPrefix(row, want), "%s\nwant the prefix\n%s", row, want)
}

var ledgerItemRE = regexp.MustCompile(`<tr data-item="([^"]+)">`)

// ledgerItems are the items of a project ledger page, in its order.
func ledgerItems(body string) []string {
	var out []string
	for _, m := range ledgerItemRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// nextLink is the page's next-page link, unescaped ("" when none).
var nextRE = regexp.MustCompile(`<a href="([^"]+)" data-link="ledger-next">`)

func nextLink(body string) string {
	m := nextRE.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// TestProjectLedgerPage: the project page links the ledger; its three
// orders are links, the current one marked; each row links to its item
// (a _shared item's on this project's packets) with its figures; a page
// of one item at a time pages through every item once; the implementer
// never sees the secret hidden from its role, which the planner sees
// first by failure rate.
func TestProjectLedgerPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	e.ledgerOutcomes(w)
	b := e.browser()
	e.signIn(b, w.planner)
	_, _, body := e.page(b, "/ui/projects/acme")
	require.Contains(t, body, `<a href="/ui/projects/acme/ledger" data-link="ledger">Ledger</a>`)

	status, _, body := e.page(b, "/ui/projects/acme/ledger")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<b aria-current="page" data-sort="failure_rate">`)
	require.Contains(t, body, `<a href="/ui/projects/acme/ledger?sort=tokens" data-sort="tokens">`)
	require.Contains(t, body, `<a href="/ui/projects/acme/ledger?sort=unused" data-sort="unused">`)
	items := ledgerItems(body)
	require.Equal(t, "acme/secret", items[0], "failed its one outcome: the highest failure rate")
	require.ElementsMatch(t, []string{"acme/secret", "acme/refunds", "acme/style"}, items)
	tokens := e.included(w.packet, "refunds") + e.included(w.implPacket, "refunds")
	require.Equal(t, `<td><a href="/ui/projects/acme/items/refunds">refunds</a></td>`+cells(2, 2, 0, tokens, 1, 1, 0, 1, 1, "50%", "50%"),
		ledgerRow(body, `data-item="acme/refunds"`))

	_, _, body = e.page(b, "/ui/projects/acme/ledger?sort=unused")
	require.Contains(t, body, `<b aria-current="page" data-sort="unused">`)
	items = ledgerItems(body)
	require.Equal(t, "acme/refunds", items[len(items)-1], "the only item an answer used comes last")

	var paged []string
	next := "/ui/projects/acme/ledger?sort=tokens&limit=1"
	for range 5 {
		_, _, body = e.page(b, next)
		got := ledgerItems(body)
		require.Len(t, got, 1, body)
		paged = append(paged, got...)
		if next = nextLink(body); next == "" {
			break
		}
		require.Contains(t, next, "sort=tokens")
		require.Contains(t, next, "limit=1")
	}
	require.ElementsMatch(t, []string{"acme/secret", "acme/refunds", "acme/style"}, paged)

	impl := e.browser()
	e.signIn(impl, w.implementer)
	for _, sort := range []string{"failure_rate", "tokens", "unused"} {
		status, _, body := e.page(impl, "/ui/projects/acme/ledger?sort="+sort)
		require.Equal(t, http.StatusOK, status, body)
		require.ElementsMatch(t, []string{"acme/refunds", "acme/style"}, ledgerItems(body), sort)
		require.NotContains(t, body, "secret")
	}
	status, _, _ = e.page(impl, "/ui/projects/acme/ledger?sort=cheapest")
	require.Equal(t, http.StatusUnprocessableEntity, status)
}

// TestSharedItemLedgerNeedsItsPacketsProject: for a _shared item, an
// agent that sees two projects picks the one whose packets to count (as
// for its uses); with ?project= the ledger counts that project's packets,
// and the project ledger links the item to its page on them.
func TestSharedItemLedgerNeedsItsPacketsProject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seed()
	e.must(201, "PUT", "/v1/projects/beta", e.admin, api.PutProjectJSONRequestBody{})
	e.must(201, "PUT", "/v1/projects/_shared/items/tone", e.admin, api.PutItemJSONRequestBody{Content: "Be brief.", Trigger: &api.Trigger{Always: ptr(true)}})
	e.must(201, "POST", "/v1/projects/acme/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "planner", Query: ptr("refunds")})
	b := e.browser()
	e.signIn(b, e.admin)
	status, _, body := e.page(b, "/ui/projects/_shared/items/tone")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Pick the project whose packets to count above.")
	require.NotContains(t, body, `id="item-ledger"`)

	_, _, body = e.page(b, "/ui/projects/_shared/items/tone?project=acme")
	require.Contains(t, body, `<a href="/ui/projects/acme/ledger">acme</a>`)
	require.True(t, strings.HasPrefix(ledgerRow(body, `data-ledger-version="all" class="totals"`), `<td>all</td><td class="offered">1</td><td class="included">1</td>`), body)

	_, _, body = e.page(b, "/ui/projects/acme/ledger")
	require.True(t, strings.HasPrefix(ledgerRow(body, `data-item="_shared/tone"`), `<td><a href="/ui/projects/_shared/items/tone?project=acme">_shared/tone</a></td><td class="offered">1</td>`), body)
}
