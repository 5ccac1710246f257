package ui_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// agentIDRE is an agent's id shown as the text of a page, not in a title.
var agentIDRE = regexp.MustCompile(`>[^<"]*\bagt_[A-Za-z0-9]+`)

// TestPagesNameAgents: wherever a page names an agent (a version's writer,
// a packet's assembler, the packets that used an item, a task's timeline
// and handoffs, a record's version), it shows the agent's name, with the
// id in the title; two agents of one name on a page show their ids too.
func TestPagesNameAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	names := map[string]string{}
	for _, a := range e.must(200, "GET", "/v1/agents", e.admin, nil)["data"].([]any) {
		m := a.(map[string]any)
		names[m["id"].(string)] = m["name"].(string)
	}
	shown := func(id string) string {
		return `<span class="agent" title="` + id + `">` + html.EscapeString(names[id]) + `</span>`
	}
	b := e.browser()
	e.signIn(b, w.admin)
	get := func(path string) string {
		t.Helper()
		status, _, body := e.page(b, path)
		require.Equal(t, http.StatusOK, status, body)
		return body
	}
	named := func(path string) string {
		t.Helper()
		body := get(path)
		require.Empty(t, agentIDRE.FindAllString(body, -1), "%s shows an agent's id as text", path)
		return body
	}
	id := func(name string) string {
		for i, n := range names {
			if n == name {
				return i
			}
		}
		t.Fatalf("no agent %s", name)
		return ""
	}
	editor, impl := id("planner-edit"), id("implementer-edit")
	task := named("/ui/projects/acme/tasks/" + w.task)
	require.Contains(t, task, "by "+shown(impl)+" as <b>implementer</b>", "the handoff events")
	require.Contains(t, task, "by "+shown(editor)+" as <b>planner</b>", "the rejection")
	require.Contains(t, task, "assembled for <b>planner</b> by "+shown(editor))
	require.Regexp(t, `created [0-9: Z-]+ by `+regexp.QuoteMeta(shown(impl)), task, "a handoff's author")
	item := named("/ui/projects/acme/items/refunds")
	require.Contains(t, item, "by "+shown(editor)+" ·", "a version's writer")
	require.Contains(t, item, "<td>"+shown(editor)+"</td>", "the packets that used it")
	pkt := named("/ui/projects/acme/packets/" + w.packet)
	require.Contains(t, pkt, "by "+shown(editor)+" ·")
	rec := named("/ui/projects/acme/packets/" + w.packet + "/record?subject=" + url.QueryEscape("item:acme/refunds"))
	require.Contains(t, rec, "by "+shown(editor))

	// Another agent of the same name writes the next version: both show
	// their ids beside the name.
	twin, key := e.http.Agent("planner-edit", "planner", auth.Edit, "acme")
	e.must(201, "PUT", "/v1/projects/acme/items/refunds", key, api.PutItemJSONRequestBody{Content: "Refunds take two days.", Title: ptr("Refunds"),
		Trigger: &api.Trigger{Always: ptr(true)}})
	item = get("/ui/projects/acme/items/refunds")
	for _, a := range []string{editor, twin.ID} {
		require.Contains(t, item, `<span class="agent" title="`+a+`">planner-edit (<code>`+a+`</code>)</span>`)
	}
}
