package server_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// twinItems are the items both twins hold: every trigger, a contradiction
// group, a template, a pinned-only item.
func twinItems() []api.BatchItem {
	items := []api.BatchItem{
		{Key: "rule.refund", Content: "Refunds within 30 days need a receipt.", Authority: ptr("instruction"), Source: ptr("project"), Priority: ptr(int32(5))},
		{Key: "state.window", Content: "The refund window is 30 days.", StateKey: ptr("refund.window"), Authority: ptr("evidence"), Priority: ptr(int32(1))},
		{Key: "kw.refund", Content: "Refund desk notes: ledger first.", Trigger: &api.Trigger{Keywords: &[]string{"refund"}}},
		{Key: "tool.lookup", Content: "lookup returns the ledger row.", Trigger: &api.Trigger{Tool: ptr("lookup")}},
		{Key: "pin.only", Content: "Pinned notes about invoices.", Trigger: &api.Trigger{PinnedOnly: ptr(true)}},
		{Key: "tmpl.greet", Content: "Hello {{name}}, about refunds.", Template: ptr(true)},
	}
	for i := range 12 {
		items = append(items, api.BatchItem{Key: fmt.Sprintf("rel.%02d", i),
			Content: fmt.Sprintf("Ledger invoice refund reconciliation note %d: tariffs and money.", i), Trigger: &api.Trigger{Relevance: ptr(true)}})
	}
	for i := range 20 {
		items = append(items, api.BatchItem{Key: fmt.Sprintf("fact.%02d", i), Priority: ptr(int32(i % 4)),
			Content: strings.Repeat(fmt.Sprintf("Fact %d about the ledger and refunds. ", i), 4)})
	}
	return items
}

// hiddenItems are what only the second twin holds, each hidden from the
// walking role one way or another, placed to take what a leak would let
// them take: relevance slots, budget, ranks, a contradiction, pins.
func hiddenItems() []api.BatchItem {
	hide := func(i int) *api.Roles {
		if i%2 == 0 {
			return &api.Roles{HiddenFrom: &[]string{"walker"}}
		}
		return &api.Roles{VisibleTo: &[]string{"critic"}}
	}
	var items []api.BatchItem
	for i := range 60 { // more than the relevance lane's slots
		items = append(items, api.BatchItem{Key: fmt.Sprintf("h.rel.%02d", i), Roles: hide(i), Trigger: &api.Trigger{Relevance: ptr(true)},
			Content: "Ledger invoice refund reconciliation tariffs money ledger invoice refund money " + fmt.Sprint(i)})
	}
	for i := range 8 {
		items = append(items,
			api.BatchItem{Key: fmt.Sprintf("h.always.%d", i), Roles: hide(i), Priority: ptr(int32(100 + i)), Authority: ptr("policy"), Source: ptr("human"),
				Content: strings.Repeat("Secret always-on text that would take the budget. ", 6)},
			api.BatchItem{Key: fmt.Sprintf("h.kw.%d", i), Roles: hide(i), Trigger: &api.Trigger{Keywords: &[]string{"refund", "ledger"}},
				Content: "Secret keyword text about refund."},
			api.BatchItem{Key: fmt.Sprintf("h.tool.%d", i), Roles: hide(i), Trigger: &api.Trigger{Tool: ptr("lookup")}, Priority: ptr(int32(50)),
				Content: "Secret tool text."})
	}
	items = append(items,
		api.BatchItem{Key: "h.state", Roles: hide(0), StateKey: ptr("refund.window"), Authority: ptr("policy"), Source: ptr("human"), Priority: ptr(int32(99)),
			Content: "Secret: the refund window is 90 days."},
		api.BatchItem{Key: "h.pin", Roles: hide(1), Trigger: &api.Trigger{PinnedOnly: ptr(true)}, Content: "Secret pinned text."},
		api.BatchItem{Key: "h.tmpl", Roles: hide(0), Template: ptr(true), Content: "Secret {{name}}."},
	)
	return items
}

// volatile are members that differ between twins by construction.
var volatile = map[string]bool{"created_at": true, "updated_at": true, "xact_id": true, "packet_id": true, "id": true,
	"next_cursor": true, "snapshot": true, "generated_at": true, "request_id": true, // each answer's own
	// The rendered text names its project, so its hash differs.
	"rendered_sha256": true, "rendered_sha256_now": true, "rendered_sha256_then": true}

var packetIDRE = regexp.MustCompile(`ctxpkt_[A-Za-z0-9]+`)

// normalized is an answer with what differs by construction taken out:
// volatile members, the project's name, packet ids.
func normalized(r resp, project string) string {
	var v any
	if err := json.Unmarshal([]byte(r.text), &v); err != nil {
		return fmt.Sprintf("%d %s", r.status, r.text)
	}
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			for k, val := range t {
				if volatile[k] {
					delete(t, k)
					continue
				}
				t[k] = walk(val)
			}
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
		case string:
			return packetIDRE.ReplaceAllString(strings.ReplaceAll(t, project, "TWIN"), "ctxpkt_X")
		}
		return x
	}
	b, _ := json.Marshal(walk(v))
	return fmt.Sprintf("%d %s", r.status, b)
}

// TestTwinProjectsHideHiddenItems is the permission walk's twin check
// (issue 11): two projects hold the same items, and the second also holds
// items hidden from the walking role. Every read and assembly as that role
// answers the same in both, apart from ids and times; writes to hidden
// keys are left out (their 404 is the one known channel, see docs/items.md).
func TestTwinProjectsHideHiddenItems(t *testing.T) {
	t.Parallel()
	e := setup(t)
	twins := []string{"twin-a", "twin-b"}
	for _, p := range twins {
		e.project(p)
		e.batch(p, twinItems())
	}
	e.batch("twin-b", hiddenItems())
	walker := e.agent("walker", auth.Edit, twins...)

	keys := []string{"rule.refund", "state.window", "kw.refund", "tool.lookup", "pin.only", "tmpl.greet", "rel.03", "fact.07",
		"h.rel.00", "h.rel.01", "h.always.0", "h.always.1", "h.kw.0", "h.tool.1", "h.state", "h.pin", "h.tmpl", "never.was"}
	requests := []map[string]any{
		{"target_role": "walker"},
		{"target_role": "walker", "query": "ledger invoice refund money tariffs"},
		{"target_role": "walker", "history": []any{map[string]any{"role": "user", "author": "person", "content": "I need a refund from the ledger"}}},
		{"target_role": "walker", "tool_results": []any{map[string]any{"tool": "lookup", "status": "ok", "content": "row 7"}}},
		{"target_role": "walker", "pins": []string{"pin.only", "h.pin", "h.always.0", "never.was"}},
		{"target_role": "walker", "token_budget": 300, "query": "refund ledger", "variables": map[string]any{"name": "Ann"}},
		{"target_role": "walker", "token_budget": 120, "format": "json"},
		{"target_role": "walker", "format": "blocks", "query": "money"},
	}

	answers := map[string][]string{} // the twin's answers in the same order
	pairs := 0
	for _, p := range twins {
		add := func(what string, r resp) {
			answers[p] = append(answers[p], what+" → "+normalized(r, p))
		}
		base := "/v1/projects/" + p
		add("list", e.do("GET", base+"/items?limit=500", walker, nil))
		add("list page", e.do("GET", base+"/items?limit=3", walker, nil))
		add("search", e.do("GET", base+"/items?q=refund+ledger", walker, nil))
		for _, k := range keys {
			add("get "+k, e.do("GET", base+"/items/"+k, walker, nil))
			add("versions "+k, e.do("GET", base+"/items/"+k+"/versions", walker, nil))
			add("version 1 "+k, e.do("GET", base+"/items/"+k+"/versions/1", walker, nil))
			add("injections "+k, e.do("GET", base+"/items/"+k+"/injections", walker, nil))
		}
		for i, req := range requests {
			r := e.do("POST", base+"/packets", walker, req)
			require.Equal(t, 201, r.status, "%s request %d: %s", p, i, r.text)
			add(fmt.Sprintf("assemble %d", i), r)
			id := r.json["packet_id"].(string)
			pk := base + "/packets/" + id
			add("get packet", e.do("GET", pk, walker, nil))
			add("records", e.do("GET", pk+"/records", walker, nil))
			add("replay", e.do("POST", pk+"/replay", walker, nil))
			for _, k := range keys {
				add("why "+k, e.do("GET", pk+"/why?item="+k, walker, nil))
			}
			for _, text := range []string{"refund", "Secret", "ledger", "The refund window is 30 days."} {
				add("attribute "+text, e.do("POST", pk+"/attribute", walker, map[string]any{"text": text}))
			}
		}
		add("packets", e.do("GET", base+"/packets", walker, nil))
	}
	require.Equal(t, len(answers["twin-a"]), len(answers["twin-b"]))
	var diffs []string
	for i := range answers["twin-a"] {
		pairs++
		if a, b := answers["twin-a"][i], answers["twin-b"][i]; a != b {
			diffs = append(diffs, firstDifference(a, b))
		}
	}
	t.Logf("twin walk: %d compared pairs, %d unexpected", pairs, len(diffs))
	for i, d := range diffs {
		if i == 8 {
			break
		}
		t.Logf("differs:\n%s", d)
	}
	require.Empty(t, diffs)

	// Writes to a hidden key are the one known channel: 404 (412 with
	// If-Match), where a free key would be created.
	require.Equal(t, 404, e.do("PUT", "/v1/projects/twin-b/items/h.state", walker, api.PutItemJSONRequestBody{Content: "x"}).status)
	require.Equal(t, 412, e.do("PUT", "/v1/projects/twin-b/items/h.state", walker, api.PutItemJSONRequestBody{Content: "x"}, "If-Match", `"1"`).status)
	require.Equal(t, 404, e.do("DELETE", "/v1/projects/twin-b/items/h.state", walker, nil).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/twin-a/items/h.state", walker, api.PutItemJSONRequestBody{Content: "x"}).status)

	// The walk can tell: for a role the hidden items are visible to, the
	// twins differ, and an admin still sees what is hidden.
	critic := map[string]any{"target_role": "critic", "query": "ledger invoice refund money tariffs"}
	ra, rb := e.do("POST", "/v1/projects/twin-a/packets", e.admin, critic), e.do("POST", "/v1/projects/twin-b/packets", e.admin, critic)
	require.NotEqual(t, normalized(ra, "twin-a"), normalized(rb, "twin-b"))
	r := e.do("GET", "/v1/projects/twin-b/items/h.state", e.admin, nil)
	require.Equal(t, 200, r.status, r.text)
}

// firstDifference shows two answers around where they first differ.
func firstDifference(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	cut := func(s string) string {
		from, to := max(0, i-150), min(len(s), i+250)
		return s[from:to]
	}
	head, _, _ := strings.Cut(a, " → ")
	return fmt.Sprintf("%s at byte %d:\n  twin-a: …%s…\n  twin-b: …%s…", head, i, cut(a), cut(b))
}

// TestHiddenSinceIsWithheld: an item hidden from a role after a packet
// included it is gone from that role's answers about the packet, computed
// when read: its records, its gaps and counts; attribute reports its span
// as withheld, without its subject. Admins still see its records.
func TestHiddenSinceIsWithheld(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	impl := e.agent("implementer", auth.Edit, "acme")
	e.batch("acme", []api.BatchItem{
		{Key: "open", Content: "Open words about refunds.", Priority: ptr(int32(9))},
		{Key: "sec", Content: "Secret later words.", Priority: ptr(int32(8))},
		{Key: "big", Content: strings.Repeat("Big text that cannot fit. ", 80), Priority: ptr(int32(1))},
		{Key: "big2", Content: strings.Repeat("Other big text. ", 80), Priority: ptr(int32(0))},
	})
	p := e.do("POST", "/v1/projects/acme/packets", impl, api.AssemblePacketJSONRequestBody{TargetRole: "implementer", TokenBudget: ptr(300)})
	require.Equal(t, 201, p.status, p.text)
	id := p.json["packet_id"].(string)
	gapKeys := func(r resp) []string {
		var ks []string
		for _, g := range budgetOf(r)["unresolved_gaps"].([]any) {
			ks = append(ks, g.(map[string]any)["key"].(string))
		}
		return ks
	}
	require.Equal(t, []string{"big", "big2"}, gapKeys(p))

	for _, k := range []string{"sec", "big"} {
		r := e.do("PUT", "/v1/projects/acme/items/"+k, e.admin, map[string]any{"content": map[string]string{"sec": "Secret later words.", "big": strings.Repeat("Big text that cannot fit. ", 80)}[k],
			"priority": map[string]int{"sec": 8, "big": 1}[k], "roles": map[string]any{"hidden_from": []string{"implementer"}}})
		require.Equal(t, 201, r.status, r.text)
	}
	got := e.do("GET", "/v1/projects/acme/packets/"+id, impl, nil)
	require.Equal(t, 200, got.status, got.text)
	require.Equal(t, []string{"big2"}, gapKeys(got), "a gap hidden since is not named")
	require.Equal(t, 1.0, got.json["provenance_summary"].(map[string]any)["by_kind"].(map[string]any)["knowledge"], "counts leave it out")
	list := e.do("GET", "/v1/projects/acme/packets", impl, nil)
	require.Equal(t, 200, list.status, list.text)
	sum := list.list()[0]
	require.Equal(t, budgetOf(got), sum["budget"], "the listing's summary is the packet's, computed alike")
	require.Equal(t, got.json["provenance_summary"], sum["provenance_summary"])
	recs := e.do("GET", "/v1/projects/acme/packets/"+id+"/records", impl, nil)
	require.NotContains(t, recs.text, `"sec"`)
	require.NotContains(t, recs.text, `"big"`)

	a := e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", impl, map[string]any{"text": "Secret later words."})
	require.Equal(t, 200, a.status, a.text)
	m := a.json["matches"].([]any)[0].(map[string]any)
	require.Len(t, m["records"], 1, a.text)
	w := m["records"].([]any)[0].(map[string]any)
	require.Equal(t, true, w["withheld"])
	require.NotContains(t, w, "key")
	require.Empty(t, m["scaffolding"], "withheld is not scaffolding")
	admin := e.do("POST", "/v1/projects/acme/packets/"+id+"/attribute", e.admin, map[string]any{"text": "Secret later words."})
	require.Equal(t, "sec", admin.json["matches"].([]any)[0].(map[string]any)["records"].([]any)[0].(map[string]any)["key"])
	adminGet := e.do("GET", "/v1/projects/acme/packets/"+id, e.admin, nil)
	require.Equal(t, []string{"big", "big2"}, gapKeys(adminGet))
}
