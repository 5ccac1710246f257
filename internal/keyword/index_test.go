package keyword

import (
	"fmt"
	"math/rand/v2"
	"slices"
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

// TestStemIndexAgreesWithStems: a stem index finds, for every keyword, the
// first message holding the stems of its words as a phrase among the
// stems of the message's words, and FirstMatch names the words as said.
func TestStemIndexAgreesWithStems(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	vocab := []string{"refund", "refunds", "refunding", "policy", "policies", "the", "charges", "charging", "back", "backs"}
	text := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = vocab[rng.IntN(len(vocab))]
		}
		return strings.Join(ws, " ")
	}
	contains := func(words []string, kw string) (bool, string) {
		s, k := Stems(words), Stems(Words(kw))
		for i := 0; len(k) > 0 && i+len(k) <= len(s); i++ {
			if slices.Equal(s[i:i+len(k)], k) {
				return true, strings.Join(words[i:i+len(k)], " ")
			}
		}
		return false, ""
	}
	for round := range 200 {
		msgs := make([][]string, 1+rng.IntN(12))
		for i := range msgs {
			if rng.IntN(5) > 0 {
				msgs[i] = Words(text(rng.IntN(15)))
			}
		}
		ix := NewStemIndex(msgs)
		for range 20 {
			k := text(1 + rng.IntN(3))
			want, wantSaid := -1, ""
			for i, m := range msgs {
				if ok, said := contains(m, k); ok {
					want, wantSaid = i, said
					break
				}
			}
			got, said := ix.FirstMatch(k)
			if got != want || said != wantSaid || ix.FirstMessage(k) != want {
				t.Fatalf("round %d: FirstMatch(%q) = %d %q, want %d %q (messages %v)", round, k, got, said, want, wantSaid, fmt.Sprint(msgs))
			}
		}
	}
	ix := NewStemIndex([][]string{Words("We got two chargebacks")})
	if n, said := ix.FirstMatch("Chargeback"); n != 0 || said != "chargebacks" {
		t.Fatalf("chargeback: %d %q", n, said)
	}
	if NewIndex([][]string{Words("We got two chargebacks")}).FirstMessage("chargeback") != -1 {
		t.Fatal("a word index does not stem")
	}
	if Term("Charge backs", true) != "~charg" || Term("Charge backs", false) != "charge" || Term("!!", true) != "" {
		t.Fatalf("Term: %q %q", Term("Charge backs", true), Term("Charge backs", false))
	}
}
