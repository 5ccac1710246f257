package keyword

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestIndexAgreesWithContains: the index finds, for every keyword, the
// first message that Contains says holds it, on random messages over a
// small vocabulary (so phrases repeat and half-match often).
func TestIndexAgreesWithContains(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	vocab := []string{"refund", "policy", "the", "ledger", "a", "money", "back", "Refund"}
	text := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = vocab[rng.IntN(len(vocab))]
		}
		return strings.Join(ws, " ")
	}
	for round := range 200 {
		msgs := make([][]string, 1+rng.IntN(12))
		for i := range msgs {
			if rng.IntN(5) > 0 {
				msgs[i] = Words(text(rng.IntN(15)))
			}
		}
		ix := NewIndex(msgs)
		for range 20 {
			k := text(1 + rng.IntN(3))
			want := -1
			for i, m := range msgs {
				if Contains(m, k) {
					want = i
					break
				}
			}
			if got := ix.FirstMessage(k); got != want {
				t.Fatalf("round %d: FirstMessage(%q) = %d, Contains says %d (messages %v)", round, k, got, want, fmt.Sprint(msgs))
			}
		}
	}
	if NewIndex(nil).FirstMessage("x") != -1 || NewIndex([][]string{{"x"}}).FirstMessage("!!") != -1 {
		t.Fatal("no words, no match")
	}
}
