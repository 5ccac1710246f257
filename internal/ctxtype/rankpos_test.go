package ctxtype

import (
	"cmp"
	"math/rand/v2"
	"testing"
)

// TestRankPosCompareIsLexicographic: Compare orders by authority, then
// priority, confidence, time and key, as comparing every column in turn
// does, on positions that tie on any prefix of the columns.
func TestRankPosCompareIsLexicographic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pos := func() RankPos {
		return RankPos{Authority: int16(rng.IntN(3) - 1), Priority: int64(rng.IntN(3) - 1), Confidence: int16(rng.IntN(3)),
			Time: int64(rng.IntN(3)), Key: string(rune('a' + rng.IntN(3)))}
	}
	for range 20000 {
		a, b := pos(), pos()
		want := cmp.Or(cmp.Compare(a.Authority, b.Authority), cmp.Compare(a.Priority, b.Priority),
			cmp.Compare(a.Confidence, b.Confidence), cmp.Compare(a.Time, b.Time), cmp.Compare(a.Key, b.Key))
		if got := a.Compare(b); got != want {
			t.Fatalf("%+v.Compare(%+v) = %d, want %d", a, b, got, want)
		}
	}
}
