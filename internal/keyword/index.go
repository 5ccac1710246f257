package keyword

import "strings"

// Index answers, for many keywords, which message first contains each, in
// time linear in the messages' words plus, per distinct keyword, the
// occurrences of its first word: the messages are split and indexed once,
// and each keyword is looked up once however many items share it. A
// request with 2,000 messages and 300 keyword items used to re-scan every
// message for every keyword of every candidate. A stem index
// (NewStemIndex) compares the stems of the words instead.
type Index struct {
	msgs  [][]string // the words compared: the stems, in a stem index
	said  [][]string // the words as said
	stem  bool
	at    map[string][]position // compared word → where it occurs, in message order
	first map[string]position   // keyword → its first match, msg -1 for none
}

type position struct{ msg, word int }

// NewIndex indexes the words of each message; a nil entry is a message
// that keywords never match (not a person's).
func NewIndex(messageWords [][]string) *Index {
	return newIndex(messageWords, messageWords, false)
}

// NewStemIndex indexes the stems of the words of each message, for
// keywords matched by stems.
func NewStemIndex(messageWords [][]string) *Index {
	stems := make([][]string, len(messageWords))
	memo := map[string]string{}
	for i, words := range messageWords {
		if words == nil {
			continue
		}
		stems[i] = make([]string, len(words))
		for j, w := range words {
			s, ok := memo[w]
			if !ok {
				s = Stem(w)
				memo[w] = s
			}
			stems[i][j] = s
		}
	}
	return newIndex(stems, messageWords, true)
}

func newIndex(compared, said [][]string, stem bool) *Index {
	ix := &Index{msgs: compared, said: said, stem: stem, at: map[string][]position{}, first: map[string]position{}}
	for i, words := range compared {
		for j, w := range words {
			ix.at[w] = append(ix.at[w], position{i, j})
		}
	}
	return ix
}

// FirstMessage is the index of the first message whose words contain the
// keyword as a phrase (as Contains decides; in a stem index, the stems of
// the keyword's words among the stems of the message's), or -1.
func (ix *Index) FirstMessage(keyword string) int {
	return ix.match(keyword).msg
}

// FirstMatch is FirstMessage and the words of that message that matched,
// as said, separated by spaces ("" when none did).
func (ix *Index) FirstMatch(keyword string) (int, string) {
	p := ix.match(keyword)
	if p.msg < 0 {
		return -1, ""
	}
	return p.msg, strings.Join(ix.said[p.msg][p.word:p.word+ix.length(keyword)], " ")
}

// length is the number of words of a keyword.
func (ix *Index) length(keyword string) int { return len(Words(keyword)) }

func (ix *Index) match(keyword string) position {
	if p, ok := ix.first[keyword]; ok {
		return p
	}
	found := position{-1, 0}
	kw := Words(keyword)
	if ix.stem {
		kw = Stems(kw)
	}
	if len(kw) > 0 {
	scan:
		for _, p := range ix.at[kw[0]] {
			words := ix.msgs[p.msg]
			if p.word+len(kw) > len(words) {
				continue
			}
			for k := 1; k < len(kw); k++ {
				if words[p.word+k] != kw[k] {
					continue scan
				}
			}
			found = p
			break
		}
	}
	ix.first[keyword] = found
	return found
}

// Words is every distinct word of the messages (every distinct stem, in a
// stem index), in no order.
func (ix *Index) Words() []string {
	out := make([]string, 0, len(ix.at))
	for w := range ix.at {
		out = append(out, w)
	}
	return out
}
