package attribute

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// asBeforeWords are words that fold in every way words knows: ASCII in
// both cases, accents precomposed and decomposed, letters whose case
// folding changes their length or needs Unicode (ß, İ, the Kelvin sign),
// other scripts, digits, snake_case.
var asBeforeWords = []string{"refund", "Refund", "REFUND", "window", "days", "30", "eu", "EU", "café", "cafe\u0301", "CAFÉ",
	"straße", "STRASSE", "İstanbul", "istanbul", "\u212Aelvin", "kelvin", "Ωmega", "ωmega", "日本", "snake_case", "x1", "the", "a"}

// asBeforeSeps are what stands between words: spaces, line breaks,
// punctuation and markdown markers, emphasis underscores included.
var asBeforeSeps = []string{" ", " ", " ", "\n", ", ", ". ", "\n- ", " **", "** ", " _", "_ ", " `", "` ", "\n\n## ", " — "}

func asBeforeText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(asBeforeWords[rng.IntN(len(asBeforeWords))])
		b.WriteString(asBeforeSeps[rng.IntN(len(asBeforeSeps))])
	}
	return b.String()
}

// TestFindAsBefore: Find, and one Prepared asked many times, answer
// exactly what the matching before Prepared answered (refFind), for
// pieces of the prompt as is, re-cased, re-spaced, with words changed,
// and for texts of random words; words folds as refWords did.
func TestFindAsBefore(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(36, 1))
	kinds := map[string]int{}
	for round := range 60 {
		rendered := asBeforeText(rng, 50+rng.IntN(400))
		if !reflect.DeepEqual(words(rendered), refWords(rendered)) {
			t.Fatalf("round %d: words differ from before on %q", round, rendered)
		}
		p := Prepare(rendered)
		for range 40 {
			var text string
			switch rng.IntN(5) {
			case 0, 1: // a piece of the prompt, perhaps re-cased or with a word changed
				i := rng.IntN(len(rendered))
				j := min(len(rendered), i+1+rng.IntN(300))
				text = strings.ToValidUTF8(rendered[i:j], "")
				if rng.IntN(2) == 0 {
					text = strings.ToUpper(text)
				}
				if ws := strings.Fields(text); len(ws) > 10 && rng.IntN(2) == 0 {
					ws[len(ws)/2] = "changed"
					text = strings.Join(ws, " ")
				}
			case 2: // the prompt's words, re-spaced
				ws := strings.Fields(rendered)
				i := rng.IntN(len(ws))
				text = strings.Join(ws[i:min(len(ws), i+1+rng.IntN(40))], "\n ")
			default:
				text = asBeforeText(rng, 1+rng.IntN(60))
			}
			got, want := p.Find(text), refFind(rendered, text)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, %q in %q:\n got %+v\nwant %+v", round, text, rendered, got, want)
			}
			if !reflect.DeepEqual(Find(rendered, text), want) {
				t.Fatalf("round %d: Find of %q differs from before", round, text)
			}
			if len(want) > 0 {
				kinds[want[0].Kind]++
			}
		}
	}
	for _, k := range []string{Exact, Normalized, Passage} {
		if kinds[k] < 20 {
			t.Fatalf("only %d %s matches: the cases miss a kind (%v)", kinds[k], k, kinds)
		}
	}
}
