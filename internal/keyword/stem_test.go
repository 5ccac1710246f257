package keyword

import (
	"bufio"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// stemSpecials are words each rule of Porter2 and its exceptions turn on.
var stemSpecials = []string{
	"chargeback", "chargebacks", "skies", "skis", "sky", "news", "dying", "lying", "tying", "idly", "gently",
	"ugly", "early", "only", "singly", "howe", "atlas", "cosmos", "bias", "andes", "inning", "innings",
	"outing", "outings", "canning", "cannings", "herring", "herrings", "earring", "earrings", "proceed",
	"proceeds", "exceed", "exceeding", "succeed", "succeeded", "generously", "generate", "generation",
	"general", "generality", "communism", "community", "communication", "arsenal", "arsenic", "caresses",
	"ponies", "ties", "cries", "died", "tied", "cried", "gas", "gaps", "kiwis", "bus", "buses", "ss",
	"agreed", "feed", "need", "bleed", "luxuriated", "hopping", "hoping", "filing", "failing", "falling",
	"fizzed", "sized", "conflated", "troubled", "happy", "sayy", "cry", "by", "say", "boy", "boys", "enjoy",
	"yes", "yellow", "youth", "ayyy", "yyy", "rational", "relational", "conditional", "valenci", "hesitanci",
	"digitizer", "conformabli", "radicalli", "differentli", "vileli", "analogousli", "vietnamization",
	"predication", "operator", "feudalism", "decisiveness", "hopefulness", "callousness", "formaliti",
	"sensitiviti", "sensibiliti", "geologi", "apologi", "fruitfulli", "carelessli", "nicely", "truly",
	"triplicate", "formative", "formalize", "electriciti", "electrical", "hopeful", "goodness",
	"revival", "allowance", "inference", "airliner", "gyroscopic", "adjustable", "defensible",
	"irritant", "replacement", "adjustment", "dependent", "adoption", "adhesion", "communion", "activate",
	"angulariti", "homologous", "effective", "bowdlerize", "probate", "rate", "cease", "controll", "roll",
	"dog's", "dogs'", "'dog", "'s", "''", "'''", "o'clock", "rock'n'roll", "a", "i", "be", "is", "at", "the",
	"them", "ourselves", "having", "doing", "cafés", "naïve", "naïvety", "résumés", "straße", "ıyi",
	"über", "ελληνικά", "日本語", "x_y", "abc123", "123", "2nd", "mp3s", "cosmoses", "atlases", "biases",
	"newsy", "skying", "dyings", "idle", "onlyness", "generousness", "communes", "arsenals",
	"consign", "consigned", "consigning", "consignment", "consist", "consisted", "consistency",
	"knack", "knackeries", "knaves", "knavish", "kneaded", "kneel", "knelt", "knife", "knight",
	"ied", "ies", "sses", "eed", "eedly", "ingly", "edly", "aed", "ying", "eying", "dyeing", "ageing",
	"emerging", "universal", "university", "organize", "organization", "past", "later", "tableless",
	"fluently", "suddenly", "bumbling", "quickly", "quietly", "agreement", "statement", "ment",
}

// stemSuffixes make derived forms of the listed words.
var stemSuffixes = []string{"s", "es", "ed", "ing", "ly", "edly", "ingly", "ness", "ful", "fulness", "ation",
	"ational", "ement", "ment", "ize", "izer", "ization", "ous", "ously", "ousness", "ive", "iveness",
	"iviti", "biliti", "able", "ably", "al", "alli", "ality", "ance", "ence", "y", "ies", "ied", "er",
	"ers", "ism", "ist", "ogy", "ogi", "li", "'s", "s'", "e", "le", "ll"}

// stemWords is the word list of the differential test: English words
// (from testdata), the specials, derived forms of the shorter words, and
// random strings over letters that exercise the rules.
func stemWords(t *testing.T) []string {
	f, err := os.Open("testdata/stem_words.txt")
	require.NoError(t, err)
	defer f.Close()
	var base []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if w := strings.TrimSpace(sc.Text()); w != "" {
			base = append(base, w)
		}
	}
	require.NoError(t, sc.Err())
	require.Greater(t, len(base), 5000)
	words := append(slices.Clone(base), stemSpecials...)
	rng := rand.New(rand.NewPCG(5, 6))
	for i, w := range base {
		if len(w) <= 9 && i%3 == 0 {
			words = append(words, w+stemSuffixes[rng.IntN(len(stemSuffixes))], w+stemSuffixes[rng.IntN(len(stemSuffixes))])
		}
	}
	letters := []string{"a", "e", "i", "o", "u", "y", "y", "b", "c", "d", "g", "l", "l", "n", "r", "s", "s", "t", "w", "x", "'", "é", "ß"}
	for range 5000 {
		var b strings.Builder
		for range 1 + rng.IntN(10) {
			b.WriteString(letters[rng.IntN(len(letters))])
		}
		b.WriteString([]string{"", "s", "ed", "ing", "ly", "ies", "eed", "ation", "li", "e"}[rng.IntN(10)])
		words = append(words, b.String())
	}
	words = append(words, strings.Repeat("ab", 499)+"ing", strings.Repeat("ab", 500)+"ing") // around 1000 bytes
	slices.Sort(words)
	return slices.Compact(words)
}

// TestStemMatchesPostgres: Stem gives, for every word of a long and varied
// list, the stem PostgreSQL's Snowball English dictionary gives (one
// without stop words, so that every word has a stem; english_stem agrees
// wherever it does not drop a stop word). It needs the database and fails
// without one.
func TestStemMatchesPostgres(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := t.Context()
	_, err := pool.Exec(ctx, `CREATE TEXT SEARCH DICTIONARY english_nostop (TEMPLATE = snowball, LANGUAGE = english)`)
	require.NoError(t, err)
	words := stemWords(t)
	require.Greater(t, len(words), 15000)
	rows, err := pool.Query(ctx, `SELECT w, ts_lexize('english_nostop', w), ts_lexize('english_stem', w)
		FROM unnest($1::text[]) WITH ORDINALITY AS u(w, i) ORDER BY i`, words)
	require.NoError(t, err)
	defer rows.Close()
	var bad []string
	n, stops := 0, 0
	for rows.Next() {
		var w string
		var nostop, stem []string
		require.NoError(t, rows.Scan(&w, &nostop, &stem))
		require.Len(t, nostop, 1, "%q", w)
		if len(stem) == 0 {
			stops++ // a stop word
		} else {
			require.Equal(t, nostop, stem, "english_stem and english_nostop differ on %q", w)
		}
		if got := Stem(w); got != nostop[0] {
			bad = append(bad, w+" → "+got+", PostgreSQL "+nostop[0])
		}
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(words), n)
	require.Greater(t, stops, 50, "the list holds stop words")
	if len(bad) > 0 {
		t.Fatalf("%d of %d words stem otherwise than in PostgreSQL:\n%s", len(bad), n, strings.Join(bad[:min(len(bad), 60)], "\n"))
	}
	t.Logf("%d words, %d of them stop words for english_stem", n, stops)
}

func TestStem(t *testing.T) {
	t.Parallel()
	for w, want := range map[string]string{
		"chargebacks": "chargeback", "chargeback": "chargeback", "skies": "sky", "news": "news",
		"dying": "die", "generously": "generous", "running": "run", "ponies": "poni", "ties": "tie",
		"relational": "relat", "a": "a", "": "",
	} {
		require.Equal(t, want, Stem(w), "%q", w)
	}
	require.Equal(t, []string{"we", "got", "two", "chargeback"}, Stems(Words("We got two CHARGEBACKS")))
}

// FuzzStem: Stem never panics, gives valid UTF-8 for valid UTF-8, and
// never lengthens a word (step 1b adds an e only where it took off at
// least two runes; every other rule shortens or keeps the length). Porter2
// is not idempotent, so the stem of a stem is not asserted.
func FuzzStem(f *testing.F) {
	for _, w := range []string{"chargebacks", "skies", "'s", "yyy", "generously", "caresses", "hoping", "ab", "naïvety", "\xff\xfe", "日本語"} {
		f.Add(w)
	}
	f.Fuzz(func(t *testing.T, w string) {
		s := Stem(w)
		if utf8.ValidString(w) && !utf8.ValidString(s) {
			t.Fatalf("Stem(%q) = %q, not UTF-8", w, s)
		}
		if utf8.ValidString(w) && utf8.RuneCountInString(s) > utf8.RuneCountInString(w) {
			t.Fatalf("Stem(%q) = %q is longer than the word", w, s)
		}
		if w != "" && s == "" {
			t.Fatalf("Stem(%q) is empty", w)
		}
		if s != Stem(w) {
			t.Fatalf("Stem(%q) is not deterministic", w)
		}
	})
}
