package cli

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAblateCommand: contextd ablate prints the counterfactual's rendered
// prompt (as stored) on stdout and its id on stderr; the left-out item is
// gone and the rest is there; the original lists it; an entry the packet
// did not include fails with its pointer; --help has an example.
func TestAblateCommand(t *testing.T) {
	t.Parallel()
	r := newRemote(t)
	require.Equal(t, 201, put(t, r.base+"/v1/projects/acme", r.key, `{}`))
	r.ok("items", "put", "refund.rules", "Refunds over 500 EUR need a manager's approval.", "--always")
	r.ok("items", "put", "tone", "Answer in plain words.", "--always")
	o, e := r.ok("packets", "assemble", "--role", "implementer")
	id := regexp.MustCompile(`^packet (\S+):`).FindStringSubmatch(e)[1]
	require.Contains(t, o, "Refunds over 500 EUR")

	o, e = r.ok("ablate", id, "--without", "refund.rules")
	m := regexp.MustCompile(`^packet (\S+): project acme, role implementer, \d+ of 16000 tokens, 1 excluded\n`).FindStringSubmatch(e)
	require.NotNil(t, m, e)
	require.Contains(t, e, "a counterfactual of "+id+" without refund.rules")
	require.NotContains(t, o, "Refunds over 500 EUR")
	require.Contains(t, o, "Answer in plain words.")
	stored := send(t, "GET", r.base+"/v1/projects/acme/packets/"+m[1], r.key, "")
	require.Equal(t, stored["rendered"], o, "stdout is the rendered prompt as stored")
	require.Equal(t, id, stored["ablation_of"])
	orig := send(t, "GET", r.base+"/v1/projects/acme/packets/"+id, r.key, "")
	require.Equal(t, []any{m[1]}, orig["ablations"])

	e = r.fail("ablate", id, "--without", "request:plan")
	require.Contains(t, e, "422 validation_failed")
	require.Contains(t, e, "/without/0")
	e = r.fail("ablate", id)
	require.Contains(t, e, "--without")

	o, _, code := run(t, "ablate", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, o, "Examples:\n  contextd ablate ctxpkt_")
}

func TestAblationEntryFlag(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"refund.rules": "key=refund.rules", "shared:tone": "key=tone layer=shared", "project:request:x": "key=request:x layer=project",
		"request:context_packets[1]": "request=context_packets[1]", "handoff:hnd_1": "handoff=hnd_1", "hnd_2": "handoff=hnd_2",
	} {
		e := ablationEntry(in)
		got := ""
		add := func(name string, v *string) {
			if v != nil {
				if got != "" {
					got += " "
				}
				got += name + "=" + *v
			}
		}
		add("key", e.Key)
		add("layer", e.Layer)
		add("request", e.Request)
		add("handoff", e.Handoff)
		require.Equal(t, want, got, in)
	}
}
