package server_test

// What the packet API adds to bounded assembly: the answer's members and
// size, the cutoff's absence, a budget of 0, and why's answer for a key
// the caller may not see. The assembly behaviour itself (ranks, tries,
// counts, stages, why's verdicts) is tested against the store in
// internal/packet (cutoff_test.go, hidden_test.go, stages_test.go, ...).

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// packetMembers are the members of a packet's answer: its text, sections,
// budget and capped gaps, never its records; and, on GET, the newest
// outcome of each source (issue 36), without the answers' text, so that
// the bound below still holds.
var packetMembers = map[string]bool{"packet_id": true, "project": true, "created_at": true, "created_by": true, "target_role": true,
	"task_id": true, "format": true, "tokenizer": true, "rendered": true, "rendered_sha256": true, "budget": true,
	"provenance_summary": true, "sections": true, "excluded": true, "outcomes": true,
	// A counterfactual packet names its original; a packet its counterfactuals (at most 100 ids).
	"ablation_of": true, "ablations": true}

// requirePacketAnswer checks what holds for every packet answer: only the
// packet's members, and no more than twice its text plus 16 KB.
func requirePacketAnswer(t *testing.T, r resp) {
	t.Helper()
	for k := range r.json {
		require.True(t, packetMembers[k], "unexpected member %q in the packet answer", k)
	}
	rendered := r.json["rendered"].(string)
	require.LessOrEqual(t, len(r.text), 2*len(rendered)+16<<10, "answer %d bytes, text %d", len(r.text), len(rendered))
}

// TestPacketAnswerIsBoundedByItsText: over a project of 3,000 always-on
// items a packet with a cutoff answers no more than twice its text plus
// 16 KB, fresh and stored, with the packet's members only and a cutoff of
// exactly rank, headroom and count.
func TestPacketAnswerIsBoundedByItsText(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("huge")
	var items []api.BatchItem
	for i := range 3000 {
		it := api.BatchItem{Key: fmt.Sprintf("h.%04d", i), Content: fmt.Sprintf("Fact %d: %s", i, strings.Repeat("plain filler words ", 4+i%5)),
			Priority: ptr(int32(i % 17)), Title: ptr(fmt.Sprintf("Item %d", i))}
		if i%9 == 0 {
			it.Roles = &api.Roles{HiddenFrom: &[]string{"support"}}
		}
		items = append(items, it)
	}
	e.batch("huge", items)
	sup := e.agent("support", auth.ReadOnly, "huge")
	for _, budget := range []int{300, 4000} {
		for _, viewer := range []string{sup, e.admin} {
			r := e.do("POST", "/v1/projects/huge/packets", viewer, api.AssemblePacketJSONRequestBody{TargetRole: "support", TokenBudget: ptr(budget)})
			require.Equal(t, 201, r.status, r.text)
			requirePacketAnswer(t, r)
			budgetJSON := budgetOf(r)
			require.NotNil(t, budgetJSON["cutoff"], "cutoff is absent, not null, when every candidate was tried")
			cutoff := budgetJSON["cutoff"].(map[string]any)
			require.Len(t, cutoff, 3, "%v", cutoff)
			require.Equal(t, budgetJSON["headroom"], cutoff["headroom"])
			g := e.do("GET", "/v1/projects/huge/packets/"+r.json["packet_id"].(string), viewer, nil)
			require.Equal(t, 200, g.status, g.text)
			requirePacketAnswer(t, g)
			require.Equal(t, budgetJSON, budgetOf(g))
		}
	}
}

// TestPacketWithoutCutoffHasNoCutoffMember: a packet that tried every
// candidate has no cutoff member at all (not null), fresh or stored.
func TestPacketWithoutCutoffHasNoCutoffMember(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("roomy")
	var items []api.BatchItem
	for i := range 40 {
		items = append(items, api.BatchItem{Key: fmt.Sprintf("fact.%03d", i), Content: fmt.Sprintf("Fact %d: %s", i, strings.Repeat("plain filler words ", 6)), Priority: ptr(int32(100 - i))})
	}
	e.batch("roomy", items)
	sup := e.agent("support", auth.ReadOnly, "roomy")
	r := e.do("POST", "/v1/projects/roomy/packets", sup, api.AssemblePacketJSONRequestBody{TargetRole: "support", TokenBudget: ptr(100000)})
	require.Equal(t, 201, r.status, r.text)
	requirePacketAnswer(t, r)
	require.NotContains(t, budgetOf(r), "cutoff")
	require.NotContains(t, r.text, "cutoff")
	require.Equal(t, 0.0, budgetOf(r)["unresolved_gaps_more"])
	g := e.do("GET", "/v1/projects/roomy/packets/"+r.json["packet_id"].(string), sup, nil)
	require.Equal(t, 200, g.status, g.text)
	requirePacketAnswer(t, g)
	require.NotContains(t, budgetOf(g), "cutoff")
}

// TestPacketTokenBudgetZero: token_budget 0 is either refused or the
// default; never a packet of 0 tokens.
func TestPacketTokenBudgetZero(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("task")
	r := e.do("POST", "/v1/projects/task/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "support", TokenBudget: ptr(0)})
	if r.status == 201 {
		require.Equal(t, 16000.0, budgetOf(r)["allocated"], r.text)
	} else {
		require.Equal(t, 422, r.status, r.text)
	}
}

// TestWhyOfAHiddenItemReadsAsOneThatNeverExisted: for a role, why about an
// item hidden from it — met before the cutoff or past it — answers 200,
// byte for byte as for a key that never existed; an admin is told hidden.
func TestWhyOfAHiddenItemReadsAsOneThatNeverExisted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("veil")
	items := []api.BatchItem{{Key: "l.huge", Content: strings.Repeat("word ", 400), Priority: ptr(int32(10000))}}
	for i := range 60 {
		items = append(items, api.BatchItem{Key: fmt.Sprintf("l.%03d", i), Content: fmt.Sprintf("ladder step %d", i), Priority: ptr(int32(5000 - 10*i))})
	}
	hidden := &api.Roles{HiddenFrom: &[]string{"support"}}
	items = append(items,
		api.BatchItem{Key: "h.early", Content: "secret early", Priority: ptr(int32(20000)), Roles: hidden},
		api.BatchItem{Key: "h.late", Content: "secret late", Priority: ptr(int32(-50)), Roles: hidden})
	e.batch("veil", items)
	sup := e.agent("support", auth.ReadOnly, "veil")
	r := e.do("POST", "/v1/projects/veil/packets", sup, api.AssemblePacketJSONRequestBody{TargetRole: "support", TokenBudget: ptr(200)})
	require.Equal(t, 201, r.status, r.text)
	require.NotContains(t, r.text, "secret")
	require.NotNil(t, budgetOf(r)["cutoff"])
	id := r.json["packet_id"].(string)
	never := e.do("GET", "/v1/projects/veil/packets/"+id+"/why?item=h.never", sup, nil)
	require.Equal(t, 200, never.status, never.text)
	require.Equal(t, "did_not_exist", never.json["reason"], never.text)
	for _, k := range []string{"h.early", "h.late"} {
		hid := e.do("GET", "/v1/projects/veil/packets/"+id+"/why?item="+k, sup, nil)
		require.Equal(t, 200, hid.status, hid.text)
		require.Equal(t, strings.ReplaceAll(never.text, "h.never", k), hid.text, "%s reads as a key that never existed", k)
		adm := e.do("GET", "/v1/projects/veil/packets/"+id+"/why?item="+k, e.admin, nil)
		require.Equal(t, 200, adm.status, adm.text)
		require.Equal(t, "hidden", adm.json["reason"], adm.text)
	}
}
