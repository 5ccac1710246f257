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
// underscores, keeping each one's byte range in s. An ASCII word is folded
// by lowering its letters, which is what NFC and case folding do to it,
// without their allocations (a rendered prompt is mostly ASCII).
func words(s string) []word {
	out := make([]word, 0, len(s)/6+1) // ~6 bytes a word and its space
	start, ascii := -1, true
	flush := func(end int) {
		if start >= 0 {
			out = append(out, word{fold(s[start:end], ascii), start, end})
			start, ascii = -1, true
		}
	}
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '_' && !emphasis(s, i) {
			if start < 0 {
				start = i
			}
			ascii = ascii && size == 1 && r < utf8.RuneSelf
		} else {
			flush(i)
		}
		i += size
	}
	flush(len(s))
	return out
}

// fold is a word's NFC, case-folded form; ascii says it is all ASCII.
func fold(w string, ascii bool) string {
	if !ascii {
		return strings.ToLower(strings.ToUpper(norm.NFC.String(w)))
	}
	for i := 0; i < len(w); i++ {
		if 'A' <= w[i] && w[i] <= 'Z' {
			b := []byte(w)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return w
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
	return Prepare(rendered).Find(text)
}

// Prepared is a rendered prompt ready for many Finds: its words, their
// ids and where each word occurs are computed once, when a Find first
// needs them, and shared by every Find after (an outcome's answer is
// looked for whole, then sentence by sentence, in one prompt). Each Find
// answers what Find(rendered, text) does. Not safe for concurrent use.
type Prepared struct {
	rendered string
	split    bool // rw, ids, vocab, first and next are computed
	// rw are the rendered words and ids their ids in vocab: equal ids,
	// equal words.
	rw    []word
	ids   []int32
	vocab map[string]int32
	// first is where each word id first occurs in rw, and next where the
	// word at a place occurs next (-1: nowhere): each word's places in
	// order, the only ones a run of text can start at.
	first, next []int32
}

// Prepare readies rendered for Finds.
func Prepare(rendered string) *Prepared { return &Prepared{rendered: rendered} }

// Find is every place of text in the prepared rendered text: Find(rendered,
// text).
func (p *Prepared) Find(text string) []Match {
	if text == "" {
		return nil
	}
	if ms := exact(p.rendered, text); len(ms) > 0 {
		return ms
	}
	tw := words(text)
	if len(tw) == 0 {
		return nil
	}
	p.splitWords()
	tids := make([]int32, len(tw))
	for i, w := range tw {
		if id, ok := p.vocab[w.w]; ok {
			tids[i] = id
		} else {
			tids[i] = -1 // in no rendered word: equal to none
		}
	}
	if ms := p.inSequence(tids); len(ms) > 0 {
		return ms
	}
	return p.passages(tids)
}

// splitWords computes the rendered words, their ids and places, once.
func (p *Prepared) splitWords() {
	if p.split {
		return
	}
	p.split = true
	p.rw = words(p.rendered)
	p.ids = make([]int32, len(p.rw))
	p.vocab = map[string]int32{}
	for i, w := range p.rw {
		id, ok := p.vocab[w.w]
		if !ok {
			id = int32(len(p.vocab))
			p.vocab[w.w] = id
		}
		p.ids[i] = id
	}
	p.first, p.next = make([]int32, len(p.vocab)), make([]int32, len(p.rw))
	for i := range p.first {
		p.first[i] = -1
	}
	for i := len(p.ids) - 1; i >= 0; i-- {
		p.next[i], p.first[p.ids[i]] = p.first[p.ids[i]], int32(i)
	}
}

// places calls fn with each place of word id in the rendered words, in
// order, until fn returns false.
func (p *Prepared) places(id int32, fn func(r int) bool) {
	if id < 0 {
		return
	}
	for r := p.first[id]; r >= 0 && fn(int(r)); r = p.next[r] {
	}
}

// equal reports whether the rendered word ids from r are tids.
func (p *Prepared) equal(r int, tids []int32) bool {
	if r+len(tids) > len(p.ids) {
		return false
	}
	for j, id := range tids {
		if p.ids[r+j] != id {
			return false
		}
	}
	return true
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

// inSequence is every run of the rendered words equal to the text's words
// (their ids tids), in order: one can start only where the first word is.
func (p *Prepared) inSequence(tids []int32) []Match {
	var out []Match
	p.places(tids[0], func(i int) bool {
		if i+len(tids) > len(p.ids) {
			return false
		}
		if p.equal(i, tids) {
			out = append(out, Match{Start: p.rw[i].start, End: p.rw[i+len(tids)-1].end, Kind: Normalized, Similarity: 1})
		}
		return true
	})
	return out
}

// passages is the maximal runs of at least MinPassage words that the text
// (its word ids tids) and the rendered prompt share, longest first (then by
// place), at most MaxPassages. A run starts at a text word's place in the
// prompt where the MinPassage words from it are the text's and the words
// before them differ, so the cost is the text's words' places plus the
// runs' lengths.
func (p *Prepared) passages(tids []int32) []Match {
	rids := p.ids
	if len(tids) < MinPassage || len(rids) < MinPassage {
		return nil
	}
	type run struct{ r, t, n int }
	var runs []run
	for t := 0; t+MinPassage <= len(tids); t++ {
		p.places(tids[t], func(r int) bool {
			if r+MinPassage > len(rids) {
				return false
			}
			// Only a run's first shingle starts it: the one before must differ.
			if r > 0 && t > 0 && rids[r-1] == tids[t-1] || !p.equal(r, tids[t:t+MinPassage]) {
				return true
			}
			n := MinPassage
			for r+n < len(rids) && t+n < len(tids) && rids[r+n] == tids[t+n] {
				n++
			}
			runs = append(runs, run{r, t, n})
			return true
		})
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
		out = append(out, Match{Start: p.rw[ru.r].start, End: p.rw[ru.r+ru.n-1].end, Kind: Passage,
			Similarity: float64(int(float64(ru.n)/float64(len(tids))*1000+0.5)) / 1000})
	}
	return out
}
