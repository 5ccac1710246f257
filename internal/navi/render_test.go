package navi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// TestRenderFixtures: Render gives exactly the bytes of navi's
// render_context_packets for each testdata/render/NAME.json (the packets,
// as navi's JSON), written by hand from navi's source in NAME.want (and
// checked against rustc 1.95 running that source).
func TestRenderFixtures(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "render", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		in, err := os.ReadFile(f)
		require.NoError(t, err)
		want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".want")
		require.NoError(t, err)
		packets, err := ParseList(in)
		require.NoError(t, err, f)
		got, ok := Render(packets)
		require.True(t, ok)
		require.Equal(t, string(want), got, f)
	}
}

func TestRenderNone(t *testing.T) {
	t.Parallel()
	got, ok := Render(nil)
	require.False(t, ok)
	require.Empty(t, got)
}

// TestWhiteSpaceIsGoSpace: Rust's White_Space set (IsWhiteSpace) and Go's
// unicode.IsSpace agree on every code point.
func TestWhiteSpaceIsGoSpace(t *testing.T) {
	t.Parallel()
	n := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		require.Equal(t, unicode.IsSpace(r), IsWhiteSpace(r), "U+%04X", r)
		if IsWhiteSpace(r) {
			n++
		}
	}
	require.Equal(t, 25, n)
	require.Equal(t, "x", Trim("\u3000\u0085 x\u2029\u00a0"))
	require.Equal(t, "\u200bx\u180e", Trim(" \u200bx\u180e "))
}

func TestDebug(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"custom-tag":           `"custom-tag"`,
		"a\"b\\c\nd\te\rf\x00": `"a\"b\\c\nd\te\rf\0"`,
		"it's":                 `"it's"`,
		"\x1b\x7f\u00ad":       `"\u{1b}\u{7f}\u{ad}"`,
		"e\u0301 é":            `"e\u{301} é"`,
		"\u00a0\u3000 ":        `"\u{a0}\u{3000} "`,
		"\U000e0001\ufeff":     `"\u{e0001}\u{feff}"`,
		"\U0010ffff\ue000":     `"\u{10ffff}\u{e000}"`,
		"日本👍":                  `"日本👍"`,
	} {
		require.Equal(t, want, DebugString(in), "%q", in)
	}
	require.Equal(t, `Other("x\"y")`, OtherSource(`x"y`).Debug())
	require.Equal(t, "CanvasNode", Unit(CanvasNode).Debug())
}
