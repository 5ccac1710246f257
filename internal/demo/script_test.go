package demo

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScriptChecks: the embedded demo parses, and a script with a typo, a
// name used before it is made or a step of two actions is refused before
// anything could be written.
func TestScriptChecks(t *testing.T) {
	t.Parallel()
	s, err := parseScript(supportJSON)
	require.NoError(t, err)
	require.Len(t, s.Agents, 3)
	require.GreaterOrEqual(t, len(s.latest()), 40)

	base := `{"task": "T", "agents": [{"as": "a", "name": "A", "role": "r", "permission": "edit"}], "items": [], "try": {"packet": "P1"}, "story": [%s]}`
	packet := `{"as": "a", "packet": {"name": "P1", "request": {"target_role": "r"}}}`
	for name, c := range map[string]struct{ story, want string }{
		"fine":            {packet, ""},
		"unknown member":  {`{"as": "a", "packet": {"name": "P1", "request": {"target_role": "r", "budget": 3}}}`, `unknown field "budget"`},
		"unknown agent":   {`{"as": "b", "packet": {"name": "P1", "request": {"target_role": "r"}}}`, `no agent "b"`},
		"used too early":  {`{"as": "a", "packet": {"name": "P1", "predecessors": ["H1"], "request": {"target_role": "r"}}}`, `handoff "H1" is used before it is made`},
		"two actions":     {`{"as": "a", "accept": {"handoff": "H1"}, "reject": {"handoff": "H1"}}, ` + packet, "2 actions"},
		"name twice":      {packet + "," + packet, `packet name "P1" is empty or taken`},
		"no such handoff": {packet + `, {"as": "a", "withdraw": {"handoff": "H9", "reason": "x"}}`, `handoff "H9" is used before it is made`},
	} {
		_, err := parseScript([]byte(strings.Replace(base, "%s", c.story, 1)))
		if c.want == "" {
			require.NoError(t, err, name)
			continue
		}
		require.ErrorContains(t, err, c.want, name)
	}
}
