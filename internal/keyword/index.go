package keyword

// Index answers, for many keywords, which message first contains each, in
// time linear in the messages' words plus, per distinct keyword, the
// occurrences of its first word: the messages are split and indexed once,
// and each keyword is looked up once however many items share it. A
// request with 2,000 messages and 300 keyword items used to re-scan every
// message for every keyword of every candidate.
type Index struct {
	msgs  [][]string
	at    map[string][]position // word → where it occurs, in message order
	first map[string]int        // keyword → first message, or -1
}

type position struct{ msg, word int }

// NewIndex indexes the words of each message; a nil entry is a message
// that keywords never match (not a person's).
func NewIndex(messageWords [][]string) *Index {
	ix := &Index{msgs: messageWords, at: map[string][]position{}, first: map[string]int{}}
	for i, words := range messageWords {
		for j, w := range words {
			ix.at[w] = append(ix.at[w], position{i, j})
		}
	}
	return ix
}

// FirstMessage is the index of the first message whose words contain the
// keyword as a phrase (as Contains decides), or -1.
func (ix *Index) FirstMessage(keyword string) int {
	if n, ok := ix.first[keyword]; ok {
		return n
	}
	n := -1
	kw := Words(keyword)
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
			n = p.msg
			break
		}
	}
	ix.first[keyword] = n
	return n
}

// Words is every distinct word of the messages, in no order.
func (ix *Index) Words() []string {
	out := make([]string, 0, len(ix.at))
	for w := range ix.at {
		out = append(out, w)
	}
	return out
}
