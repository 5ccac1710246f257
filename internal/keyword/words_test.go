package keyword

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// referenceWords is Words as the package doc defines it, written plainly:
// fold the whole text (upper, then lower), split on what is not a letter,
// a digit or an underscore. Words does the same in one pass.
func referenceWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(strings.ToUpper(text)), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
	})
}

func TestWordsMatchesItsDefinition(t *testing.T) {
	alphabet := []string{"a", "Z", "_", " ", "-", "9", "ς", "Σ", "ſ", "µ", "ϑ", "İ", "ß", "ẞ", "日本", "é", "É", "\xff", "\xe2\x82", "🙂", "Ⅻ", "ǅ", "\u00a0", "٣"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		if got, want := Words(s), referenceWords(s); !slices.Equal(got, want) {
			t.Fatalf("Words(%q) = %q, want %q", s, got, want)
		}
	}
}
