package assemble

import (
	"context"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/ctxtype"
)

// pageSize is how many rows of a lane pipeline 2 reads at a time.
const pageSize = 64

// stream is one lane of one layer in rank order, a page at a time.
type stream struct {
	layer  string
	lane   Lane
	buf    []*cand
	done   bool
	cursor ctxtype.RankPos // the last row taken from buf
	read   ctxtype.RankPos // the last row read from the source
}

// lanes are the streams of a request: the always-on items, the items of
// each tool that returned a result, and the keyword items when a person
// said something.
func lanes(req *ctxtype.Request, words []string) []Lane {
	out := []Lane{{}}
	if len(words) > 0 {
		out = append(out, Lane{Keywords: true})
	}
	for _, tr := range req.ToolResults {
		if l := (Lane{Tool: tr.Tool}); !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// readSmall reads the small lanes and the relevance winners, keeps those
// that fire and are valid, and orders them by rank.
func (b *bounded) readSmall(ctx context.Context) error {
	p, req := b.p, b.p.req
	layers := []string{p.in.Project, ctxtype.SharedProject}
	small := SmallQuery{Layers: layers, Pins: req.Pins}
	var relevance *RelevanceQuery
	if strings.TrimSpace(req.Query) != "" {
		relevance = &RelevanceQuery{Layers: layers, Query: req.Query, Role: req.TargetRole, Now: p.in.Now}
	}
	if pf, ok := b.src.(Batcher); ok {
		first := FirstReads{Small: small, Relevance: relevance, PageSize: pageSize}
		for _, s := range b.streams {
			first.Lanes = append(first.Lanes, b.query(s, StartPos))
		}
		if err := pf.Prefetch(ctx, first); err != nil {
			return err
		}
	}
	rows, err := b.src.Small(ctx, small)
	if err != nil {
		return err
	}
	scores := map[[2]string]float64{}
	if relevance != nil {
		postings, n, err := b.src.Postings(ctx, *relevance)
		if err != nil {
			return err
		}
		byLayer := map[string][]string{}
		for _, s := range TopRelevance(postings, n) {
			scores[[2]string{s.Layer, s.Key}] = s.Score
			byLayer[s.Layer] = append(byLayer[s.Layer], s.Key)
		}
		var winners []string
		var keys [][]string
		for _, layer := range layers {
			if len(byLayer[layer]) > 0 {
				winners, keys = append(winners, layer), append(keys, byLayer[layer])
			}
		}
		vss, err := byKeysOf(ctx, b.src, winners, keys)
		if err != nil {
			return err
		}
		for _, vs := range vss {
			rows = append(rows, vs...)
		}
	}
	rows = append(rows, p.contextPackets()...)
	for _, v := range rows {
		if _, seen := b.reg[b.key(v)]; seen || !ValidAt(v, p.in.Now) {
			continue
		}
		c := b.cand(v)
		if IsContextPacket(v.Key) {
			c.hasText, c.title, c.content = true, v.Title, v.Content // the request's text, not the database's
		}
		if s, ok := scores[b.key(v)]; ok {
			c.relevance = &s
		}
		rule, fires := p.fire(v, c.relevance, c.pinned)
		if !fires {
			continue
		}
		c.rule, c.small = rule, true
		b.small = append(b.small, c)
	}
	slices.SortFunc(b.small, byRank)
	// Every stream's first page is read by the first candidate asked
	// for: read them now, so that what the pages and the small lanes need
	// (state groups, texts, shadows) is one trip each.
	return b.readPages(ctx, b.streams, b.small)
}

// readShadows learns, for _shared keys not seen yet, whether the project
// holds a live item of the key that is valid now and visible to the role.
func (b *bounded) readShadows(ctx context.Context, keys []string) error {
	var need []string
	for _, k := range keys {
		if _, ok := b.shadows[k]; !ok && !slices.Contains(need, k) {
			need = append(need, k)
		}
	}
	if len(need) == 0 {
		return nil
	}
	vs, err := b.src.ByKeys(ctx, b.p.in.Project, need)
	if err != nil {
		return err
	}
	for _, k := range need {
		b.shadows[k] = nil
	}
	for _, v := range vs {
		if ValidAt(v, b.p.in.Now) && v.Roles.Visible(b.p.req.TargetRole) {
			b.shadows[v.Key] = v
		}
	}
	return nil
}

// next is the next candidate in rank order that fires and has not been
// met, or nil when there is none.
func (b *bounded) next(ctx context.Context) (*cand, error) {
	for {
		var best *cand
		var from *stream
		for _, s := range b.streams {
			c, err := b.head(ctx, s)
			if err != nil {
				return nil, err
			}
			if c != nil && (best == nil || byRank(c, best) < 0) {
				best, from = c, s
			}
		}
		if b.smallNext < len(b.small) {
			if c := b.small[b.smallNext]; best == nil || byRank(c, best) < 0 {
				best, from = c, nil
			}
		}
		if best == nil {
			return nil, nil
		}
		if from == nil {
			b.smallNext++
		} else {
			from.buf = from.buf[1:]
			from.cursor = PosOf(best.v)
		}
		if best.met {
			continue
		}
		best.met = true
		return best, nil
	}
}

// head is the first candidate of a stream not yet passed over, reading a
// page when the buffer is empty. Rows that are not valid now are passed
// over (for the packet they do not exist), and so are items a small lane
// already holds.
func (b *bounded) head(ctx context.Context, s *stream) (*cand, error) {
	for {
		if len(s.buf) == 0 {
			if s.done {
				return nil, nil
			}
			if err := b.readPage(ctx, s); err != nil {
				return nil, err
			}
			continue
		}
		c := s.buf[0]
		if c.small || c.rule == "" || !ValidAt(c.v, b.p.in.Now) {
			s.buf = s.buf[1:]
			s.cursor = PosOf(c.v)
			continue
		}
		return c, nil
	}
}

func (b *bounded) readPage(ctx context.Context, s *stream) error {
	return b.readPages(ctx, []*stream{s}, nil)
}

// readPages reads the next page of each stream, then what the pages and
// the candidates with them need, one trip each: the state groups of their
// state keys, the texts of the rows priced or filled from their text, and
// the shadows of their _shared rows.
func (b *bounded) readPages(ctx context.Context, ss []*stream, with []*cand) error {
	page := slices.Clone(with)
	var shared []string
	for _, c := range with {
		if c.v.Project == ctxtype.SharedProject {
			shared = append(shared, c.v.Key)
		}
	}
	var reading []*stream
	var qs []LaneQuery
	for _, s := range ss {
		if !s.done {
			reading, qs = append(reading, s), append(qs, b.query(s, s.read))
		}
	}
	read, err := pages(ctx, b.src, qs, pageSize)
	if err != nil {
		return err
	}
	var needText []*ctxtype.Version
	for i, s := range reading {
		vs := read[i]
		if len(vs) < pageSize {
			s.done = true
		}
		for _, v := range vs {
			c := b.cand(v)
			if !c.small {
				c.rule, _ = b.p.fire(c.v, nil, false)
			}
			s.buf = append(s.buf, c)
			page = append(page, c)
			s.read = PosOf(v)
			if v.Project == ctxtype.SharedProject {
				shared = append(shared, v.Key)
			}
			// Templates are filled when met, and outside markdown every
			// entry's cost is counted from its text: read the page's at once.
			if v.Template || b.p.req.Format != ctxtype.Markdown {
				needText = append(needText, c.v)
			}
		}
	}
	groupShared, err := b.readGroups(ctx, page)
	if err != nil {
		return err
	}
	if err := b.src.Texts(ctx, needText); err != nil {
		return err
	}
	return b.readShadows(ctx, append(shared, groupShared...))
}

// readGroups reads, in one trip, the contenders of the state keys of
// candidates that are not read yet, and returns the keys of the _shared
// contenders, whose shadows the caller reads.
func (b *bounded) readGroups(ctx context.Context, cs []*cand) ([]string, error) {
	var keys []string
	for _, c := range cs {
		if sk := c.v.StateKey; sk != "" {
			if _, read := b.groups[sk]; !read && !slices.Contains(keys, sk) {
				keys = append(keys, sk)
			}
		}
	}
	return b.readGroupRows(ctx, keys)
}

func (b *bounded) readGroupRows(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	vs, err := b.src.StateGroups(ctx, []string{b.p.in.Project, ctxtype.SharedProject}, keys)
	if err != nil {
		return nil, err
	}
	var shared []string
	for _, v := range vs {
		b.cand(v)
		if v.Project == ctxtype.SharedProject {
			shared = append(shared, v.Key)
		}
	}
	for _, k := range keys {
		b.groups[k] = false // read, not resolved
	}
	return shared, nil
}

// query is a stream's lane after a position.
func (b *bounded) query(s *stream, after ctxtype.RankPos) LaneQuery {
	return LaneQuery{Layer: s.layer, Lane: s.lane, After: after, Words: b.words}
}

// inLane reports whether v is one of the stream's candidates: of its lane,
// and for the keyword lane, firing.
func (b *bounded) inLane(s *stream, v *ctxtype.Version) bool {
	if !b.query(s, StartPos).Holds(v) {
		return false
	}
	return !s.lane.Keywords || b.firesAlone(v)
}

// costable makes sure a ranked candidate can be priced: its text is read
// when its block count was not stored.
func (b *bounded) costable(ctx context.Context, c *cand) error {
	if storedCount(b.p.req, c) {
		return nil
	}
	return b.texts(ctx, []*cand{c})
}

// texts reads the text of the candidates that lack it, in one trip, and
// gives each the title and content it shows (templates filled).
func (b *bounded) texts(ctx context.Context, cs []*cand) error {
	var need []*ctxtype.Version
	for _, c := range cs {
		if !c.hasText {
			need = append(need, c.v)
		}
	}
	if len(need) > 0 {
		if err := b.src.Texts(ctx, need); err != nil {
			return err
		}
	}
	for _, c := range cs {
		if !c.hasText {
			c.hasText = true
			c.title, c.content = c.v.Title, c.v.Content
		}
	}
	return nil
}
