package server_test

// POST …/packets/{id}/ablations through the API: status codes, problem
// codes and pointers, the answer's members and the links both ways, the
// Idempotency-Key, and the audit chain. What an ablation assembles is
// tested against the store in internal/packet (ablate_test.go).

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

func without(entries ...api.AblationEntry) api.AblatePacketJSONRequestBody {
	return api.AblatePacketJSONRequestBody{Without: entries}
}

// ablationWorld is acme with three items (one hidden from support) and a
// support agent's packet that includes the two it may see.
func ablationWorld(t *testing.T) (e *env, sup, id string) {
	e = setup(t)
	adoptChains(t, e.app.Store)
	e.project("acme")
	e.batch("acme", []api.BatchItem{
		{Key: "refund.policy", Content: "Refunds within 30 days need a receipt.", Priority: ptr(int32(20))},
		{Key: "greeting", Content: "Greet the customer by name.", Priority: ptr(int32(10))},
		{Key: "secret", Content: "The margin is 40%.", Priority: ptr(int32(5)), Roles: &api.Roles{HiddenFrom: &[]string{"support"}}},
	})
	sup = e.agent("support", auth.ReadOnly, "acme")
	r := e.do("POST", "/v1/projects/acme/packets", sup, api.AssemblePacketJSONRequestBody{TargetRole: "support", TokenBudget: ptr(4000),
		Query: ptr("refund")})
	require.Equal(t, 201, r.status, r.text)
	return e, sup, r.json["packet_id"].(string)
}

// TestAblationThroughTheAPI: 201 with the new packet's answer (the
// packet's members, ablation_of), the item's record excluded/ablated, the
// original's GET lists it under ablations, the ablation replays
// identically, an Idempotency-Key answers the retry with the same packet,
// and the audit chain (a packet entry per ablation) verifies.
func TestAblationThroughTheAPI(t *testing.T) {
	t.Parallel()
	e, sup, id := ablationWorld(t)
	orig := e.do("GET", "/v1/projects/acme/packets/"+id, sup, nil)
	require.Equal(t, 200, orig.status)
	require.NotContains(t, orig.json, "ablations", "absent when none")
	require.NotContains(t, orig.json, "ablation_of")

	path := "/v1/projects/acme/packets/" + id + "/ablations"
	r := e.do("POST", path, sup, without(api.AblationEntry{Key: ptr("refund.policy")}), "Idempotency-Key", "abl-1")
	require.Equal(t, 201, r.status, r.text)
	requirePacketAnswer(t, r)
	abl := r.json["packet_id"].(string)
	require.NotEqual(t, id, abl)
	require.Equal(t, id, r.json["ablation_of"])
	require.Equal(t, "support", r.json["target_role"])
	require.Equal(t, float64(1), r.json["excluded"].(map[string]any)["ablated"], r.text)
	rendered := r.json["rendered"].(string)
	require.NotContains(t, rendered, "Refunds within 30 days")
	require.Contains(t, rendered, "Greet the customer by name.")
	var span map[string]any
	for _, rec := range e.do("GET", "/v1/projects/acme/packets/"+id+"/records", sup, nil).list() {
		if rec["key"] == "refund.policy" {
			span = rec["span"].(map[string]any)
		}
	}
	text := orig.json["rendered"].(string)
	start, end := int(span["start"].(float64)), int(span["end"].(float64))
	require.Equal(t, text[:start]+text[end:], rendered, "the budget fits all: the original less that block")

	again := e.do("POST", path, sup, without(api.AblationEntry{Key: ptr("refund.policy")}), "Idempotency-Key", "abl-1")
	require.Equal(t, 201, again.status, again.text)
	require.Equal(t, abl, again.json["packet_id"], "the retry gets the first answer, no second packet")

	recs := e.do("GET", "/v1/projects/acme/packets/"+abl+"/records?decision=excluded", sup, nil).list()
	require.Len(t, recs, 1, "%v", recs)
	require.Equal(t, "refund.policy", recs[0]["key"])
	require.Equal(t, "ablated", recs[0]["reason"])

	g := e.do("GET", "/v1/projects/acme/packets/"+id, sup, nil)
	requirePacketAnswer(t, g)
	require.Equal(t, []any{abl}, g.json["ablations"])
	g = e.do("GET", "/v1/projects/acme/packets/"+abl, sup, nil)
	require.Equal(t, id, g.json["ablation_of"])
	require.Equal(t, rendered, g.json["rendered"])

	rp := e.do("POST", "/v1/projects/acme/packets/"+abl+"/replay", sup, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, true, rp.json["identical"], rp.text)

	v := e.verify()
	require.Equal(t, true, v.json["ok"], v.text)
}

// TestAblationRefusals: 422 naming the entry (/without/N) for one the
// packet did not include, an unknown one and one hidden from the caller
// (the same answer but for the name), an empty list, an entry naming two
// things; 404 for a packet of another role or none; 410 in an archived
// project.
func TestAblationRefusals(t *testing.T) {
	t.Parallel()
	e, sup, id := ablationWorld(t)
	path := "/v1/projects/acme/packets/" + id + "/ablations"
	problem := func(body any) (string, string) {
		t.Helper()
		r := e.do("POST", path, sup, body)
		require.Equal(t, 422, r.status, r.text)
		require.Equal(t, "validation_failed", r.json["code"], r.text)
		errs := r.json["errors"].([]any)
		require.Len(t, errs, 1, r.text)
		f := errs[0].(map[string]any)
		return f["pointer"].(string), f["detail"].(string)
	}
	pointer, unknown := problem(without(api.AblationEntry{Key: ptr("greeting")}, api.AblationEntry{Key: ptr("nosuch")}))
	require.Equal(t, "/without/1", pointer)
	require.Contains(t, unknown, `"nosuch"`)
	pointer, hidden := problem(without(api.AblationEntry{Key: ptr("greeting")}, api.AblationEntry{Key: ptr("secret")}))
	require.Equal(t, "/without/1", pointer)
	require.Equal(t, unknown, strings.ReplaceAll(hidden, "secret", "nosuch"), "hidden looks exactly like unknown")
	pointer, _ = problem(without(api.AblationEntry{Request: ptr("plan")}))
	require.Equal(t, "/without/0", pointer)
	pointer, _ = problem(without())
	require.Equal(t, "/without", pointer)
	pointer, _ = problem(without(api.AblationEntry{Key: ptr("greeting"), Handoff: ptr("hnd_x")}))
	require.Equal(t, "/without/0", pointer)

	// An admin sees the hidden item, but the packet never included it.
	r := e.do("POST", path, e.admin, without(api.AblationEntry{Key: ptr("secret")}))
	require.Equal(t, 422, r.status, r.text)

	billing := e.agent("billing", auth.Edit, "acme")
	r = e.do("POST", path, billing, without(api.AblationEntry{Key: ptr("greeting")}))
	require.Equal(t, 404, r.status, "another role's packet: %s", r.text)
	r = e.do("POST", "/v1/projects/acme/packets/ctxpkt_nosuch/ablations", sup, without(api.AblationEntry{Key: ptr("greeting")}))
	require.Equal(t, 404, r.status, r.text)
	e.project("other")
	outsider := e.agent("support", auth.ReadOnly, "other")
	r = e.do("POST", path, outsider, without(api.AblationEntry{Key: ptr("greeting")}))
	require.Contains(t, []int{403, 404}, r.status, "an agent of another project: %s", r.text)

	require.Equal(t, 200, e.do("DELETE", "/v1/projects/acme", e.admin, nil).status)
	r = e.do("POST", path, e.admin, without(api.AblationEntry{Key: ptr("greeting")}))
	require.Equal(t, 410, r.status, r.text)
	require.Equal(t, "gone", r.json["code"])
}
