package token

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizers of o200k_base and cl100k_base, written out by hand.
//
// A tokenizer cuts text into chunks with a regular expression matched again
// and again, each match starting where the previous one ended, and encodes
// each chunk on its own. tiktoken-go matches the expressions with a
// backtracking engine (regexp2), which is most of its cost and, on a long run
// of one character class, far more than linear. The functions below return
// the end of the chunk that starts at i, exactly as that engine would find
// it: the alternatives are tried in order and each is resolved as its greedy
// quantifiers backtrack, which for these patterns comes down to a forward scan
// of a run of one class and, for the letters of o200k, a backward scan of the
// same run. Every position is read a bounded number of times, so chunking is
// linear in the text. TestChunksMatchTiktoken and FuzzCount compare them with
// tiktoken-go.
//
// o200k_base:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// cl100k_base:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// \s is unicode.IsSpace, as in regexp2. The texts are valid UTF-8 here:
// Count replaces each invalid byte by U+FFFD first, as tiktoken-go's
// conversion to runes does.

// Character properties, as bits.
const (
	pSpace  uint8 = 1 << iota // \s
	pLetter                   // \p{L}
	pNumber                   // \p{N}
	pUpper                    // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], o200k's first letter class
	pLower                    // [\p{Ll}\p{Lm}\p{Lo}\p{M}], o200k's second letter class
	// pDel marks U+007F, which tiktoken-go's generated matcher leaves out
	// of [^\r\n\p{L}\p{N}] and [^\s\p{L}\p{N}] (its ASCII bitmaps stop
	// at 126), so no alternative matches there: the character is skipped,
	// in no chunk, and counts no token.
	pDel
)

// bmpProps holds the properties of every rune of the Basic Multilingual
// Plane, computed once (64 KiB); runes above it are classified each time.
var bmpProps = func() *[1 << 16]uint8 {
	var t [1 << 16]uint8
	for r := range rune(len(t)) {
		t[r] = propsSlow(r)
	}
	t[0x7f] |= pDel
	return &t
}()

func propsSlow(r rune) uint8 {
	var p uint8
	if unicode.IsSpace(r) {
		p |= pSpace
	}
	if unicode.IsNumber(r) {
		p |= pNumber
	}
	switch {
	case unicode.Is(unicode.Lu, r), unicode.Is(unicode.Lt, r):
		p |= pLetter | pUpper
	case unicode.Is(unicode.Ll, r):
		p |= pLetter | pLower
	case unicode.Is(unicode.Lm, r), unicode.Is(unicode.Lo, r):
		p |= pLetter | pUpper | pLower
	case unicode.Is(unicode.M, r):
		p |= pUpper | pLower
	}
	return p
}

// at decodes the rune at i (i < len(s)) and its properties.
func at(s string, i int) (rune, int, uint8) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, bmpProps[c]
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r < 1<<16 {
		return r, n, bmpProps[r]
	}
	return r, n, propsSlow(r)
}

// prefixOK reports [^\r\n\p{L}\p{N}].
func prefixOK(r rune, p uint8) bool { return r != '\r' && r != '\n' && p&(pLetter|pNumber|pDel) == 0 }

// symbolOK reports [^\s\p{L}\p{N}].
func symbolOK(p uint8) bool { return p&(pSpace|pLetter|pNumber|pDel) == 0 }

// run returns the end of the run of runes with a property in want from i.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		_, n, p := at(s, i)
		if p&want == 0 {
			break
		}
		i += n
	}
	return i
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or i.
// The case-insensitive set is regexp2's: ſ (U+017F) counts as an s.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	e := func(j int) bool { return j < len(s) && s[j]|0x20 == 'e' }
	switch c := s[i+1]; c | 0x20 {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if e(i + 2) {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && s[i+2]|0x20 == 'l' {
			return i + 3
		}
	default:
		if c == 0xC5 && i+2 < len(s) && s[i+2] == 0xBF { // ſ
			return i + 3
		}
	}
	return i
}

// number is \p{N}{1,3} at i, or i.
func number(s string, i int) int {
	j := i
	for k := 0; k < 3 && j < len(s); k++ {
		_, n, p := at(s, j)
		if p&pNumber == 0 {
			break
		}
		j += n
	}
	return j
}

// symbols is ` ?[^\s\p{L}\p{N}]+[\r\n]*` at i (with '/' among the trailing
// characters when slash), or i.
func symbols(s string, i int, slash bool) int {
	j := i
	if s[j] == ' ' && j+1 < len(s) {
		if _, _, p := at(s, j+1); symbolOK(p) {
			j++
		}
	}
	for j < len(s) {
		_, n, p := at(s, j)
		if !symbolOK(p) {
			break
		}
		j += n
	}
	if j == i { // a space alone is not a symbol run
		return i
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || (slash && s[j] == '/')) {
		j++
	}
	return j
}

// spaces resolves `\s*[\r\n]+|\s+(?!\S)|\s+` at i, where s[i:] starts
// with white space.
//
// The first alternative is resolved as tiktoken-go resolves it, which is
// not how a backtracking engine reads it: its generated matcher gives back
// \s* to the run's first line break, not its last, so "\n  \n x" starts
// with the chunk "\n" where OpenAI's tiktoken takes "\n  \n". Counts
// must be tiktoken-go's (the reference of the tests and of every count
// stored so far), so this follows it; the difference is a few tokens on
// texts with indented blank lines.
func spaces(s string, i int) int {
	j, firstNL, lastStart := i, -1, i
	for j < len(s) {
		_, n, p := at(s, j)
		if p&pSpace == 0 {
			break
		}
		if s[j] == '\r' || s[j] == '\n' {
			if firstNL < 0 {
				firstNL = j
			}
		} else if firstNL >= 0 {
			// The chunk ends with this line-break run; reading the rest of
			// the white space would make a run of " \n" quadratic.
			break
		}
		lastStart = j
		j += n
	}
	switch {
	case firstNL >= 0: // \s*[\r\n]+: through the line breaks at the run's first
		k := firstNL
		for k < j && (s[k] == '\r' || s[k] == '\n') {
			k++
		}
		return k
	case j == len(s) || lastStart == i: // \s+(?!\S) at the end, or \s+ of one rune
		return j
	default: // \s+(?!\S): all but the last rune, which goes with what follows
		return lastStart
	}
}

// o200kLetters resolves o200k's two letter alternatives at i, or returns i.
func o200kLetters(s string, i int) int {
	r, n, p := at(s, i)
	hasPrefix := prefixOK(r, p)
	// [^\r\n\p{L}\p{N}]?[Upper]*[Lower]+: with the prefix, then without.
	if hasPrefix && i+n < len(s) {
		if end := upperLower(s, i+n); end > 0 {
			return end
		}
	}
	if end := upperLower(s, i); end > 0 {
		return end
	}
	// [^\r\n\p{L}\p{N}]?[Upper]+[Lower]*
	if hasPrefix && i+n < len(s) {
		if e := run(s, i+n, pUpper); e > i+n {
			return contraction(s, run(s, e, pLower))
		}
	}
	if e := run(s, i, pUpper); e > i {
		return contraction(s, run(s, e, pLower))
	}
	return i
}

// upperLower is [Upper]*[Lower]+(contraction)? from j as the backtracking
// engine finds it: the upper run as long as it goes, then given back one rune
// at a time until a lower-class rune can start the lower run. It returns the
// end, or 0 when there is no lower-class rune to start it.
func upperLower(s string, j int) int {
	e := run(s, j, pUpper)
	k := -1
	if e < len(s) {
		if _, _, p := at(s, e); p&pLower != 0 {
			k = e
		}
	}
	for b := e; k < 0 && b > j; {
		_, n := utf8.DecodeLastRuneInString(s[j:b])
		b -= n
		if _, _, p := at(s, b); p&pLower != 0 {
			k = b
		}
	}
	if k < 0 {
		return 0
	}
	return contraction(s, run(s, k, pLower))
}

// nextO200k returns the end of o200k_base's chunk at i, or i when no
// alternative matches there (only at U+007F).
func nextO200k(s string, i int) int {
	if end := o200kLetters(s, i); end > i {
		return end
	}
	if end := number(s, i); end > i {
		return end
	}
	if end := symbols(s, i, true); end > i {
		return end
	}
	return spaces(s, i)
}

// nextCl100k returns the end of cl100k_base's chunk at i, or i when no
// alternative matches there (only at U+007F).
func nextCl100k(s string, i int) int {
	if end := contraction(s, i); end > i {
		return end
	}
	r, n, p := at(s, i)
	if prefixOK(r, p) && i+n < len(s) {
		if e := run(s, i+n, pLetter); e > i+n {
			return e
		}
	}
	if e := run(s, i, pLetter); e > i {
		return e
	}
	if end := number(s, i); end > i {
		return end
	}
	if end := symbols(s, i, false); end > i {
		return end
	}
	return spaces(s, i)
}
