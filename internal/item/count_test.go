package item

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/token"
	"github.com/stretchr/testify/require"
)

// TestCountContentAndBlock compares the one-pass counts with counting the
// content and the block each on their own, over contents with every shape
// of line break: none, "\n", "\r\n", blank lines, trailing and leading ones.
func TestCountContentAndBlock(t *testing.T) {
	t.Parallel()
	frags := []string{"Refunds take five days.", "\n", "\r\n", "\n\n", "  ", "- ", "x", "it's", "中文，", "👍", "1234", "\t", "/", " ", "\u00a0", "func f() {", "}", "''", "###"}
	r := rand.New(rand.NewPCG(3, 5))
	cases := [][2]string{{"", ""}, {"T", "c"}, {"", "\n"}, {"Title", "a\nb"}, {" x  y ", "a\r\nb\n\n"}, {"", "\n\nlead"}}
	for range 3000 {
		var title, content strings.Builder
		for range r.IntN(3) {
			title.WriteString(frags[r.IntN(len(frags))])
		}
		for range r.IntN(14) {
			content.WriteString(frags[r.IntN(len(frags))])
		}
		cases = append(cases, [2]string{title.String(), content.String()})
	}
	for _, c := range cases {
		tokens, block, err := countContentAndBlock(c[0], c[1])
		require.NoError(t, err)
		wantTokens, err := token.CountAll(c[1])
		require.NoError(t, err)
		wantBlock, err := token.CountAll(render.MarkdownItemBlock(c[0], c[1]))
		require.NoError(t, err)
		require.Equal(t, wantTokens, tokens, "content of %q", c)
		require.Equal(t, wantBlock, block, "block of %q", c)
	}
}

// BenchmarkCountLongWordItem counts an item whose content is one 1 MiB word,
// under both tokenizers: the word is one chunk, so the bytes are merged once
// for the content and once for the block (whose lead's space joins the
// word's first chunk), four merges in all, and no more.
func BenchmarkCountLongWordItem(b *testing.B) {
	content := strings.Repeat("a", 1<<20)
	if _, err := token.CountAll("warm"); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		if _, _, err := countContentAndBlock("Title", content); err != nil {
			b.Fatal(err)
		}
	}
}
