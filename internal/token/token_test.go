package token

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tok  Tokenizer
		text string
		want int
	}{
		{O200kBase, "", 0},
		{O200kBase, "hello world", 2},
		{Cl100kBase, "hello world", 2},
	} {
		got, err := Count(tc.tok, tc.text)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%s %q", tc.tok, tc.text)
	}
	_, err := Count("p50k_base", "x")
	require.Error(t, err)
	require.False(t, Tokenizer("p50k_base").Valid())
}

func BenchmarkCount500B(b *testing.B) {
	text := ""
	for len(text) < 500 {
		text += "The quick brown fox jumps over the lazy dog; refunds take five days. "
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := CountAll(text); err != nil {
			b.Fatal(err)
		}
	}
}
