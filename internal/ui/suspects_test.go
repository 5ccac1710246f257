package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// suspectsTable is the packet page's table of suspects, "" when the page
// has none.
func suspectsTable(t *testing.T, body string) string {
	t.Helper()
	_, table, ok := strings.Cut(body, `<table class="list" id="suspects">`)
	if !ok {
		return ""
	}
	table, _, ok = strings.Cut(table, "</table>")
	require.True(t, ok, "the suspects table ends")
	return table
}

// TestPacketPageShowsSuspectsAndAblations: a failed answer that quoted
// refunds, then an ablation of the packet without refunds that succeeded.
// The packet's page lists its suspects: refunds first and causal, linked
// to its item, with the four counts of its contrast, its use by the
// failed answer (linked to that outcome's row) and the ablation that
// proves it (linked to the ablation's page), which the page lists too;
// the ablation's page links back to its original. Before the failure
// there is nothing to explain.
func TestPacketPageShowsSuspectsAndAblations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	b := e.browser()
	e.signIn(b, w.admin)
	page := "/ui/projects/acme/packets/" + w.packet
	_, _, body := e.page(b, page)
	require.Contains(t, body, "Suspects (0)")
	require.Contains(t, body, "Nothing to explain until a failed or partial outcome is recorded.")
	require.NotContains(t, body, `id="ablations"`)
	require.NotContains(t, body, `id="ablation-of"`)

	answer := "I looked it up. Refunds take three days. Ask for the order number."
	failure := e.must(201, "POST", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.admin,
		api.RecordOutcomeJSONRequestBody{Status: "failure", Answer: &answer, Source: ptr("human")})
	abl := e.must(201, "POST", "/v1/projects/acme/packets/"+w.packet+"/ablations", w.admin,
		api.AblatePacketJSONRequestBody{Without: []api.AblationEntry{{Key: ptr("refunds")}}})["packet_id"].(string)
	e.must(201, "POST", "/v1/projects/acme/packets/"+abl+"/outcomes", w.admin,
		api.RecordOutcomeJSONRequestBody{Status: "success", Source: ptr("human")})

	status, _, body := e.page(b, page)
	require.Equal(t, http.StatusOK, status)
	table := suspectsTable(t, body)
	require.NotEmpty(t, table, body)
	rows := strings.Split(table, "<tr data-suspect=")[1:]
	require.NotEmpty(t, rows)
	top := rows[0]
	require.True(t, strings.HasPrefix(top, `"item:acme/refunds"><td>item</td><td><a href="/ui/projects/acme/items/refunds">refunds</a></td><td>2</td><td>3.83</td>`), top)
	require.Contains(t, top, `<td class="confidence-causal">causal</td>`)
	require.Contains(t, top, `used by the answer of <a href="#outcome-`+failure["id"].(string)+`">`)
	require.Contains(t, body, `id="outcome-`+failure["id"].(string)+`"`, "the link's target")
	require.Contains(t, top, "contrast in the task: with it 1 failed, 0 succeeded; without it 0 failed, 1 succeeded (0.33)")
	require.Contains(t, top, `ablation: <a href="/ui/projects/acme/packets/`+abl+`">`+abl+`</a> left it out and succeeded`)
	for _, r := range rows[1:] {
		require.Contains(t, r, `<td class="confidence-correlational">correlational</td>`, "only refunds was ablated")
		require.NotContains(t, r, "evidence-ablation")
	}
	require.Contains(t, table, `"item:acme/style"`, "every included entry is listed")
	require.Contains(t, body, `<p id="ablations">Ablations (1)`)
	require.Contains(t, body, `<a href="/ui/projects/acme/packets/`+abl+`">`+abl+`</a></p>`)

	_, _, body = e.page(b, "/ui/projects/acme/packets/"+abl)
	require.Contains(t, body, `<p id="ablation-of">A counterfactual: packet <a href="/ui/projects/acme/packets/`+w.packet+`">`+w.packet+`</a>`)
	require.NotContains(t, body, `id="ablations"`)
	require.Contains(t, body, "Suspects (0)", "the ablation only succeeded")
	require.Contains(t, body, "None: no failed or partial outcome to explain")
}

// TestPacketPageSuspectsAreWhatTheViewerMaySee: the packet included the
// secret, hidden from its role since. Its role's reader sees the other
// suspects and not the secret; the admin sees the secret among them. The
// page asks the service as the session's agent.
func TestPacketPageSuspectsAreWhatTheViewerMaySee(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	e.must(201, "POST", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.admin,
		api.RecordOutcomeJSONRequestBody{Status: "failure", Source: ptr("human")})
	admin := e.browser()
	e.signIn(admin, w.admin)
	_, _, body := e.page(admin, "/ui/projects/acme/packets/"+w.packet)
	require.Contains(t, suspectsTable(t, body), `"item:acme/secret"`, "included, and the admin may see it")

	e.must(201, "PUT", "/v1/projects/acme/items/secret", e.admin, api.PutItemJSONRequestBody{Content: "The launch is on Friday.", Title: ptr("Launch date"),
		Trigger: &api.Trigger{Always: ptr(true)}, Roles: &api.Roles{HiddenFrom: &[]string{"implementer", "planner"}}})
	planner := e.browser()
	e.signIn(planner, w.planner)
	status, _, body := e.page(planner, "/ui/projects/acme/packets/"+w.packet)
	require.Equal(t, http.StatusOK, status)
	table := suspectsTable(t, body)
	require.Contains(t, table, `"item:acme/refunds"`)
	require.NotContains(t, table, "secret")
	_, _, body = e.page(admin, "/ui/projects/acme/packets/"+w.packet)
	require.Contains(t, suspectsTable(t, body), `"item:acme/secret"`)
}

// TestPacketPageShowsWhatChangedSinceTheTasksLastSuccess: the task's
// packet succeeded with refunds v2; refunds changed to v3 and the task's
// next packet failed. Its page says refunds changed since that success
// (linked), which had v2.
func TestPacketPageShowsWhatChangedSinceTheTasksLastSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	e.must(201, "POST", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.admin, api.RecordOutcomeJSONRequestBody{Status: "success"})
	e.must(201, "PUT", "/v1/projects/acme/items/refunds", e.admin, api.PutItemJSONRequestBody{Content: "Refunds take thirty days.\nAsk for the order number.",
		Title: ptr("Refunds"), Trigger: &api.Trigger{Always: ptr(true)}})
	next := e.must(201, "POST", "/v1/projects/acme/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "planner", Query: ptr("refunds"),
		Task: &taskRef{TaskId: ptr(w.task)}})["packet_id"].(string)
	e.must(201, "POST", "/v1/projects/acme/packets/"+next+"/outcomes", w.admin, api.RecordOutcomeJSONRequestBody{Status: "partial"})
	b := e.browser()
	e.signIn(b, w.planner)
	_, _, body := e.page(b, "/ui/projects/acme/packets/"+next)
	rows := strings.Split(suspectsTable(t, body), "<tr data-suspect=")[1:]
	require.NotEmpty(t, rows, body)
	require.True(t, strings.HasPrefix(rows[0], `"item:acme/refunds"><td>item</td><td><a href="/ui/projects/acme/items/refunds">refunds</a></td><td>3</td>`), rows[0])
	require.Contains(t, rows[0], `changed since <a href="/ui/projects/acme/packets/`+w.packet+`">`+w.packet+`</a>, the task's last success, which had v2`)
	for _, r := range rows[1:] {
		require.NotContains(t, r, "evidence-changed", "only refunds changed")
	}
}
