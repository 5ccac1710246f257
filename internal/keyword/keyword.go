// Package keyword matches keyword triggers against what a person said:
// whole words, case-insensitive, a multi-word keyword as a phrase. Words
// are runs of letters, digits and underscores (as in a regular
// expression's \w), so "refund_policy" is one word and punctuation never
// decides a match ("e-mail" is the phrase "e mail"). A trigger may opt into
// stemming: then the stems (Stem, Porter2 as PostgreSQL's english_stem)
// of the keyword's words are looked for among the stems of the person's,
// so "chargeback" matches "chargebacks". Item writes and packet assembly
// share it, so the index of first words (Term) that assembly searches and
// the match it confirms can never disagree.
package keyword

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Words splits text into case-folded words, in one pass over the text.
// Lower-casing alone is not folding: "ΛΌΓΟΣ" lowers to "λόγοσ" where the
// word is written "λόγος", and ſ, µ and ϑ have the same trouble; upper
// then lower maps every spelling of a letter to one.
func Words(text string) []string {
	var out []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			out = append(out, b.String())
			b.Reset()
		}
	}
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf { // ASCII: the common case, without a rune decode
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_':
				b.WriteByte(c)
			case 'A' <= c && c <= 'Z':
				b.WriteByte(c + 'a' - 'A')
			default:
				flush()
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if r == utf8.RuneError && size == 1 {
			r = utf8.RuneError // as strings.ToUpper reads invalid bytes
		}
		f := unicode.ToLower(unicode.ToUpper(r))
		if !unicode.IsLetter(f) && !unicode.IsDigit(f) {
			flush()
			continue
		}
		b.WriteRune(f)
	}
	flush()
	return out
}

// First returns the first word of a keyword, "" if it has none. Assembly
// finds keyword items by the first words of their keywords.
func First(keyword string) string {
	if w := Words(keyword); len(w) > 0 {
		return w[0]
	}
	return ""
}

// StemMark begins the index term of a keyword matched by stems: the mark
// and the stem of its first word. No word holds it, so a stem term never
// meets a word term ("~charg" is not the word "charg").
const StemMark = "~"

// Term is what assembly finds a keyword item by: the keyword's first word,
// or with stem StemMark and that word's stem; "" if it has no words.
func Term(keyword string, stem bool) string {
	w := First(keyword)
	if w == "" || !stem {
		return w
	}
	return StemMark + Stem(w)
}

// Contains reports whether the words of text contain the keyword's words
// as a contiguous phrase.
func Contains(textWords []string, keyword string) bool {
	kw := Words(keyword)
	if len(kw) == 0 {
		return false
	}
	for i := 0; i+len(kw) <= len(textWords); i++ {
		match := true
		for j, w := range kw {
			if textWords[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
