// Package keyword matches keyword triggers against what a person said:
// whole words, case-insensitive, a multi-word keyword as a phrase, no
// stemming. Words are runs of letters, digits and underscores (as in a
// regular expression's \w), so "refund_policy" is one word and punctuation
// never decides a match ("e-mail" is the phrase "e mail"). Item writes and packet
// assembly share it, so the index of first words that assembly searches and
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
