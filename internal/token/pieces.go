package token

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// CountPieces returns exactly Count(t, strings.Join(pieces, "")), using
// known[i] (the exact count of pieces[i] alone) where known[i] >= 0 and
// counting pieces[i] itself where known[i] < 0, plus a recount of a small
// window of text around each junction.
//
// # How
//
// In each piece CountPieces finds its first clean cut x and its last clean
// cut y (defined below; both strictly inside the piece). The joined text T is
// then the interiors P[x:y] of the pieces that have a cut, and between them
// windows: the tail P[y:] of one cut piece, every piece without a cut (such
// as "\n" or "12"), and the head Q[:x] of the next cut piece. The count is
//
//	Σ over cut pieces (known − Count(P[:x]) − Count(P[y:])) + Σ over windows Count(window)
//
// A piece with no cut inside but clean cuts of T at both of its ends (the
// lemma read across the junctions, with the neighbours' runes; the start and
// the end of T are always clean) is counted as known[i] and closes the window
// before it: a line that is one long word between line breaks is not merged
// again.
//
// Heads, tails and windows are usually a few bytes ("\n", "-", ".\n\n###"), and
// are counted through CountCached, so most of them are hits. The cost is that
// of the windows and of finding the cuts, which stops at the first cut found
// from each end; a piece is read whole only when it has no cut.
//
// # Why it is exact
//
// The tokenizer cuts a text into chunks with its pre-tokenizer regex, matched
// repeatedly, each match starting where the previous ended (every character
// starts a match of these patterns, so the chunks tile the text), and encodes
// each chunk on its own: a count is the sum of its chunks' counts. Call k a
// clean cut of X when the chunks of X are those of X[:k] followed by those of
// X[k:]; then Count(X) = Count(X[:k]) + Count(X[k:]).
//
// Lemma. Let c be the rune ending at k and d the rune starting at k, both
// validly encoded. For o200k_base and cl100k_base, k is a clean cut of every
// text X with these two runes there if
//
//	letter:  c is \p{L};  d is not \p{L}, not \p{M}, not '\''
//	number:  c is \p{N};  d is not \p{N}
//	symbol:  c is not \s, \p{L}, \p{N};  d is \p{N}, or \s other than \r, \n
//	newline: c is \r or \n;  d is not \s and not '/'
//
// Proof. The patterns (o200k, then cl100k) are
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// They have no look-behind and no anchors, so a match at p depends on X[p:]
// only, and from a chunk boundary on, X is chunked as the rest alone is. Below
// k, take a match attempt at a chunk start p < k, in any alternative, failing
// or not. It reads position k only after consuming X[p:k], so with c as the
// last rune consumed, and what it tests at k is fixed by the element that
// consumed c:
//   - a letter sits in a letter run or a contraction; next comes a letter or
//     mark class, an apostrophe or a contraction letter;
//   - a number sits in \p{N}{1,3}; next comes \p{N};
//   - another non-space rune is the optional prefix (next: a letter or mark
//     class), in the [^\s\p{L}\p{N}]+ run (next: that class, or [\r\n/] or
//     [\r\n]), in an o200k letter run if a mark (next: as for a letter), or
//     the apostrophe of a contraction (next: a letter);
//   - \r or \n is in a [\r\n/]* or [\r\n]* suffix (next: \r, \n or '/') or in
//     the whitespace run of \s*[\r\n]+ (next: \s or [\r\n]); \s+(?!\S) and \s+
//     are tried only where \s*[\r\n]+ failed, and it cannot fail at p when the
//     whitespace run from p holds c.
//
// In each case d fails the test, as the end of the text fails it, so the
// attempt reads nothing beyond k and decides alike on X and on X[:k]. By
// induction over the chunk starts below k, X and X[:k] have the same chunks
// there, the last ending at k. (End of text passes one test, the (?!\S)
// look-ahead: that is why no cut follows a space or tab, as in "a  "+"b".)
// The engine (regexp2) matches on []rune(X), an invalid byte becoming one
// U+FFFD; a valid rune starts at a byte no decoding can step over, so with c
// and d valid the runes of X are those of X[:k] followed by those of X[k:].
// Invalid UTF-8 elsewhere, a rune split across two pieces included, lies
// inside a window or an interior and is tokenized there as in T.
//
// Use. The lemma reads only c and d, so a cut with both runes inside piece P
// is clean in P alone and in T alike. Two clean cuts a ≤ b of T delimit
// chunks of T that are those of T[a:b] (a is a boundary of T[:b], after which
// T[:b] is chunked as T[a:b]). So T's chunks between x and y are P[x:y]'s,
// counting known − Count(P[:x]) − Count(P[y:]) as x and y are clean in P too;
// T's chunks in a window are the window's own. The sum is Count(T).
func CountPieces(t Tokenizer, pieces []string, known []int) (int, error) {
	if len(known) != len(pieces) {
		return 0, fmt.Errorf("count pieces: %d pieces, %d known counts", len(pieces), len(known))
	}
	if !t.Valid() {
		return 0, fmt.Errorf("unknown tokenizer %q", t)
	}
	var buf [512]byte
	win := buf[:0]     // the open window: text since the last cut
	winIsTail := false // win is exactly the tail of the last cut piece
	tail := 0          // Count of that tail
	total := 0
	prev := "" // the last non-empty piece before p
	for i, p := range pieces {
		if p == "" {
			continue
		}
		x, y, ok := cuts(p)
		if !ok && known[i] >= 0 && cleanBefore(prev, p) && cleanAfter(p, pieces[i+1:]) {
			// No cut inside p, but both its ends are clean cuts of T: p's
			// chunks are its own, and its known count stands. This keeps a
			// piece that is one long chunk (a line that is one word) from
			// being counted again.
			w, err := windowCount(t, win, winIsTail, tail)
			if err != nil {
				return 0, err
			}
			total += w + known[i]
			win, winIsTail, prev = win[:0], false, p
			continue
		}
		prev = p
		if !ok {
			win = append(win, p...)
			winIsTail = false
			continue
		}
		n := known[i]
		if n < 0 {
			var err error
			if n, err = CountCached(t, p); err != nil {
				return 0, err
			}
		}
		// Close the window at x. With nothing before, the window is p[:x]
		// and its count cancels the head's.
		if len(win) > 0 {
			head, err := CountCached(t, p[:x])
			if err != nil {
				return 0, err
			}
			win = append(win, p[:x]...)
			w, err := countCachedBytes(t, win)
			if err != nil {
				return 0, err
			}
			total += w - head
		}
		var err error
		if tail, err = CountCached(t, p[y:]); err != nil {
			return 0, err
		}
		total += n - tail
		win = append(win[:0], p[y:]...)
		winIsTail = true
	}
	w, err := windowCount(t, win, winIsTail, tail) // at the end of the text
	if err != nil {
		return 0, err
	}
	return total + w, nil
}

// windowCount is the count of the open window win where a clean cut closes
// it: tail, already counted, when win is exactly the last cut piece's tail
// (whose count was taken off that piece's known count and cancels here).
func windowCount(t Tokenizer, win []byte, winIsTail bool, tail int) (int, error) {
	switch {
	case winIsTail:
		return tail, nil
	case len(win) > 0:
		return countCachedBytes(t, win)
	}
	return 0, nil
}

// cleanBefore reports whether the start of p is a clean cut of the joined
// text, prev being the non-empty piece before it ("" at the start of the
// text, which is always clean). A rune split across the two pieces decodes as
// an invalid byte on one side, and cleanCut refuses it.
func cleanBefore(prev, p string) bool {
	return prev == "" || cleanJunction(prev, p)
}

// cleanAfter reports whether the end of p is a clean cut of the joined text,
// rest being the pieces after it (the end of the text is always clean).
func cleanAfter(p string, rest []string) bool {
	for _, q := range rest {
		if q != "" {
			return cleanJunction(p, q)
		}
	}
	return true
}

// cleanJunction reports whether the cut between a and b (both non-empty),
// joined, is clean by the lemma.
func cleanJunction(a, b string) bool {
	c, n := utf8.DecodeLastRuneInString(a)
	d, m := utf8.DecodeRuneInString(b)
	return cleanCut(c, n, d, m)
}

// cuts returns the first and the last clean cut strictly inside p.
func cuts(p string) (first, last int, ok bool) {
	c, n := utf8.DecodeRuneInString(p)
	for k := n; k < len(p); {
		d, m := utf8.DecodeRuneInString(p[k:])
		if cleanCut(c, n, d, m) {
			first, ok = k, true
			break
		}
		c, n = d, m
		k += m
	}
	if !ok {
		return 0, 0, false
	}
	d, m := utf8.DecodeLastRuneInString(p)
	for k := len(p) - m; k >= first; {
		c, n := utf8.DecodeLastRuneInString(p[:k])
		if cleanCut(c, n, d, m) {
			return first, k, true
		}
		d, m = c, n
		k -= n
	}
	return first, first, true // not reached: first itself is clean
}

// Rune classes of the lemma. \s is unicode.IsSpace, as in regexp2.
type runeClass uint8

const (
	clsOther   runeClass = iota // none of the others: punctuation, symbols, controls
	clsNewline                  // \r, \n
	clsSpace                    // \s other than \r, \n
	clsLetter                   // \p{L}
	clsNumber                   // \p{N}
	clsMark                     // \p{M}
)

var asciiClass = func() (a [utf8.RuneSelf]runeClass) {
	for r := range rune(utf8.RuneSelf) {
		a[r] = classOfSlow(r)
	}
	return a
}()

func classOf(r rune) runeClass {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	return classOfSlow(r)
}

func classOfSlow(r rune) runeClass {
	switch {
	case r == '\r' || r == '\n':
		return clsNewline
	case unicode.IsSpace(r):
		return clsSpace
	case unicode.Is(unicode.L, r):
		return clsLetter
	case unicode.Is(unicode.N, r):
		return clsNumber
	case unicode.Is(unicode.M, r):
		return clsMark
	}
	return clsOther
}

// cleanCut reports whether the lemma makes a cut between rune c (encoded in
// cn bytes) and rune d (dn bytes) clean.
func cleanCut(c rune, cn int, d rune, dn int) bool {
	if c == utf8.RuneError && cn <= 1 || d == utf8.RuneError && dn <= 1 {
		return false // an invalid byte: regexp2 sees U+FFFD, T might see more
	}
	dc := classOf(d)
	switch classOf(c) {
	case clsLetter:
		return dc != clsLetter && dc != clsMark && d != '\''
	case clsNumber:
		return dc != clsNumber
	case clsOther, clsMark:
		return dc == clsNumber || dc == clsSpace
	case clsNewline:
		return dc != clsNewline && dc != clsSpace && d != '/'
	}
	return false
}
