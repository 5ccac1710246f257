package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ui"
)

// TestPagesAnswerEachRoleWithWhatItMaySee: without a browser, every page
// renders for each key, and the item hidden from implementers is absent
// from every page an implementer gets (and its own page is a 404).
func TestPagesAnswerEachRoleWithWhatItMaySee(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	pages := func(packet string) []string {
		return []string{"/ui", "/ui/projects/acme", "/ui/projects/acme?q=launch", "/ui/projects/acme/packets/" + packet,
			"/ui/projects/acme/items/refunds", "/ui/projects/acme/tasks/" + w.task, "/ui/projects/_shared", "/ui/projects/acme/ledger"}
	}
	for _, c := range []struct {
		name, key, packet string
		seesSecret        bool
	}{
		{"admin", w.admin, w.implPacket, true},
		{"planner", w.planner, w.packet, true}, // hidden from implementers only
		{"implementer", w.implementer, w.implPacket, false},
	} {
		b := e.browser()
		e.signIn(b, c.key)
		for _, p := range pages(c.packet) {
			status, _, body := e.page(b, p)
			require.Equal(t, http.StatusOK, status, "%s %s: %s", c.name, p, body)
			if !c.seesSecret {
				require.NotContains(t, body, "secret", p)
				require.NotContains(t, body, "Friday", p)
			}
		}
		status, _, body := e.page(b, "/ui/projects/acme/items/secret")
		if !c.seesSecret {
			require.Equal(t, http.StatusNotFound, status)
			require.NotContains(t, body, "Friday")
		} else {
			require.Equal(t, http.StatusOK, status)
			require.Contains(t, body, "The launch is on Friday.")
		}
		_, _, body = e.page(b, "/ui/projects/acme")
		require.Equal(t, c.seesSecret, strings.Contains(body, `data-key="secret"`), c.name)
	}
	// The planner may not open the implementer's packet: it is another role's.
	b := e.browser()
	e.signIn(b, w.planner)
	status, _, _ := e.page(b, "/ui/projects/acme/packets/"+w.implPacket)
	require.Equal(t, http.StatusNotFound, status)
	// Security headers on every page.
	res, err := b.Get(e.url + "/ui/projects/acme")
	require.NoError(t, err)
	res.Body.Close()
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
}

func TestLineDiff(t *testing.T) {
	t.Parallel()
	render := func(d []ui.DiffLine) string {
		var b strings.Builder
		for _, l := range d {
			b.WriteString(l.Op + l.Text + "\n")
		}
		return b.String()
	}
	require.Equal(t, " a\n-b\n+B\n c\n+d\n", render(ui.LineDiff("a\nb\nc\n", "a\nB\nc\nd")))
	require.Equal(t, "+x\n", render(ui.LineDiff("", "x")))
	require.Equal(t, "-x\n", render(ui.LineDiff("x", "")))
	require.Equal(t, " same\n", render(ui.LineDiff("same", "same\n")))
	require.Equal(t, "-1\n 2\n 3\n+4\n", render(ui.LineDiff("1\n2\n3", "2\n3\n4")))
}
