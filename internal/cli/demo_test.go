package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

// TestDemo runs `contextd demo` against a server as a user would, then
// the three things it suggests, with the ids it printed; a second run on
// the same project is refused and writes nothing, and no server is said
// as such.
func TestDemo(t *testing.T) {
	t.Parallel()
	base, srvOut, stop := serve(t, "--database-url", pgtest.NewURL(t))
	defer stop()
	key := keyRE.FindString(srvOut.String())
	require.NotEmpty(t, key, srvOut.String())
	flags := []string{"--url", base, "--key", key}

	out, errs, code := run(t, append([]string{"demo"}, flags...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Loaded the demo into project demo-support")
	for _, want := range []string{"Ada Okafor (demo-support)", "rejected", "accepted", "pending", "rework of H1", "ticket.1042.note v1: done", "Three things to try"} {
		require.Contains(t, out, want)
	}
	m := regexp.MustCompile(`Open (\S+/ui/projects/demo-support/packets/(ctxpkt_\w+))`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.True(t, strings.HasPrefix(m[1], base), m[1])
	require.Contains(t, out, `contextd why `+m[2]+` refund.policy --project demo-support --url `+base+` --key "$KEY"`)
	require.Contains(t, out, "contextd handoffs history T-1042 --project demo-support")

	// The explorer's page of the packet answers (to an admin's session:
	// without one it sends to the sign-in page).
	status, _ := get(t, m[1], "")
	require.Contains(t, []int{200, 303, 302}, status)

	why, errs, code := run(t, append([]string{"why", m[2], "refund.policy", "--project", "demo-support"}, flags...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, why, "INCLUDED")
	why, errs, code = run(t, append([]string{"why", m[2], "refund.window-2023", "--project", "demo-support"}, flags...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, why, "EXCLUDED (contradicted)")
	hist, errs, code := run(t, append([]string{"handoffs", "history", "T-1042", "--project", "demo-support"}, flags...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, hist, "task T-1042 in demo-support: 11 entries")

	// Again: refused, nothing written (the project's chain head stays).
	headOf := func() string {
		out, errs, code := run(t, append([]string{"audit", "verify", "--project", "demo-support"}, flags...)...)
		require.Equal(t, 0, code, errs)
		return regexp.MustCompile(`head=\w+`).FindString(out)
	}
	head := headOf()
	require.NotEmpty(t, head)
	out, errs, code = run(t, append([]string{"demo"}, flags...)...)
	require.Equal(t, 1, code, out)
	require.Contains(t, errs, "project already exists: demo-support")
	require.Equal(t, head, headOf())

	_, errs, code = run(t, "demo", "--url", "http://127.0.0.1:1", "--key", key)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no contextd answers at http://127.0.0.1:1")
	require.Contains(t, errs, "make run")
}
