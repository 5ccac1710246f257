package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestPinGapsTellNothingHidden: a pin that names no item the role may see
// is an unresolved gap of the packet (pin_unresolved), in key order; for
// the role, a key hidden from it and a key that does not exist give the
// same answer, to the byte once the key is swapped; the gap stays in the
// stored packet when its records are filtered later (an item hidden since),
// and an admin sees the hidden item's own record beside it. A kxm packet
// lists the same gaps in its text.
func TestPinGapsTellNothingHidden(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	r := e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": []any{
		map[string]any{"key": "known", "content": "Cite the ticket."},
		map[string]any{"key": "secret", "content": "The launch is on Friday.", "roles": map[string]any{"hidden_from": []string{"implementer"}}},
	}})
	require.Equal(t, 200, r.status, r.text)
	impl := e.agent("implementer", auth.Edit, "acme")
	assemble := func(format string, pins ...string) resp {
		t.Helper()
		r := e.do("POST", "/v1/projects/acme/packets", impl, map[string]any{"target_role": "implementer", "pins": pins, "format": format})
		require.Equal(t, 201, r.status, r.text)
		return r
	}
	gaps := func(r resp) []any { return r.json["budget"].(map[string]any)["unresolved_gaps"].([]any) }
	gap := func(key string) map[string]any { return map[string]any{"key": key, "reason": "pin_unresolved"} }

	p := assemble("markdown", "zeta.missing", "secret", "known", "secret")
	require.Equal(t, []any{gap("secret"), gap("zeta.missing")}, gaps(p))
	require.Contains(t, p.json["rendered"], "Cite the ticket.")

	// Hidden and missing look alike, to the byte but for the key.
	strip := func(r resp, key string) string {
		m := map[string]any{}
		for _, k := range []string{"budget", "excluded", "sections", "provenance_summary", "rendered"} {
			m[k] = r.json[k]
		}
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return strings.ReplaceAll(string(b), key, "KEY")
	}
	hidden, missing := assemble("markdown", "secret"), assemble("markdown", "nothing")
	require.Equal(t, strip(missing, "nothing"), strip(hidden, "secret"))
	require.Equal(t, strip(missing, "nothing"), strip(e.do("GET", "/v1/projects/acme/packets/"+hidden.json["packet_id"].(string), impl, nil), "secret"))

	// An item hidden from the role since: its records go, the pin gaps stay.
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/known", e.admin, map[string]any{"content": "Cite the ticket.",
		"roles": map[string]any{"hidden_from": []string{"implementer"}}}).status)
	g := e.do("GET", "/v1/projects/acme/packets/"+p.json["packet_id"].(string), impl, nil)
	require.Equal(t, 200, g.status, g.text)
	require.Equal(t, []any{gap("secret"), gap("zeta.missing")}, gaps(g))
	// An admin sees the same gaps, and why the hidden item is out.
	a := e.do("GET", "/v1/projects/acme/packets/"+p.json["packet_id"].(string), e.admin, nil)
	require.Equal(t, []any{gap("secret"), gap("zeta.missing")}, gaps(a))
	require.Equal(t, 1, int(a.json["excluded"].(map[string]any)["hidden"].(float64)), a.text)

	k := assemble("kxm", "zeta.missing", "secret")
	var doc struct {
		Budget struct {
			UnresolvedGaps []string `json:"unresolvedGaps"`
		} `json:"budget"`
	}
	require.NoError(t, json.Unmarshal([]byte(k.json["rendered"].(string)), &doc))
	require.Equal(t, []string{"pin_unresolved: secret", "pin_unresolved: zeta.missing"}, doc.Budget.UnresolvedGaps)
}
