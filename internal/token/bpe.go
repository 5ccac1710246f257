package token

import (
	_ "embed"
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// The byte-pair ranks, generated from tiktoken-go by internal/vocabgen: for
// each rank from 0, its token's length as a uvarint, then its bytes.
var (
	//go:embed o200k_base.ranks
	o200kRanks string
	//go:embed cl100k_base.ranks
	cl100kRanks string
)

// chunkCacheMaxLen bounds the chunks whose counts are remembered: words
// outside the vocabulary repeat (identifiers, names), and a chunk longer than
// this is rare enough to merge each time.
const chunkCacheMaxLen = 64

// encoding is one tokenizer: its ranks, loaded on first use, and its
// pre-tokenizer.
type encoding struct {
	data  string
	next  func(s string, i int) int
	once  sync.Once
	ranks map[string]uint32 // keys are substrings of data: no copies
	// merged remembers the counts of chunks outside the vocabulary.
	merged countCache
}

var encodings = [2]*encoding{
	{data: o200kRanks, next: nextO200k},
	{data: cl100kRanks, next: nextCl100k},
}

func (e *encoding) load() {
	e.once.Do(func() {
		ranks := make(map[string]uint32, 200_000)
		for p, r := 0, uint32(0); p < len(e.data); r++ {
			l, n := binary.Uvarint([]byte(e.data[p:min(p+binary.MaxVarintLen64, len(e.data))]))
			p += n
			ranks[e.data[p:p+int(l)]] = r
			p += int(l)
		}
		e.ranks = ranks
	})
}

// count returns the number of tokens of s, valid UTF-8: the sum over its
// chunks of the number of parts byte-pair merging leaves.
func (e *encoding) count(s string) int {
	e.load()
	n := 0
	for i := 0; i < len(s); {
		j := e.next(s, i)
		if j <= i { // no chunk starts here: the matcher skips the rune
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			continue
		}
		n += e.countChunk(s[i:j])
		i = j
	}
	return n
}

func (e *encoding) countChunk(c string) int {
	if _, ok := e.ranks[c]; ok {
		return 1
	}
	if len(c) > chunkCacheMaxLen {
		return e.merge(c)
	}
	h := maphash.String(cacheSeed, c)
	if n, ok := e.merged.loadString(h, c); ok {
		return n
	}
	n := e.merge(c)
	e.merged.store(h, c, n, false)
	return n
}

// mergeHeapThreshold is the chunk length from which merge uses a heap, as
// tiktoken-go does; below it a linear scan per merge is faster.
const mergeHeapThreshold = 96

// merge returns the number of parts byte-pair encoding leaves of c: it
// merges, again and again, the adjacent pair whose joined bytes have the
// lowest rank, the leftmost of equals first, until no pair is a token.
// This is tiktoken's algorithm (and tiktoken-go's, which it follows).
func (e *encoding) merge(c string) int {
	if len(c) >= mergeHeapThreshold {
		if n, ok := e.mergeBuckets(c); ok {
			return n
		}
		return e.mergeHeap(c)
	}
	// bounds[k] is the start of part k, then len(c); rank[k] the rank of
	// parts k and k+1 joined.
	var boundsA, rankA [mergeHeapThreshold + 1]int
	bounds, rank := boundsA[:len(c)+1], rankA[:len(c)+1]
	for k := range bounds {
		bounds[k] = k
	}
	pair := func(k int) int { // rank of parts k and k+1 joined
		if k+2 < len(bounds) {
			if r, ok := e.ranks[c[bounds[k]:bounds[k+2]]]; ok {
				return int(r)
			}
		}
		return math.MaxInt
	}
	for k := range rank {
		rank[k] = pair(k)
	}
	for len(bounds) > 2 {
		best, at := math.MaxInt, -1
		for k, r := range rank[:len(bounds)-1] {
			if r < best {
				best, at = r, k
			}
		}
		if at < 0 {
			break
		}
		bounds = append(bounds[:at+1], bounds[at+2:]...)
		rank = append(rank[:at+1], rank[at+2:]...)
		rank[at] = pair(at)
		if at > 0 {
			rank[at-1] = pair(at - 1)
		}
	}
	return len(bounds) - 1
}

// noRank marks a boundary whose part cannot join the next one.
const noRank = math.MaxUint32

// chain is the parts of a long chunk being merged, as a linked list of
// boundaries: part i runs from boundary i to next[i], and rank[i] is the
// rank of part i joined with the part after it (noRank when no token).
// mergeHeap and mergeBuckets differ only in the order they join pairs.
type chain struct {
	e          *encoding
	c          string
	next, prev []int32
	rank       []uint32
	parts      int
}

func (e *encoding) newChain(c string) *chain {
	n := int32(len(c))
	ch := &chain{e: e, c: c, next: make([]int32, n+1), prev: make([]int32, n+1), rank: make([]uint32, n+1), parts: int(n)}
	for i := range ch.next {
		ch.next[i], ch.prev[i], ch.rank[i] = int32(i)+1, int32(i)-1, noRank
	}
	ch.next[n] = -1
	for i := int32(0); i+2 <= n; i++ {
		ch.rank[i] = ch.rankOf(i)
	}
	return ch
}

// rankOf is the rank of part i joined with the next, or noRank.
func (ch *chain) rankOf(i int32) uint32 {
	j := ch.next[i]
	if j < 0 || ch.next[j] < 0 {
		return noRank
	}
	if r, ok := ch.e.ranks[ch.c[i:ch.next[j]]]; ok {
		return r
	}
	return noRank
}

// join merges part i with the next and refreshes the ranks of the two
// pairs that changed, i's and its predecessor's, calling changed for each
// that is now a token.
func (ch *chain) join(i int32, changed func(at int32, r uint32)) {
	j := ch.next[i]
	k := ch.next[j]
	ch.rank[j] = noRank
	ch.next[i] = k
	if k >= 0 {
		ch.prev[k] = i
	}
	ch.parts--
	for _, at := range [2]int32{i, ch.prev[i]} {
		if at < 0 {
			continue
		}
		ch.rank[at] = ch.rankOf(at)
		if ch.rank[at] != noRank {
			changed(at, ch.rank[at])
		}
	}
}

// mergeHeap is merge in O(n log n) for long chunks: the candidate pairs in
// a heap by (rank, offset).
func (e *encoding) mergeHeap(c string) int {
	ch := e.newChain(c)
	h := make(pairHeap, 0, len(c))
	for i, r := range ch.rank {
		if r != noRank {
			h = append(h, pairCand{r, int32(i)})
		}
	}
	h.init()
	for len(h) > 0 {
		top := h.pop()
		if ch.rank[top.at] != top.rank {
			continue // stale: a merge beside it changed this pair
		}
		ch.join(top.at, func(at int32, r uint32) { h.push(pairCand{r, at}) })
	}
	return ch.parts
}

// mergeBuckets is merge for long chunks in near-linear time, when it can
// be: the candidate pairs in one bucket per rank, the buckets taken in rank
// order through a small heap of the ranks present, each bucket's offsets
// sorted. That is the heap's order (rank, then offset) as long as every pair
// a merge creates ranks after the merge's own, as a pair of tokens learned
// from tokens usually does; on the first that does not, it gives up (false)
// and mergeHeap counts the chunk instead. On a long run of one word the heap
// of pairs is most of the time, and this takes the heap out.
func (e *encoding) mergeBuckets(c string) (int, bool) {
	ch := e.newChain(c)
	buckets := map[uint32][]int32{}
	var ranks rankHeap
	add := func(at int32, r uint32) {
		b, ok := buckets[r]
		if !ok {
			ranks.push(r)
		}
		buckets[r] = append(b, at)
	}
	for i, r := range ch.rank {
		if r != noRank {
			add(int32(i), r)
		}
	}
	inOrder := true
	for len(ranks) > 0 && inOrder {
		r := ranks.pop()
		b := buckets[r]
		delete(buckets, r)
		slices.Sort(b)
		for _, i := range b {
			if ch.rank[i] != r {
				continue // stale: a merge beside it changed this pair
			}
			ch.join(i, func(at int32, nr uint32) {
				if nr <= r {
					inOrder = false // out of rank order: the heap must decide
				}
				add(at, nr)
			})
			if !inOrder {
				return 0, false
			}
		}
	}
	return ch.parts, true
}

// rankHeap is a min-heap of ranks.
type rankHeap []uint32

func (h *rankHeap) push(r uint32) {
	*h = append(*h, r)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *rankHeap) pop() uint32 {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	*h = s
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if l+1 < len(s) && s[l+1] < s[l] {
			m = l + 1
		}
		if s[i] <= s[m] {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	return top
}

type pairCand struct {
	rank uint32
	at   int32
}

// pairHeap is a min-heap by rank, then offset, so the leftmost of equal
// ranks merges first.
type pairHeap []pairCand

func (h pairHeap) less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].at < h[b].at
}

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(c pairCand) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *pairHeap) pop() pairCand {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return top
}

func (h pairHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// replaceInvalid replaces every byte that is not part of a valid UTF-8
// sequence by U+FFFD, as converting the text to runes does in tiktoken-go.
func replaceInvalid(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
