package assemble

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/keyword"
)

// Source is where pipeline 2 reads its candidates from, a little at a
// time and in rank order, so that what it reads is bounded by what the
// budget holds and not by what the project holds. Every method returns
// current, live versions, narrow: every field but Title, Summary, Content,
// Metadata and Provenance (Trigger too, except from Always, whose rows are
// all always-on); Texts fills Title and Content in place when the pipeline
// needs them. A source answers as of one snapshot, so the same request
// against the same source gives the same packet. The packet service reads
// the database through one; replay and why read a MemorySource built from
// a stored snapshot.
type Source interface {
	// Small is the pinned items of the given layers (any trigger).
	Small(ctx context.Context, q SmallQuery) ([]*ctxtype.Version, error)
	// Postings is, for each layer and each of the query's lexemes (at most
	// MaxQueryLexemes), the PostingsPerLexeme relevance items of highest
	// weight (then key) that are valid at q.Now and visible to q.Role;
	// and the number of lexemes of the query.
	Postings(ctx context.Context, q RelevanceQuery) ([]Posting, int, error)
	// Lane is the next n of a layer's items of a lane after a position, in
	// rank order (firing and validity are judged by the pipeline).
	Lane(ctx context.Context, q LaneQuery, n int) ([]*ctxtype.Version, error)
	// ByKeys is the live items of a layer with those keys.
	ByKeys(ctx context.Context, layer string, keys []string) ([]*ctxtype.Version, error)
	// StateGroups is every live item of the layers that claims one of the
	// state keys, whatever its trigger.
	StateGroups(ctx context.Context, layers, stateKeys []string) ([]*ctxtype.Version, error)
	// Texts fills Title and Content of the versions.
	Texts(ctx context.Context, vs []*ctxtype.Version) error
	// CountAfter is the number of a layer's items of a lane after a
	// position that are valid at now, visible to role and, for the keyword
	// lane, fire (fires judges a version that carries at least its key,
	// trigger, roles and validity window).
	CountAfter(ctx context.Context, q LaneQuery, role string, now time.Time, fires func(*ctxtype.Version) bool) (int, error)
}

// Batcher is a Source that makes several reads at once (one round trip
// where each would be one). A Source without it is read call by call; the
// packet is the same either way.
type Batcher interface {
	// Prefetch is told the reads pipeline 2 starts with (FirstReads)
	// before it makes any; the Source's methods may then answer them
	// from what it read ahead.
	Prefetch(ctx context.Context, r FirstReads) error
	// Pages' i-th answer is Lane of qs[i] and n.
	Pages(ctx context.Context, qs []LaneQuery, n int) ([][]*ctxtype.Version, error)
	// ByKeysOf's i-th answer is ByKeys of layers[i] and keys[i].
	ByKeysOf(ctx context.Context, layers []string, keys [][]string) ([][]*ctxtype.Version, error)
	// CountsAfter's i-th count is CountAfter of qs[i].
	CountsAfter(ctx context.Context, qs []LaneQuery, role string, now time.Time, fires func(*ctxtype.Version) bool) ([]int, error)
}

// FirstReads are the reads pipeline 2 makes first: the small lanes, the
// relevance lists when there is a query, and the first page (PageSize
// rows from StartPos) of every lane of each layer.
type FirstReads struct {
	Small     SmallQuery
	Relevance *RelevanceQuery
	Lanes     []LaneQuery
	PageSize  int
}

// pages is Batcher.Pages of src, or Lane of each query.
func pages(ctx context.Context, src Source, qs []LaneQuery, n int) ([][]*ctxtype.Version, error) {
	if b, ok := src.(Batcher); ok {
		return b.Pages(ctx, qs, n)
	}
	out := make([][]*ctxtype.Version, len(qs))
	for i, q := range qs {
		vs, err := src.Lane(ctx, q, n)
		if err != nil {
			return nil, err
		}
		out[i] = vs
	}
	return out, nil
}

// byKeysOf is Batcher.ByKeysOf of src, or ByKeys of each layer.
func byKeysOf(ctx context.Context, src Source, layers []string, keys [][]string) ([][]*ctxtype.Version, error) {
	if b, ok := src.(Batcher); ok {
		return b.ByKeysOf(ctx, layers, keys)
	}
	out := make([][]*ctxtype.Version, len(layers))
	for i, layer := range layers {
		vs, err := src.ByKeys(ctx, layer, keys[i])
		if err != nil {
			return nil, err
		}
		out[i] = vs
	}
	return out, nil
}

// countsAfter is Batcher.CountsAfter of src, or CountAfter of each query.
func countsAfter(ctx context.Context, src Source, qs []LaneQuery, role string, now time.Time, fires func(*ctxtype.Version) bool) ([]int, error) {
	if b, ok := src.(Batcher); ok {
		return b.CountsAfter(ctx, qs, role, now, fires)
	}
	out := make([]int, len(qs))
	for i, q := range qs {
		n, err := src.CountAfter(ctx, q, role, now, fires)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// Lane is a trigger whose items can be many, read in rank order a page at
// a time: the always-on items, the items of one tool, or the keyword items
// whose keywords start with a word a person said.
type Lane struct {
	Tool     string
	Keywords bool
}

// LaneQuery names a lane of a layer and a position in it.
type LaneQuery struct {
	Layer string
	Lane  Lane
	After ctxtype.RankPos
	// Words are the words a person said, for the keyword lane, and
	// keyword.StemMark and the stem of each: its items are those with a
	// keyword whose keyword.Term is one of them.
	Words []string
}

// Holds reports whether a version belongs to the lane (for the keyword
// lane, by the terms of its keywords: first words, or marked stems).
func (q LaneQuery) Holds(v *ctxtype.Version) bool {
	t := v.Trigger
	switch {
	case q.Lane.Keywords:
		if t.Kind() != "keywords" {
			return false
		}
		for _, k := range t.Keywords {
			if w := keyword.Term(k, t.Stem()); w != "" && slices.Contains(q.Words, w) {
				return true
			}
		}
		return false
	case q.Lane.Tool != "":
		return t.Kind() == "tool" && *t.Tool == q.Lane.Tool
	}
	return t.Kind() == "always"
}

// SmallQuery asks a Source for the pinned items.
type SmallQuery struct {
	Layers []string
	Pins   []string
}

// RelevanceQuery asks a Source for the postings of a query.
type RelevanceQuery struct {
	Layers []string
	Query  string
	Role   string
	Now    time.Time
}

// Posting is one relevance item in the list of one lexeme of its layer.
type Posting struct {
	Layer, Lexeme, Key string
	Weight             int
}

// The bounds of relevance: a query counts its first MaxQueryLexemes
// lexemes (in byte order), and each lexeme lists its PostingsPerLexeme
// items of highest weight in each layer.
const (
	MaxQueryLexemes   = 32
	PostingsPerLexeme = RelevanceLimit
)

// StartPos is before every item.
var StartPos = ctxtype.RankPos{Authority: math.MinInt16, Priority: math.MinInt64, Confidence: math.MinInt16, Time: math.MinInt64}

// PosOf is the rank position of a version.
func PosOf(v *ctxtype.Version) ctxtype.RankPos {
	return ctxtype.RankPos{
		Authority: int16(-authorityRank[v.Authority]), Priority: -int64(v.Priority),
		Confidence: int16(-confidenceRank[v.Confidence]), Time: -v.CreatedAt.UnixMicro(), Key: v.Key,
	}
}

// Scored is a relevance winner: its layer, key and score.
type Scored struct {
	Layer, Key string
	Score      float64
}

// TopRelevance is the relevance score and its top RelevanceLimit items.
// An item's score is the sum of its weights in the lexeme lists it made,
// over 1000 × the number of query lexemes, so it lies in [0, 1); ties go
// to the key, then to the project layer. It is one function of the
// postings, so any source that lists the same postings ranks the same.
func TopRelevance(postings []Posting, lexemes int) []Scored {
	if lexemes == 0 {
		return nil
	}
	sums := make(map[[2]string]int, len(postings)) // at most one entry a posting: the map never grows
	for _, p := range postings {
		sums[[2]string{p.Layer, p.Key}] += p.Weight
	}
	type entry struct {
		layer, key string
		sum        int
	}
	all := make([]entry, 0, len(sums))
	for k, s := range sums {
		all = append(all, entry{k[0], k[1], s})
	}
	slices.SortFunc(all, func(a, b entry) int {
		return cmp.Or(-cmp.Compare(a.sum, b.sum), cmp.Compare(a.key, b.key), cmp.Compare(layerOrder(a.layer), layerOrder(b.layer)))
	})
	if len(all) > RelevanceLimit {
		all = all[:RelevanceLimit]
	}
	out := make([]Scored, len(all))
	for i, e := range all {
		out[i] = Scored{Layer: e.layer, Key: e.key, Score: float64(e.sum) / float64(1000*lexemes)}
	}
	return out
}

func layerOrder(layer string) int {
	if layer == ctxtype.SharedProject {
		return 1
	}
	return 0
}

// MemorySource is a Source over versions in memory: the current version of
// every item of a snapshot (tombstones included) and the relevance weights
// of its relevance items. Replay and why build one from a stored snapshot;
// tests build worlds with it. With Narrow set it hands out versions
// without their text and fills them only in Texts, as the database does.
type MemorySource struct {
	Versions []*ctxtype.Version
	// Weights are the relevance weights by layer and key, then lexeme.
	Weights map[[2]string]map[string]int
	// Lexemes are the query's lexemes, in byte order.
	Lexemes []string
	Narrow  bool

	// Built on first use, so that why? for an item far past a cutoff costs
	// a sort and a binary search per page, not a scan of the snapshot.
	byLayer map[string][]*ctxtype.Version // live versions of a layer, in rank position order
	byRef   map[[3]string]*ctxtype.Version
}

// index builds the source's lookups once.
func (m *MemorySource) index() {
	if m.byLayer != nil {
		return
	}
	m.byLayer = map[string][]*ctxtype.Version{}
	m.byRef = map[[3]string]*ctxtype.Version{}
	for _, v := range m.Versions {
		m.byRef[[3]string{v.Project, v.Key, strconv.Itoa(v.Version)}] = v
		if !v.Deleted {
			m.byLayer[v.Project] = append(m.byLayer[v.Project], v)
		}
	}
	for _, vs := range m.byLayer {
		slices.SortFunc(vs, func(a, b *ctxtype.Version) int { return PosOf(a).Compare(PosOf(b)) })
	}
}

// after is the live versions of a layer after a rank position, in order.
func (m *MemorySource) after(layer string, pos ctxtype.RankPos) []*ctxtype.Version {
	m.index()
	vs := m.byLayer[layer]
	i, _ := slices.BinarySearchFunc(vs, pos, func(v *ctxtype.Version, p ctxtype.RankPos) int { return PosOf(v).Compare(p) })
	for i < len(vs) && PosOf(vs[i]).Compare(pos) <= 0 {
		i++
	}
	return vs[i:]
}

func (m *MemorySource) out(v *ctxtype.Version) *ctxtype.Version {
	if !m.Narrow {
		return v
	}
	c := *v
	c.Title, c.Content, c.Summary = "", "", ""
	return &c
}

func (m *MemorySource) live(layers []string, keep func(*ctxtype.Version) bool) []*ctxtype.Version {
	var out []*ctxtype.Version
	for _, v := range m.Versions {
		if !v.Deleted && slices.Contains(layers, v.Project) && keep(v) {
			out = append(out, m.out(v))
		}
	}
	return out
}

// Small implements Source.
func (m *MemorySource) Small(_ context.Context, q SmallQuery) ([]*ctxtype.Version, error) {
	return m.live(q.Layers, func(v *ctxtype.Version) bool { return slices.Contains(q.Pins, v.Key) }), nil
}

// Postings implements Source.
func (m *MemorySource) Postings(_ context.Context, q RelevanceQuery) ([]Posting, int, error) {
	lex := m.Lexemes
	if len(lex) > MaxQueryLexemes {
		lex = lex[:MaxQueryLexemes]
	}
	var out []Posting
	for _, layer := range q.Layers {
		for _, l := range lex {
			var list []Posting
			for _, v := range m.Versions {
				if v.Deleted || v.Project != layer || v.Trigger.Kind() != "relevance" || !ValidAt(v, q.Now) || !v.Roles.Visible(q.Role) {
					continue
				}
				if w, ok := m.Weights[[2]string{layer, v.Key}][l]; ok {
					list = append(list, Posting{Layer: layer, Lexeme: l, Key: v.Key, Weight: w})
				}
			}
			slices.SortFunc(list, func(a, b Posting) int { return cmp.Or(-cmp.Compare(a.Weight, b.Weight), cmp.Compare(a.Key, b.Key)) })
			if len(list) > PostingsPerLexeme {
				list = list[:PostingsPerLexeme]
			}
			out = append(out, list...)
		}
	}
	return out, len(lex), nil
}

// Lane implements Source.
func (m *MemorySource) Lane(_ context.Context, q LaneQuery, n int) ([]*ctxtype.Version, error) {
	var out []*ctxtype.Version
	for _, v := range m.after(q.Layer, q.After) {
		if len(out) == n {
			break
		}
		if q.Holds(v) {
			out = append(out, m.out(v))
		}
	}
	return out, nil
}

// ByKeys implements Source.
func (m *MemorySource) ByKeys(_ context.Context, layer string, keys []string) ([]*ctxtype.Version, error) {
	return m.live([]string{layer}, func(v *ctxtype.Version) bool { return slices.Contains(keys, v.Key) }), nil
}

// StateGroups implements Source.
func (m *MemorySource) StateGroups(_ context.Context, layers, stateKeys []string) ([]*ctxtype.Version, error) {
	return m.live(layers, func(v *ctxtype.Version) bool { return v.StateKey != "" && slices.Contains(stateKeys, v.StateKey) }), nil
}

// Texts implements Source.
func (m *MemorySource) Texts(_ context.Context, vs []*ctxtype.Version) error {
	m.index()
	for _, v := range vs {
		if full, ok := m.byRef[[3]string{v.Project, v.Key, strconv.Itoa(v.Version)}]; ok {
			v.Title, v.Content = full.Title, full.Content
		}
	}
	return nil
}

// CountAfter implements Source.
func (m *MemorySource) CountAfter(_ context.Context, q LaneQuery, role string, now time.Time, fires func(*ctxtype.Version) bool) (int, error) {
	n := 0
	for _, v := range m.after(q.Layer, q.After) {
		if q.Holds(v) && ValidAt(v, now) && v.Roles.Visible(role) && (!q.Lane.Keywords || fires(v)) {
			n++
		}
	}
	return n, nil
}
