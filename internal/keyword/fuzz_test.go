package keyword

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

// separators stand for the punctuation and white space between words,
// which the package says never decides a match.
var separators = []string{" ", "-", ", ", "\n", "!!", "\t(", "/", "…", "\u00a0", "。"}

// isWordRune is the package's definition of a word's rune, applied after
// lower-casing as Words does.
func isWordRune(r rune) bool {
	r = unicode.ToLower(r)
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'
}

// FuzzContains: whatever the text and keyword, Words and Contains do not
// panic and answer the same twice; every word is a non-empty lower-case run
// of word runes; a phrase made of consecutive words of the text matches it,
// however the phrase is punctuated; changing the punctuation between the
// words of the text changes nothing; and a match always has the keyword's
// First word among the text's words (the index assembly searches).
func FuzzContains(f *testing.F) {
	f.Add("I want a REFUND now", "refund", uint8(3), uint8(1), uint8(0))
	f.Add("Can I get my money back?", "money back", uint8(4), uint8(2), uint8(2))
	f.Add("see refund_policy, then e-mail support", "e-mail", uint8(3), uint8(2), uint8(1))
	f.Add("Ärger mit der Rückerstattung", "RÜCKERSTATTUNG", uint8(3), uint8(1), uint8(3))
	f.Add("中文文本，更多内容。日本語のテキストです", "更多内容", uint8(1), uint8(1), uint8(9))
	f.Add("ok 👍🏽 done 🇫🇷", "done", uint8(1), uint8(1), uint8(4))
	f.Add("func main() {\n\tfmt.Println(\"hi\")\n}", "fmt println", uint8(2), uint8(2), uint8(5))
	f.Add("\xff\xfe invalid \xc3\x28 utf8", "invalid", uint8(0), uint8(2), uint8(6))
	f.Add("नमस्ते दुनिया", "दुनिया", uint8(1), uint8(1), uint8(0))
	f.Add(strings.Repeat("a ", 300), "a a a", uint8(7), uint8(3), uint8(7))
	f.Fuzz(func(t *testing.T, text, kw string, start, n, sep uint8) {
		if len(text) > 4096 || len(kw) > 512 {
			return
		}
		words := Words(text)
		if again := Words(text); !slices.Equal(words, again) {
			t.Fatalf("Words(%q) twice: %q then %q", text, words, again)
		}
		for _, w := range words {
			if w == "" || strings.ToLower(w) != w {
				t.Fatalf("Words(%q) holds %q, not a lower-case word", text, w)
			}
			for _, r := range w {
				if !isWordRune(r) {
					t.Fatalf("Words(%q) holds %q, with the non-word rune %q", text, w, r)
				}
			}
		}

		got := Contains(words, kw)
		if again := Contains(words, kw); got != again {
			t.Fatalf("Contains(%q, %q) twice: %v then %v", text, kw, got, again)
		}
		first := First(kw)
		if first != First(kw) {
			t.Fatalf("First(%q) is not deterministic", kw)
		}
		if kwWords := Words(kw); (first == "") != (len(kwWords) == 0) || (first != "" && first != kwWords[0]) {
			t.Fatalf("First(%q) = %q, but its words are %q", kw, first, kwWords)
		}
		if got && !slices.Contains(words, first) {
			t.Fatalf("%q matches %q, but its first word %q is not among the text's words %q", kw, text, first, words)
		}
		if first == "" && got {
			t.Fatalf("keyword %q without words matches %q", kw, text)
		}

		// Punctuation never decides a match: the text with every run of
		// non-word runes replaced by another separator has the same words.
		s := separators[int(sep)%len(separators)]
		var b strings.Builder
		inSep := false
		for _, r := range text {
			if isWordRune(r) {
				b.WriteRune(r)
				inSep = false
			} else if !inSep {
				b.WriteString(s)
				inSep = true
			}
		}
		if respelled := Words(b.String()); !slices.Equal(words, respelled) {
			t.Fatalf("punctuation changed the words: %q gives %q, %q gives %q", text, words, b.String(), respelled)
		}
		if Contains(Words(b.String()), kw) != got {
			t.Fatalf("punctuation changed the match of %q: %q vs %q", kw, text, b.String())
		}

		// A phrase of consecutive words of the text matches it, whatever
		// separates the phrase's words.
		if len(words) == 0 {
			return
		}
		i := int(start) % len(words)
		j := min(len(words), i+1+int(n)%4)
		phrase := "  " + strings.Join(words[i:j], s) + s
		if !Contains(words, phrase) {
			t.Fatalf("phrase %q of the words %q of %q does not match", phrase, words, text)
		}
		// Whole words: the phrase's words run together are one word, which
		// matches only where the text has that word.
		if glued := strings.Join(words[i:j], ""); Contains(words, glued) != slices.Contains(words, glued) {
			t.Fatalf("%q: match %v, but is a word of %q: %v", glued, Contains(words, glued), text, slices.Contains(words, glued))
		}
	})
}

// caseVariant writes each rune of s in another case, chosen by pick:
// as it is, upper case, lower case or title case (unicode.ToUpper and so
// on), where that is the same letter in the sense of strings.EqualFold
// (so dotless ı does not become I).
func caseVariant(s string, pick []byte) string {
	var b strings.Builder
	i := 0
	for _, r := range s {
		x := r
		if len(pick) > 0 {
			switch pick[i%len(pick)] % 4 {
			case 1:
				x = unicode.ToUpper(r)
			case 2:
				x = unicode.ToLower(r)
			case 3:
				x = unicode.ToTitle(r)
			}
		}
		i++
		if x != r && !strings.EqualFold(string(r), string(x)) {
			x = r
		}
		b.WriteRune(x)
	}
	return b.String()
}

// FuzzCaseInsensitive: the package says a keyword matches
// case-insensitively, so writing the text and the keyword in another case
// (upper, lower or title case, rune by rune) never changes whether it
// matches.
func FuzzCaseInsensitive(f *testing.F) {
	f.Add("I want a REFUND now", "Refund", []byte{1, 0, 2}, []byte{2})
	f.Add("Ärger mit der Rückerstattung", "rückerstattung", []byte{1}, []byte{3, 0})
	f.Add("Straße und STRASSE", "straße", []byte{0, 1}, []byte{1})
	f.Add("İstanbul'da ılık hava", "ılık", []byte{1, 2, 3}, []byte{1})
	f.Add("Ελληνικά κείμενα", "ΚΕΊΜΕΝΑ", []byte{2}, []byte{2})
	f.Add("русский ТЕКСТ", "текст", []byte{1}, []byte{1, 2})
	f.Add("HTTPServer'S URL ǅungla", "httpserver", []byte{3, 1}, []byte{1})
	f.Fuzz(func(t *testing.T, text, kw string, textCase, kwCase []byte) {
		if len(text) > 2048 || len(kw) > 256 {
			return
		}
		want := Contains(Words(text), kw)
		text2, kw2 := caseVariant(text, textCase), caseVariant(kw, kwCase)
		if !strings.EqualFold(text, text2) || !strings.EqualFold(kw, kw2) {
			t.Fatalf("caseVariant is not a case variant: %q %q", text2, kw2)
		}
		if got := Contains(Words(text2), kw2); got != want {
			t.Fatalf("case changed the match: Contains(Words(%q), %q) = %v, but Contains(Words(%q), %q) = %v (words %q vs %q, keyword words %q vs %q)",
				text, kw, want, text2, kw2, got, Words(text), Words(text2), Words(kw), Words(kw2))
		}
	})
}
