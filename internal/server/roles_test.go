package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// policyWorld is acme with facts of four kinds for the critic, each
// always on: 6 knowledge, 2 episodes, 2 skills, 2 states.
func policyWorld(t *testing.T) *env {
	t.Helper()
	e := setup(t)
	e.project("acme")
	var items []api.BatchItem
	add := func(kind string, n int) {
		for i := range n {
			items = append(items, api.BatchItem{Key: fmt.Sprintf("%s-%d", kind, i), Kind: ptr(kind),
				Content: fmt.Sprintf("the %s fact number %d", kind, i), Trigger: &api.Trigger{Always: ptr(true)}})
		}
	}
	add("knowledge", 6)
	add("episode", 2)
	add("skill", 2)
	add("state", 2)
	e.batch("acme", items)
	return e
}

// putPolicy sets a layer of role's policy as admin and answers the role's
// policy after it.
func (e *env) putPolicy(project, role string, body map[string]any) resp {
	e.t.Helper()
	r := e.do("PUT", "/v1/projects/"+project+"/roles/"+role, e.admin, body)
	require.Equal(e.t, 200, r.status, r.text)
	return r
}

// packetFor assembles a packet for role as admin.
func (e *env) packetFor(role string, body map[string]any) resp {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	body["target_role"] = role
	r := e.do("POST", "/v1/projects/acme/packets", e.admin, body)
	require.Equal(e.t, 201, r.status, r.text)
	return r
}

// recordsOf are a packet's records by key, read back through the API.
func (e *env) recordsOf(r resp) map[string]map[string]any {
	e.t.Helper()
	rs := e.do("GET", "/v1/projects/acme/packets/"+r.json["packet_id"].(string)+"/records", e.admin, nil)
	require.Equal(e.t, 200, rs.status, rs.text)
	return records(rs)
}

func (e *env) whyOf(r resp, key string) resp {
	e.t.Helper()
	w := e.do("GET", "/v1/projects/acme/packets/"+r.json["packet_id"].(string)+"/why?item="+key, e.admin, nil)
	require.Equal(e.t, 200, w.status, w.text)
	return w
}

// TestRolePolicyShapesPacket: a packet whose request names neither budget
// nor kinds takes them from the role's policy; _shared's layer and the
// project's combine member by member, GET and why name the layer of each,
// and the items the policy leaves out have records with reason
// role_policy, counted with the packet's exclusions.
func TestRolePolicyShapesPacket(t *testing.T) {
	t.Parallel()
	e := policyWorld(t)
	g := e.do("GET", "/v1/projects/acme/roles/critic", e.admin, nil)
	require.Equal(t, 200, g.status, g.text)
	require.EqualValues(t, 16000, g.json["token_budget"], "no policy: the defaults")
	require.Equal(t, map[string]any{"token_budget": "default", "kinds": "default", "max_per_section": "default", "format": "default", "tokenizer": "default"}, g.json["layers"])

	e.putPolicy("_shared", "critic", map[string]any{"token_budget": 1200, "kinds": []string{"knowledge", "skill", "state"}})
	p := e.packetFor("critic", nil)
	require.EqualValues(t, 1200, budgetOf(p)["allocated"], "the budget is _shared's")
	require.Equal(t, "_shared", p.json["role_policy"].(map[string]any)["layers"].(map[string]any)["kinds"])
	recs := e.recordsOf(p)
	for _, k := range []string{"episode-0", "episode-1"} {
		require.Equal(t, "excluded", recs[k]["decision"], k)
		require.Equal(t, "role_policy", recs[k]["reason"], k)
		require.Contains(t, recs[k]["detail"], "_shared", k)
	}
	require.Equal(t, "included", recs["skill-0"]["decision"])
	require.EqualValues(t, 2, p.json["excluded"].(map[string]any)["role_policy"], p.text)
	w := e.whyOf(p, "episode-0")
	require.Equal(t, "role_policy", w.json["reason"])
	require.Equal(t, map[string]any{"role": "critic", "member": "kinds", "layer": "_shared"}, w.json["role_policy"])

	// The project's layer overrides kinds only; the budget stays _shared's.
	g = e.putPolicy("acme", "critic", map[string]any{"kinds": []string{"knowledge", "state"}, "max_per_section": map[string]any{"Project Knowledge": 4}})
	require.Equal(t, map[string]any{"token_budget": "_shared", "kinds": "acme", "max_per_section": "acme", "format": "default", "tokenizer": "default"}, g.json["layers"])
	require.EqualValues(t, 1200, g.json["token_budget"])
	require.Equal(t, []any{"knowledge", "state"}, g.json["kinds"])
	require.NotNil(t, g.json["own"])
	require.NotNil(t, g.json["shared"])
	p = e.packetFor("critic", nil)
	require.EqualValues(t, 1200, budgetOf(p)["allocated"])
	recs = e.recordsOf(p)
	require.Equal(t, "role_policy", recs["skill-0"]["reason"], "skills are out of the project's kinds")
	knowledge := 0
	for i := range 6 {
		r := recs[fmt.Sprintf("knowledge-%d", i)]
		if r["decision"] == "included" {
			knowledge++
			require.Equal(t, "Project Knowledge", r["section"])
		} else {
			require.Equal(t, "role_policy", r["reason"], r)
		}
	}
	require.Equal(t, 4, knowledge, "Project Knowledge holds the policy's cap")
	w = e.whyOf(p, "skill-0")
	require.Equal(t, map[string]any{"role": "critic", "member": "kinds", "layer": "acme"}, w.json["role_policy"])
	for i := range 6 {
		if w := e.whyOf(p, fmt.Sprintf("knowledge-%d", i)); w.json["reason"] == "role_policy" {
			require.Equal(t, map[string]any{"role": "critic", "member": "max_per_section", "layer": "acme"}, w.json["role_policy"])
			require.Contains(t, w.json["detail"], "Project Knowledge")
		}
	}

	// Another role has no policy; the list shows the critic's.
	other := e.packetFor("planner", nil)
	require.Nil(t, other.json["role_policy"])
	require.EqualValues(t, 16000, budgetOf(other)["allocated"])
	l := e.do("GET", "/v1/projects/acme/roles", e.admin, nil)
	require.Equal(t, 200, l.status, l.text)
	require.Len(t, l.list(), 1)
	require.Equal(t, "critic", l.list()[0]["role"])

	// Taken away, the project's layer leaves _shared's.
	d := e.do("DELETE", "/v1/projects/acme/roles/critic", e.admin, nil)
	require.Equal(t, 200, d.status, d.text)
	require.Equal(t, "_shared", d.json["layers"].(map[string]any)["kinds"])
	require.Nil(t, d.json["own"])
	require.Equal(t, 404, e.do("DELETE", "/v1/projects/acme/roles/critic", e.admin, nil).status, "no policy of its own now")
}

// TestRolePolicyRequestWins: a member the request gives wins over the
// policy's, and a budget above a max policy's is capped to it.
func TestRolePolicyRequestWins(t *testing.T) {
	t.Parallel()
	e := policyWorld(t)
	e.putPolicy("acme", "critic", map[string]any{"token_budget": 3000, "format": "json"})
	p := e.packetFor("critic", map[string]any{"token_budget": 5000})
	require.EqualValues(t, 5000, budgetOf(p)["allocated"], "the request's budget wins")
	require.Equal(t, "json", p.json["format"], "the format is the policy's")
	pol := p.json["role_policy"].(map[string]any)
	require.Equal(t, []any{"token_budget"}, pol["request"])
	p = e.packetFor("critic", map[string]any{"format": "markdown"})
	require.Equal(t, "markdown", p.json["format"], "the request's format wins")
	require.EqualValues(t, 3000, budgetOf(p)["allocated"])

	e.putPolicy("acme", "critic", map[string]any{"token_budget": 3000, "max": true})
	p = e.packetFor("critic", map[string]any{"token_budget": 5000})
	require.EqualValues(t, 3000, budgetOf(p)["allocated"], "capped by the max policy")
	pol = p.json["role_policy"].(map[string]any)
	require.EqualValues(t, 5000, pol["requested_token_budget"])
	require.Equal(t, true, pol["max"])
	p = e.packetFor("critic", map[string]any{"token_budget": 1000})
	require.EqualValues(t, 1000, budgetOf(p)["allocated"], "a smaller budget of the request still wins")
}

// TestRolePolicyReplaysAsMade: a packet replays with the policy it was
// made under, whatever the policy has become since.
func TestRolePolicyReplaysAsMade(t *testing.T) {
	t.Parallel()
	e := policyWorld(t)
	e.putPolicy("_shared", "critic", map[string]any{"token_budget": 400, "kinds": []string{"knowledge"}})
	p := e.packetFor("critic", nil)
	id := p.json["packet_id"].(string)

	e.putPolicy("_shared", "critic", map[string]any{"token_budget": 9000, "kinds": []string{"episode"}, "format": "json"})
	now := e.packetFor("critic", nil)
	require.NotEqual(t, p.json["rendered_sha256"], now.json["rendered_sha256"], "the new policy makes another packet")

	rep := e.do("POST", "/v1/projects/acme/packets/"+id+"/replay", e.admin, nil)
	require.Equal(t, 200, rep.status, rep.text)
	require.Equal(t, true, rep.json["identical"], rep.text)
	g := e.do("GET", "/v1/projects/acme/packets/"+id, e.admin, nil)
	require.Equal(t, 200, g.status, g.text)
	require.Equal(t, []any{"knowledge"}, g.json["role_policy"].(map[string]any)["kinds"], "the packet keeps the policy it was made under")
	w := e.whyOf(p, "episode-0")
	require.Equal(t, "role_policy", w.json["reason"])

	// A counterfactual of it is made under the same policy.
	a := e.do("POST", "/v1/projects/acme/packets/"+id+"/ablations", e.admin, map[string]any{"without": []any{map[string]any{"key": "knowledge-0"}}})
	require.Equal(t, 201, a.status, a.text)
	require.EqualValues(t, 400, budgetOf(a)["allocated"])
}

// TestRolePolicyRefusals: bad input is 422 with its pointer; only admins
// set policies (of _shared, admins of _shared); an archived project's is
// 410; a policy is an entry of the chain, which verifies, and a policy
// row changed behind the server's back is found.
func TestRolePolicyRefusals(t *testing.T) {
	t.Parallel()
	e := policyWorld(t)
	for _, tc := range []struct {
		body    map[string]any
		pointer string
	}{
		{map[string]any{"kinds": []string{"knowledge", "gossip"}}, "/kinds/1"},
		{map[string]any{"kinds": []string{}}, "/kinds"},
		{map[string]any{"kinds": []string{"skill", "skill"}}, "/kinds/1"},
		{map[string]any{"max_per_section": map[string]any{"Gossip": 2}}, "/max_per_section/Gossip"},
		{map[string]any{"max_per_section": map[string]any{"Tools": -1}}, "/max_per_section/Tools"},
		{map[string]any{"max_per_section": map[string]any{"Tools": 1001}}, "/max_per_section/Tools"},
		{map[string]any{"format": "yaml"}, "/format"},
		{map[string]any{"tokenizer": "gpt2"}, "/tokenizer"},
		{map[string]any{"token_budget": -5}, "/token_budget"},
		{map[string]any{"token_budget": 0}, "/token_budget"},
		{map[string]any{"token_budget": 200001}, "/token_budget"},
		{map[string]any{"max": true}, "/max"},
	} {
		r := e.do("PUT", "/v1/projects/acme/roles/critic", e.admin, tc.body)
		require.Equal(t, 422, r.status, "%v: %s", tc.body, r.text)
		require.Equal(t, []string{tc.pointer}, r.pointers(), "%v: %s", tc.body, r.text)
	}
	require.Equal(t, 400, e.do("PUT", "/v1/projects/acme/roles/critic", e.admin, map[string]any{"budget": 5}).status, "an unknown member")

	editor := e.agent("critic", auth.Edit, "acme")
	scopedAdmin := e.agent("critic", auth.Admin, "acme")
	require.Equal(t, 403, e.do("PUT", "/v1/projects/acme/roles/critic", editor, map[string]any{"token_budget": 5}).status)
	require.Equal(t, 403, e.do("DELETE", "/v1/projects/acme/roles/critic", editor, nil).status)
	require.Equal(t, 403, e.do("PUT", "/v1/projects/_shared/roles/critic", scopedAdmin, map[string]any{"token_budget": 5}).status, "_shared is every project's")
	require.Equal(t, 200, e.do("PUT", "/v1/projects/acme/roles/critic", scopedAdmin, map[string]any{"token_budget": 5000}).status)
	require.Equal(t, 200, e.do("GET", "/v1/projects/acme/roles/critic", editor, nil).status, "an agent may read its role's policy")

	// The chain: acme's row, its items' versions, then the policy's entry.
	v := e.do("GET", "/v1/projects/acme/audit/verify", e.admin, nil)
	require.Equal(t, true, v.json["ok"], v.text)
	entries := e.do("GET", "/v1/projects/acme/audit/entries?limit=1000", e.admin, nil)
	require.Equal(t, 200, entries.status, entries.text)
	seq := 0
	for _, en := range entries.list() {
		if en["kind"] == "role_policy" {
			require.Equal(t, "critic", en["subject"])
			seq = int(en["seq"].(float64))
		}
	}
	require.Positive(t, seq, "the policy's entry is in acme's chain")
	e.tamper(`UPDATE role_policies SET token_budget = 200000 WHERE project = 'acme' AND role = 'critic'`)
	v = e.do("GET", "/v1/projects/acme/audit/verify", e.admin, nil)
	require.Equal(t, false, v.json["ok"], v.text)
	require.Equal(t, "state_mismatch", v.json["problem"], v.text)
	require.EqualValues(t, seq, v.json["first_bad_seq"], v.text)
	e.tamper(`DELETE FROM role_policies WHERE project = 'acme' AND role = 'critic'`)
	v = e.do("GET", "/v1/projects/acme/audit/verify", e.admin, nil)
	require.Equal(t, "state_mismatch", v.json["problem"], v.text)

	require.Equal(t, 200, e.do("DELETE", "/v1/projects/acme", e.admin, nil).status)
	r := e.do("PUT", "/v1/projects/acme/roles/critic", e.admin, map[string]any{"token_budget": 5})
	require.Equal(t, 410, r.status, r.text)
}

// TestRolePolicyKindsAndSectionsFromTheRequest: kinds and max_per_section
// given in the request win over the policy's (layer "request", named by
// why), and shape a packet of a role without a policy too; they are
// checked as a policy's (422 with their pointers), and replay keeps them.
func TestRolePolicyKindsAndSectionsFromTheRequest(t *testing.T) {
	t.Parallel()
	e := policyWorld(t)
	p := e.packetFor("critic", map[string]any{"kinds": []string{"episode"}})
	recs := e.recordsOf(p)
	require.Equal(t, "included", recs["episode-0"]["decision"])
	require.Equal(t, "role_policy", recs["knowledge-0"]["reason"], "no policy: the request's kinds alone")
	pol := p.json["role_policy"].(map[string]any)
	require.Equal(t, []any{"kinds"}, pol["request"])
	require.Equal(t, "request", pol["layers"].(map[string]any)["kinds"])
	require.Equal(t, map[string]any{"role": "critic", "member": "kinds", "layer": "request"}, e.whyOf(p, "knowledge-0").json["role_policy"])

	e.putPolicy("acme", "critic", map[string]any{"kinds": []string{"knowledge"}, "max_per_section": map[string]any{"Project Knowledge": 4}})
	p = e.packetFor("critic", map[string]any{"kinds": []string{"knowledge", "skill"}, "max_per_section": map[string]any{"Project Knowledge": 1}})
	recs = e.recordsOf(p)
	included := 0
	for k, r := range recs {
		if r["decision"] == "included" && r["section"] == "Project Knowledge" {
			included++
			require.True(t, strings.HasPrefix(k, "knowledge-") || strings.HasPrefix(k, "skill-"), k)
		}
	}
	require.Equal(t, 1, included, "the request's section cap wins over the policy's 4")
	require.Equal(t, "role_policy", recs["episode-0"]["reason"])
	pol = p.json["role_policy"].(map[string]any)
	require.ElementsMatch(t, []any{"kinds", "max_per_section"}, pol["request"])
	rp := e.do("POST", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/replay", e.admin, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, true, rp.json["identical"], "replay applies the request's members as they were: %s", rp.text)

	for _, c := range []struct {
		body    map[string]any
		pointer string
	}{
		{map[string]any{"kinds": []string{"knowledge", "gossip"}}, "/kinds/1"},
		{map[string]any{"kinds": []string{}}, "/kinds"},
		{map[string]any{"max_per_section": map[string]any{"Nope": 1}}, "/max_per_section/Nope"},
		{map[string]any{"max_per_section": map[string]any{"Project Knowledge": -1}}, "/max_per_section/Project Knowledge"},
	} {
		c.body["target_role"] = "critic"
		r := e.do("POST", "/v1/projects/acme/packets", e.admin, c.body)
		require.Equal(t, 422, r.status, r.text)
		require.Contains(t, r.pointers(), c.pointer, r.text)
	}
}
