// Package attribute finds where a text a person copied from a model's answer
// sits in a packet's rendered prompt. People do not copy word for word: they
// change case, rejoin lines, drop list markers and emphasis, or quote with a
// few words changed. Find answers, in order of preference, the exact
// occurrences; else the occurrences of the text's words in sequence
// (case-folded, NFC, everything between words ignored: white space,
// punctuation, markdown markers); else the longest passages of at least
// MinPassage consecutive words that the text shares with the prompt, each
// with its similarity. It is pure: a function of the two texts.
package attribute

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MinPassage is the fewest consecutive shared words a passage has.
const MinPassage = 8

// MaxPassages bounds the passages an answer lists, longest first.
const MaxPassages = 10

// How a match was found.
const (
	Exact      = "exact"
	Normalized = "normalized"
	Passage    = "passage"
)

// Match is a byte range [Start, End) of the rendered text, how it was
// found, and its similarity to the text asked about: 1 for exact and
// normalized occurrences, a passage's share of the text's words otherwise.
type Match struct {
	Start, End int
	Kind       string
	Similarity float64
}

// word is one word of a text, folded, with its byte range in the text.
type word struct {
	w          string
	start, end int
}

// words splits s into NFC, case-folded words of letters, digits, marks and
// underscores, keeping each one's byte range in s.
func words(s string) []word {
	var out []word
	start := -1
	flush := func(end int) {
		if start >= 0 {
			w := norm.NFC.String(s[start:end])
			out = append(out, word{strings.ToLower(strings.ToUpper(w)), start, end})
			start = -1
		}
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '_' && !emphasis(s, i) {
			if start < 0 {
				start = i
			}
		} else {
			flush(i)
		}
		i += size
	}
	flush(len(s))
	return out
}

// emphasis reports whether the underscore at s[i] marks emphasis (_word_,
// __word__) rather than joining a word (snake_case): it touches a word on
// one side only.
func emphasis(s string, i int) bool {
	before, after := i > 0 && isWordByte(s, i-1, true), i+1 < len(s) && isWordByte(s, i+1, false)
	return before != after
}

func isWordByte(s string, i int, backwards bool) bool {
	var r rune
	if backwards {
		r, _ = utf8.DecodeLastRuneInString(s[:i+1])
	} else {
		r, _ = utf8.DecodeRuneInString(s[i:])
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// Find is every place of text in rendered, as the package doc says.
func Find(rendered, text string) []Match {
	if text == "" {
		return nil
	}
	if ms := exact(rendered, text); len(ms) > 0 {
		return ms
	}
	tw := words(text)
	if len(tw) == 0 {
		return nil
	}
	rw := words(rendered)
	if ms := inSequence(rw, tw); len(ms) > 0 {
		return ms
	}
	return passages(rw, tw)
}

// exact is every occurrence, overlapping ones included ("aa" in "aaa" twice).
func exact(rendered, text string) []Match {
	var out []Match
	for off := 0; off < len(rendered); {
		i := strings.Index(rendered[off:], text)
		if i < 0 {
			break
		}
		start, end := off+i, off+i+len(text)
		// A text of broken UTF-8 may sit inside a character: not a match.
		if utf8.RuneStart(rendered[start]) && (end == len(rendered) || utf8.RuneStart(rendered[end])) {
			out = append(out, Match{Start: start, End: end, Kind: Exact, Similarity: 1})
		}
		_, size := utf8.DecodeRuneInString(rendered[off+i:])
		off += i + size
	}
	return out
}

// inSequence is every run of the rendered words equal to the text's words.
func inSequence(rw, tw []word) []Match {
	var out []Match
	for i := 0; i+len(tw) <= len(rw); i++ {
		ok := true
		for j := range tw {
			if rw[i+j].w != tw[j].w {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, Match{Start: rw[i].start, End: rw[i+len(tw)-1].end, Kind: Normalized, Similarity: 1})
		}
	}
	return out
}

// passages is the maximal runs of at least MinPassage words that the text
// and the rendered prompt share, longest first (then by place), at most
// MaxPassages. Runs are found from the MinPassage-word shingles of the
// prompt, so the cost is linear in both texts plus the runs' lengths.
func passages(rw, tw []word) []Match {
	if len(tw) < MinPassage || len(rw) < MinPassage {
		return nil
	}
	shingle := func(ws []word, i int) string {
		var b strings.Builder
		for _, w := range ws[i : i+MinPassage] {
			b.WriteString(w.w)
			b.WriteByte(0)
		}
		return b.String()
	}
	at := map[string][]int{}
	for i := 0; i+MinPassage <= len(rw); i++ {
		k := shingle(rw, i)
		at[k] = append(at[k], i)
	}
	type run struct{ r, t, n int }
	seen := map[[2]int]bool{} // (rendered start, text start) of runs found
	var runs []run
	for t := 0; t+MinPassage <= len(tw); t++ {
		for _, r := range at[shingle(tw, t)] {
			// Only a run's first shingle starts it: the one before must differ.
			if r > 0 && t > 0 && rw[r-1].w == tw[t-1].w {
				continue
			}
			if seen[[2]int{r, t}] {
				continue
			}
			seen[[2]int{r, t}] = true
			n := MinPassage
			for r+n < len(rw) && t+n < len(tw) && rw[r+n].w == tw[t+n].w {
				n++
			}
			runs = append(runs, run{r, t, n})
		}
	}
	sort.SliceStable(runs, func(i, j int) bool {
		if runs[i].n != runs[j].n {
			return runs[i].n > runs[j].n
		}
		return runs[i].r < runs[j].r
	})
	var out []Match
	for _, ru := range runs {
		if len(out) == MaxPassages {
			break
		}
		out = append(out, Match{Start: rw[ru.r].start, End: rw[ru.r+ru.n-1].end, Kind: Passage,
			Similarity: float64(int(float64(ru.n)/float64(len(tw))*1000+0.5)) / 1000})
	}
	return out
}
