package keyword

import "unicode/utf8"

// This file is the Snowball English stemmer (Porter2), the algorithm of
// PostgreSQL's english_stem dictionary, written after its definition in
// the Snowball language (english.sbl): keyword triggers that opt into
// stemming compare stems, and TestStemMatchesPostgres holds it to what the
// database answers for thousands of words. Stop words are not this
// algorithm's business (english_stem drops them; keyword matching keeps
// every word). The word is a run of runes; the vowels are a, e, i, o, u
// and y, and every other rune (any non-ASCII letter too) is a consonant.

// maxStemBytes is the longest word stemmed: PostgreSQL hands longer ones
// back as they are ("surely not words in any human language"), and so
// does Stem.
const maxStemBytes = 1000

// exception1 are the words with a stem of their own (or none), looked up
// before anything else.
var exception1 = map[string]string{
	"skis": "ski", "skies": "sky", "dying": "die", "lying": "lie", "tying": "tie",
	"idly": "idl", "gently": "gentl", "ugly": "ugli", "early": "earli", "only": "onli", "singly": "singl",
	"sky": "sky", "news": "news", "howe": "howe", "atlas": "atlas", "cosmos": "cosmos", "bias": "bias", "andes": "andes",
}

// exception2 are the words that step 1a leaves alone after it ran.
var exception2 = map[string]bool{
	"inning": true, "outing": true, "canning": true, "herring": true, "earring": true,
	"proceed": true, "exceed": true, "succeed": true,
}

// Stem is the Porter2 stem of a folded word (as Words gives them):
// "chargebacks" and "chargeback" both stem to "chargeback", "generously"
// to "generous", "skies" to "sky". A word shorter than three runes is its
// own stem.
func Stem(word string) string {
	if len(word) > maxStemBytes {
		return word
	}
	if s, ok := exception1[word]; ok {
		return s
	}
	if utf8.RuneCountInString(word) < 3 {
		return word
	}
	s := &stemmer{w: []rune(word)}
	s.prelude()
	s.markRegions()
	s.step1a()
	if !exception2[string(s.w)] {
		s.step1b()
		s.step1c()
		s.step2()
		s.step3()
		s.step4()
		s.step5()
	}
	if s.yFound {
		for i, r := range s.w {
			if r == 'Y' {
				s.w[i] = 'y'
			}
		}
	}
	if len(s.w) == 0 {
		return word // PostgreSQL keeps a word whose stem would be empty
	}
	return string(s.w)
}

// Stems is the stem of each word.
func Stems(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = Stem(w)
	}
	return out
}

// stemmer is one word being stemmed, with its regions R1 and R2 (the
// runes from p1 and from p2 on) and whether a y was marked a consonant.
type stemmer struct {
	w      []rune
	p1, p2 int
	yFound bool
}

func isVowel(r rune) bool {
	switch r {
	case 'a', 'e', 'i', 'o', 'u', 'y':
		return true
	}
	return false
}

func hasVowel(rs []rune) bool {
	for _, r := range rs {
		if isVowel(r) {
			return true
		}
	}
	return false
}

// prelude drops a leading apostrophe and writes Y for a y that is a
// consonant: at the start of the word, or after a vowel.
func (s *stemmer) prelude() {
	if s.w[0] == '\'' {
		s.w = s.w[1:]
	}
	for i, r := range s.w {
		if r == 'y' && (i == 0 || isVowel(s.w[i-1])) {
			s.w[i] = 'Y'
			s.yFound = true
		}
	}
}

// markRegions sets p1 after the first consonant that follows a vowel (or
// after one of the prefixes gener, commun and arsen), and p2 likewise
// after p1.
func (s *stemmer) markRegions() {
	n := len(s.w)
	s.p1, s.p2 = n, n
	i, ok := -1, false
	for _, pre := range []string{"gener", "commun", "arsen"} {
		if s.hasPrefix(pre) {
			i, ok = len(pre), true
			break
		}
	}
	if !ok {
		if i, ok = s.pastVowelConsonant(0); !ok {
			return
		}
	}
	s.p1 = i
	if i, ok = s.pastVowelConsonant(i); ok {
		s.p2 = i
	}
}

// pastVowelConsonant is the position after the first consonant that
// follows a vowel at or after from.
func (s *stemmer) pastVowelConsonant(from int) (int, bool) {
	i := from
	for i < len(s.w) && !isVowel(s.w[i]) {
		i++
	}
	for i++; i < len(s.w) && isVowel(s.w[i]); i++ {
	}
	if i >= len(s.w) {
		return 0, false
	}
	return i + 1, true
}

func (s *stemmer) hasPrefix(p string) bool {
	if len(p) > len(s.w) {
		return false
	}
	for i := range len(p) {
		if s.w[i] != rune(p[i]) {
			return false
		}
	}
	return true
}

func (s *stemmer) hasSuffix(suf string) bool {
	n := len(s.w) - len(suf)
	if n < 0 {
		return false
	}
	for i := range len(suf) {
		if s.w[n+i] != rune(suf[i]) {
			return false
		}
	}
	return true
}

// longest is the longest of the suffixes that the word ends with, or ""
// (Snowball's among: the longest decides, whatever its condition then
// says).
func (s *stemmer) longest(suffixes ...string) string {
	best := ""
	for _, suf := range suffixes {
		if len(suf) > len(best) && s.hasSuffix(suf) {
			best = suf
		}
	}
	return best
}

// replace writes with in place of the word's last n runes.
func (s *stemmer) replace(n int, with string) {
	s.w = append(s.w[:len(s.w)-n], []rune(with)...)
}

// start is where a suffix of the word begins.
func (s *stemmer) start(suf string) int { return len(s.w) - len(suf) }

// shortV reports whether the runes before end end in a short syllable: a
// consonant, a vowel and a consonant other than w, x and Y; or a vowel
// and a consonant that are all there is.
func (s *stemmer) shortV(end int) bool {
	w := s.w
	if end >= 3 {
		last := w[end-1]
		if !isVowel(last) && last != 'w' && last != 'x' && last != 'Y' && isVowel(w[end-2]) && !isVowel(w[end-3]) {
			return true
		}
	}
	return end == 2 && isVowel(w[0]) && !isVowel(w[1])
}

// step1a takes off apostrophe endings and plural s.
func (s *stemmer) step1a() {
	if suf := s.longest("'", "'s'", "'s"); suf != "" {
		s.replace(len(suf), "")
	}
	switch suf := s.longest("sses", "ied", "ies", "s", "us", "ss"); suf {
	case "sses":
		s.replace(4, "ss")
	case "ied", "ies":
		if s.start(suf) >= 2 {
			s.replace(3, "i")
		} else {
			s.replace(3, "ie")
		}
	case "s":
		// A vowel before the rune that precedes the s.
		if n := len(s.w); n >= 2 && hasVowel(s.w[:n-2]) {
			s.replace(1, "")
		}
	}
}

// step1b takes off -eed, -ed and -ing (and their -ly forms).
func (s *stemmer) step1b() {
	switch suf := s.longest("eed", "eedly", "ed", "edly", "ing", "ingly"); suf {
	case "":
	case "eed", "eedly":
		if s.start(suf) >= s.p1 {
			s.replace(len(suf), "ee")
		}
	default:
		if !hasVowel(s.w[:s.start(suf)]) {
			return
		}
		s.replace(len(suf), "")
		switch s.longest("at", "bl", "iz", "bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt") {
		case "at", "bl", "iz":
			s.replace(0, "e")
		case "":
			if len(s.w) == s.p1 && s.shortV(len(s.w)) {
				s.replace(0, "e")
			}
		default:
			s.replace(1, "")
		}
	}
}

// step1c writes i for a final y after a consonant that is not the first
// rune.
func (s *stemmer) step1c() {
	n := len(s.w)
	if n >= 3 && (s.w[n-1] == 'y' || s.w[n-1] == 'Y') && !isVowel(s.w[n-2]) {
		s.w[n-1] = 'i'
	}
}

// step2Endings are step 2's suffixes and what replaces them in R1.
var step2Endings = map[string]string{
	"tional": "tion", "enci": "ence", "anci": "ance", "abli": "able", "entli": "ent",
	"izer": "ize", "ization": "ize", "ational": "ate", "ation": "ate", "ator": "ate",
	"alism": "al", "aliti": "al", "alli": "al", "fulness": "ful", "ousli": "ous", "ousness": "ous",
	"iveness": "ive", "iviti": "ive", "biliti": "ble", "bli": "ble", "ogi": "og", "fulli": "ful",
	"lessli": "less", "li": "",
}

// step3Endings are step 3's, ative aside.
var step3Endings = map[string]string{
	"tional": "tion", "ational": "ate", "alize": "al", "icate": "ic", "iciti": "ic", "ical": "ic",
	"ful": "", "ness": "",
}

// step4Endings are the suffixes step 4 deletes in R2, ion aside.
var step4Endings = []string{"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
	"ism", "ate", "iti", "ous", "ive", "ize", "ion"}

// longestOf is longest over a map's keys.
func (s *stemmer) longestOf(m map[string]string) string {
	best := ""
	for suf := range m {
		if len(suf) > len(best) && s.hasSuffix(suf) {
			best = suf
		}
	}
	return best
}

func (s *stemmer) step2() {
	suf := s.longestOf(step2Endings)
	if suf == "" || s.start(suf) < s.p1 {
		return
	}
	before := rune(0)
	if i := s.start(suf); i > 0 {
		before = s.w[i-1]
	}
	switch suf {
	case "ogi":
		if before != 'l' {
			return
		}
	case "li":
		switch before {
		case 'c', 'd', 'e', 'g', 'h', 'k', 'm', 'n', 'r', 't':
		default:
			return
		}
	}
	s.replace(len(suf), step2Endings[suf])
}

func (s *stemmer) step3() {
	suf := s.longestOf(step3Endings)
	if s.hasSuffix("ative") && len("ative") > len(suf) {
		if s.start("ative") >= s.p1 && s.start("ative") >= s.p2 {
			s.replace(5, "")
		}
		return
	}
	if suf != "" && s.start(suf) >= s.p1 {
		s.replace(len(suf), step3Endings[suf])
	}
}

func (s *stemmer) step4() {
	suf := s.longest(step4Endings...)
	if suf == "" || s.start(suf) < s.p2 {
		return
	}
	if suf == "ion" {
		if i := s.start(suf); i == 0 || (s.w[i-1] != 's' && s.w[i-1] != 't') {
			return
		}
	}
	s.replace(len(suf), "")
}

func (s *stemmer) step5() {
	n := len(s.w)
	if n == 0 {
		return
	}
	switch s.w[n-1] {
	case 'e':
		if n-1 >= s.p2 || (n-1 >= s.p1 && !s.shortV(n-1)) {
			s.replace(1, "")
		}
	case 'l':
		if n-1 >= s.p2 && n >= 2 && s.w[n-2] == 'l' {
			s.replace(1, "")
		}
	}
}
