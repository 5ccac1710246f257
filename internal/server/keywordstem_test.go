package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// TestKeywordMatchStem: a keyword trigger with "match": "stem" fires on
// inflected forms of its keywords (found by the bounded lane's index of
// first-word stems, in the project and in _shared, a phrase as stems),
// the same trigger with the default match does not, why says which mode
// applied, a replay gives the same bytes, and a match that is neither
// word nor stem is a 422 at /trigger/match.
func TestKeywordMatchStem(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	implementer := e.agent("implementer", auth.Edit, "acme")
	kw := func(match api.TriggerMatch, words ...string) *api.Trigger {
		t := &api.Trigger{Keywords: &words}
		if match != "" {
			t.Match = &match
		}
		return t
	}
	e.batch("acme", []api.BatchItem{
		{Key: "cb.stem", Content: "Chargebacks go to the risk team.", Trigger: kw("stem", "chargeback")},
		{Key: "cb.word", Content: "Chargeback words only.", Trigger: kw("", "chargeback")},
		{Key: "cb.word.explicit", Content: "Chargeback words, said so.", Trigger: kw("word", "chargeback")},
	})
	e.batch("_shared", []api.BatchItem{
		{Key: "refund.policy", Content: "Refund policies live in the wiki.", Trigger: kw("stem", "refund policy")},
	})

	// The item says how it matches; the default is not spelt out.
	g := e.do("GET", "/v1/projects/acme/items/cb.stem", implementer, nil)
	require.Equal(t, 200, g.status, g.text)
	require.Equal(t, map[string]any{"keywords": []any{"chargeback"}, "match": "stem"}, g.json["trigger"])
	g = e.do("GET", "/v1/projects/acme/items/cb.word.explicit", implementer, nil)
	require.Equal(t, map[string]any{"keywords": []any{"chargeback"}}, g.json["trigger"])

	history := func(said string) map[string]any {
		return map[string]any{"target_role": "implementer", "history": []any{map[string]any{"role": "user", "author": "person", "content": said}}}
	}
	r := e.do("POST", "/v1/projects/acme/packets", implementer, history("We got two chargebacks and asked about refunding policies."))
	require.Equal(t, 201, r.status, r.text)
	rendered := r.json["rendered"].(string)
	require.Contains(t, rendered, "Chargebacks go to the risk team.")
	require.Contains(t, rendered, "Refund policies live in the wiki.")
	require.NotContains(t, rendered, "Chargeback words")
	id := r.json["packet_id"].(string)

	why := func(id, key string) resp {
		w := e.do("GET", "/v1/projects/acme/packets/"+id+"/why?item="+key, implementer, nil)
		require.Equal(t, 200, w.status, w.text)
		return w
	}
	w := why(id, "cb.stem")
	require.Equal(t, "included", w.json["decision"])
	require.Equal(t, `keyword(stem):"chargeback"@history[0] matched "chargebacks"`, w.json["rule"])
	w = why(id, "refund.policy")
	require.Equal(t, "included", w.json["decision"])
	require.Equal(t, `keyword(stem):"refund policy"@history[0] matched "refunding policies"`, w.json["rule"])
	w = why(id, "cb.word")
	require.Equal(t, "not_candidate", w.json["decision"])
	require.Equal(t, "not_triggered", w.json["reason"])
	require.NotContains(t, w.json["detail"], "stem")
	require.Contains(t, w.json["detail"], "(match word)", "why says which mode applied")
	rp := e.do("POST", "/v1/projects/acme/packets/"+id+"/replay", implementer, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, true, rp.json["identical"], rp.text)

	// The word itself: every mode fires, and the whole-word rule reads as
	// it always has.
	r = e.do("POST", "/v1/projects/acme/packets", implementer, history("One chargeback."))
	require.Equal(t, 201, r.status, r.text)
	id = r.json["packet_id"].(string)
	require.Equal(t, `keyword:"chargeback"@history[0]`, why(id, "cb.word").json["rule"])
	require.Equal(t, `keyword:"chargeback"@history[0]`, why(id, "cb.word.explicit").json["rule"])
	require.Equal(t, `keyword(stem):"chargeback"@history[0] matched "chargeback"`, why(id, "cb.stem").json["rule"])
	w = why(id, "refund.policy")
	require.Equal(t, "not_triggered", w.json["reason"])
	require.Contains(t, w.json["detail"], "(match stem)")

	// Anything else is a field error with a stable code.
	bad := e.do("PUT", "/v1/projects/acme/items/cb.fuzzy", e.admin, map[string]any{"content": "x", "trigger": map[string]any{"keywords": []string{"chargeback"}, "match": "fuzzy"}})
	require.Equal(t, 422, bad.status, bad.text)
	require.Equal(t, []string{"/trigger/match"}, bad.pointers())
	require.Equal(t, "enum", bad.json["errors"].([]any)[0].(map[string]any)["code"], bad.text)
	bad = e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": []any{map[string]any{"key": "cb.fuzzy", "content": "x", "trigger": map[string]any{"keywords": []string{"chargeback"}, "match": "fuzzy"}}}})
	require.Equal(t, 422, bad.status, bad.text)
	require.Equal(t, []string{"/items/0/trigger/match"}, bad.pointers())
}
