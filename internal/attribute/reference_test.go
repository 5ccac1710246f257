package attribute

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The matching as it was before Prepared indexed the rendered words once
// and folded ASCII words without allocating: a test-only copy that Find
// and Prepared.Find must answer exactly alike (TestFindAsBefore, FuzzFind).

// refWords splits s into NFC, case-folded words of letters, digits, marks and
// underscores, keeping each one's byte range in s.
func refWords(s string) []word {
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

// refFind is Find as it was before Prepared (commit 8d8c534): the
// reference every Find must agree with.
func refFind(rendered, text string) []Match {
	if text == "" {
		return nil
	}
	if ms := exact(rendered, text); len(ms) > 0 {
		return ms
	}
	tw := refWords(text)
	if len(tw) == 0 {
		return nil
	}
	rw := refWords(rendered)
	if ms := refInSequence(rw, tw); len(ms) > 0 {
		return ms
	}
	return refPassages(rw, tw)
}

// refInSequence is every run of the rendered words equal to the text's words.
func refInSequence(rw, tw []word) []Match {
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

// refPassages is the maximal runs of at least MinPassage words that the text
// and the rendered prompt share, longest first (then by place), at most
// MaxPassages. Runs are found from the MinPassage-word shingles of the
// prompt, so the cost is linear in both texts plus the runs' lengths.
func refPassages(rw, tw []word) []Match {
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
