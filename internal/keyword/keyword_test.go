package keyword

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestContains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text, kw string
		want     bool
	}{
		{"I want a REFUND now", "refund", true},
		{"refunds please", "refund", false}, // no stemming
		{"prerefund", "refund", false},      // whole words
		{"Can I get my money back?", "money back", true},
		{"money, back", "money back", true},
		{"back money", "money back", false},
		{"send an e-mail", "e-mail", true},
		{"send an email", "e-mail", false},
		{"Ärger mit der Rückerstattung", "rückerstattung", true},
		{"anything", "  ", false},
		{"see refund_policy", "refund", false}, // underscores join words, as \w does
		{"see refund_policy", "refund_policy", true},
		{"wow !!! great", "!!!", false},
	} {
		require.Equal(t, tc.want, Contains(Words(tc.text), tc.kw), "%q in %q", tc.kw, tc.text)
	}
	require.Equal(t, "money", First("Money back"))
	require.Equal(t, "", First("--"))
}
