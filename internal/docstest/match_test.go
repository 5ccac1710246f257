package docstest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"a\nb\n", "a\nb\n", true},
		{"a\nb", "a  \nb\n\n\n", true}, // trailing white space and blank lines
		{"a\nb\n", "a\nc\n", false},    // a line differs
		{"a\n", "a\nb\n", false},       // a line too many
		{"a\nb\n", "a\n", false},       // a line too few
		{"packet ctxpkt_...\n", "packet ctxpkt_4W7d\n", true},
		{"packet ctxpkt_... (role x)\n", "packet ctxpkt_4W7d (role x)\n", true},
		{"packet ctxpkt_... (role x)\n", "packet ctxpkt_4W7d (role y)\n", false},
		{"a...\n", "a\nb\n", false},           // inside a line, never across lines
		{"a\n...\nz\n", "a\nb\nc\nz\n", true}, // a line of ... is any number of lines
		{"a\n...\nz\n", "a\nz\n", true},       // none included
		{"a\n...\n", "a\nb\nc\n", true},
		{"a\n...\nz\n", "a\nb\n", false},
		{"x (y) [z] *\n", "x (y) [z] *\n", true}, // no pattern syntax but ...
		{"x (y) [z] *\n", "x y z\n", false},
		{"", "", true},
		{"", "something\n", false},
	} {
		require.Equal(t, c.ok, Match(c.want, c.got), "want %q, got %q", c.want, c.got)
	}
}

func TestFirstDifference(t *testing.T) {
	t.Parallel()
	require.Equal(t, `line 2 of the output: want "rank: 3", got "rank: 2"`, FirstDifference("id ...\nrank: 3\n", "id ctxpkt_x\nrank: 2\n"))
	require.Equal(t, `line 2 of the output is missing: want "b"`, FirstDifference("a\nb\n", "a\n"))
	require.Equal(t, `line 2 of the output is one too many: "b"`, FirstDifference("a\n", "a\nb\n"))
	require.Equal(t, "", FirstDifference("a\n...\nz\n", "a\nb\n"), "past a line of ... it cannot tell")
}
