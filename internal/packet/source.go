package packet

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
)

// dbSource is pipeline 2's Source over one read-only snapshot transaction:
// every read sees the packet's snapshot. It remembers the lane rows it
// handed out, so that the candidates the budget never tried are counted
// from the lane's counter of open items minus the open rows read, plus
// the restricted rows after the cursor, never by reading them.
type dbSource struct {
	tx    *store.Tx
	texts *textCache
	// read is, by layer and lane, the rows handed out with the position of
	// each and whether it is open, so CountAfter knows how many open ones
	// lie at or before its cursor.
	read map[laneKey][]readRow
	// opens and toolOpens are the counters of open items, read once.
	opens     map[string]int
	toolOpens map[laneKey]int
	// keywords is, by layer, the keyword lane's items in rank order.
	keywords map[string][]store.KeywordRef
	// ahead is what Prefetch read for the calls that follow it.
	ahead prefetched
}

// prefetched is what dbSource.Prefetch read, until the call it was read
// for takes it.
type prefetched struct {
	small    []*ctxtype.Version
	hasSmall bool
	postings []assemble.Posting
	lexemes  int
	hasPost  bool
	// pages are the lanes' first pages (of pageSize rows).
	pages    map[laneKey][]*ctxtype.Version
	pageSize int
}

type laneKey struct {
	layer string
	lane  assemble.Lane
}

type readRow struct {
	pos  ctxtype.RankPos
	open bool
}

func newDBSource(tx *store.Tx, texts *textCache) *dbSource {
	return &dbSource{tx: tx, texts: texts, read: map[laneKey][]readRow{}, toolOpens: map[laneKey]int{},
		keywords: map[string][]store.KeywordRef{}}
}

// Small implements assemble.Source.
func (s *dbSource) Small(ctx context.Context, q assemble.SmallQuery) ([]*ctxtype.Version, error) {
	if s.ahead.hasSmall {
		s.ahead.hasSmall = false
		return s.ahead.small, nil
	}
	return s.tx.BoundedSmall(ctx, q.Layers, q.Pins)
}

// Postings implements assemble.Source, in one trip.
func (s *dbSource) Postings(ctx context.Context, q assemble.RelevanceQuery) ([]assemble.Posting, int, error) {
	if s.ahead.hasPost {
		s.ahead.hasPost = false
		return s.ahead.postings, s.ahead.lexemes, nil
	}
	return postings(ctx, s.tx.DB, q)
}

func postings(ctx context.Context, db store.DB, q assemble.RelevanceQuery) ([]assemble.Posting, int, error) {
	rows, n, err := db.BoundedRelevanceLists(ctx, store.BoundedRelevanceParams{
		Layers: q.Layers, Query: q.Query, MaxLexemes: assemble.MaxQueryLexemes, At: q.Now, Role: q.Role, PerLexeme: assemble.PostingsPerLexeme,
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]assemble.Posting, len(rows))
	for i, r := range rows {
		out[i] = assemble.Posting{Layer: r.Layer, Lexeme: r.Lexeme, Key: r.Key, Weight: r.Weight}
	}
	return out, n, nil
}

// Lane implements assemble.Source: Pages of one query.
func (s *dbSource) Lane(ctx context.Context, q assemble.LaneQuery, n int) ([]*ctxtype.Version, error) {
	vs, err := s.Pages(ctx, []assemble.LaneQuery{q}, n)
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// isOpen is the items.open column of migration 00005: no roles, no
// validity window.
func isOpen(v *ctxtype.Version) bool {
	return len(v.Roles.VisibleTo) == 0 && len(v.Roles.HiddenFrom) == 0 && v.ValidFrom == nil && v.ValidUntil == nil
}

// ByKeys implements assemble.Source.
func (s *dbSource) ByKeys(ctx context.Context, layer string, keys []string) ([]*ctxtype.Version, error) {
	return s.tx.BoundedByKeys(ctx, layer, keys)
}

// StateGroups implements assemble.Source.
func (s *dbSource) StateGroups(ctx context.Context, layers, stateKeys []string) ([]*ctxtype.Version, error) {
	return s.tx.BoundedStateGroups(ctx, layers, stateKeys)
}

// Texts implements assemble.Source: from the process's cache of versions,
// the rest in one read. A version is immutable but for a redaction, which
// replaces its content and its content hash; the cache is keyed by the
// hash the candidate row was just read with, so a redacted version (in
// this process or any other) is never answered from its text before.
func (s *dbSource) Texts(ctx context.Context, vs []*ctxtype.Version) error {
	var need []store.VersionRef
	for _, v := range vs {
		if t, ok := s.texts.get(textKeyOf(v)); ok {
			setText(v, t)
			continue
		}
		need = append(need, store.VersionRef{Project: v.Project, Key: v.Key, Version: v.Version})
	}
	if len(need) == 0 {
		return nil
	}
	got, err := s.tx.BoundedTexts(ctx, need)
	if err != nil {
		return err
	}
	for _, v := range vs {
		k := textKeyOf(v)
		if t, ok := got[k.ref]; ok {
			setText(v, t)
			s.texts.put(k, t)
		}
	}
	return nil
}

// textKey is a cached text's version and the content hash it was read with.
type textKey struct {
	ref    store.VersionRef
	sha256 string
}

func textKeyOf(v *ctxtype.Version) textKey {
	return textKey{ref: store.VersionRef{Project: v.Project, Key: v.Key, Version: v.Version}, sha256: v.ContentSHA256}
}

// setText gives v what Texts reads: its text, metadata and provenance.
func setText(v *ctxtype.Version, t store.VersionText) {
	v.Title, v.Content, v.Metadata, v.Provenance = t.Title, t.Content, t.Metadata, t.Provenance
	if v.Provenance.DerivedFrom == nil {
		v.Provenance.DerivedFrom = []string{}
	}
}

// CountAfter implements assemble.Source without reading what it counts:
// the open items of the lane after the cursor are the lane's counter minus
// the open rows read up to the cursor (a lane is read in order from its
// start); the restricted ones are counted from item_restricted (00039),
// whose index entries carry their window and, up to a bound, their roles
// (00041).
func (s *dbSource) CountAfter(ctx context.Context, q assemble.LaneQuery, role string, now time.Time, fires func(*ctxtype.Version) bool) (int, error) {
	n, err := s.countRead(ctx, q, now, role, fires)
	if err != nil || q.Lane.Keywords {
		return n, err
	}
	restricted, err := countRestricted(ctx, s.tx.DB, q, role, now)
	return n + restricted, err
}

// countRead is what CountAfter counts from what it has read: the keyword
// lane whole, and the open items of another lane (its counter less the
// open rows read up to the cursor).
func (s *dbSource) countRead(ctx context.Context, q assemble.LaneQuery, now time.Time, role string, fires func(*ctxtype.Version) bool) (int, error) {
	layer, lane, after := q.Layer, q.Lane, q.After
	if lane.Keywords {
		refs, err := s.keywordRefs(ctx, layer, q.Words)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, r := range refs {
			// A plain item fires on the word it was found by, for every
			// role at every time: it is counted without judging it.
			if r.Pos.Compare(after) > 0 && (r.Plain || assemble.ValidAt(r.Version, now) && r.Version.Roles.Visible(role) && fires(r.Version)) {
				n++
			}
		}
		return n, nil
	}
	open, err := s.openCount(ctx, layer, lane)
	if err != nil {
		return 0, err
	}
	for _, r := range s.read[laneKey{layer, lane}] {
		if r.open && r.pos.Compare(after) <= 0 {
			open--
		}
	}
	return open, nil
}

// countRestricted counts the restricted items (with roles or a validity
// window) of a lane after its cursor that the role sees at now, from
// their own table (item_restricted).
func countRestricted(ctx context.Context, db store.DB, q assemble.LaneQuery, role string, now time.Time) (int, error) {
	return db.BoundedCountRestricted(ctx, q.Layer, q.Lane.Tool, q.After, role, now)
}

// keywordRefs is the keyword lane of a layer, in rank order, read once.
func (s *dbSource) keywordRefs(ctx context.Context, layer string, words []string) ([]store.KeywordRef, error) {
	if refs, ok := s.keywords[layer]; ok {
		return refs, nil
	}
	refs, err := keywordRefs(ctx, s.tx.DB, layer, words)
	if err != nil {
		return nil, err
	}
	s.keywords[layer] = refs
	return refs, nil
}

// keywordRefs is the keyword lane of a layer, in rank order.
func keywordRefs(ctx context.Context, db store.DB, layer string, words []string) ([]store.KeywordRef, error) {
	refs, err := db.BoundedKeywordRefs(ctx, layer, words)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(refs, func(a, b store.KeywordRef) int { return a.Pos.Compare(b.Pos) })
	return refs, nil
}

// openCount is the counter of a lane's open items.
func (s *dbSource) openCount(ctx context.Context, layer string, lane assemble.Lane) (int, error) {
	if lane.Tool != "" {
		k := laneKey{layer, lane}
		if n, ok := s.toolOpens[k]; ok {
			return n, nil
		}
		got, err := s.tx.BoundedToolOpenCounts(ctx, layer, []string{lane.Tool})
		if err != nil {
			return 0, err
		}
		s.toolOpens[k] = got[lane.Tool]
		return got[lane.Tool], nil
	}
	if n, ok := s.opens[layer]; ok {
		return n, nil
	}
	got, err := s.tx.BoundedOpenCounts(ctx, []string{layer})
	if err != nil {
		return 0, err
	}
	if s.opens == nil {
		s.opens = map[string]int{}
	}
	s.opens[layer] = got[layer]
	return got[layer], nil
}

// textCache keeps the title and content of versions read for packets,
// by version and content hash (textKey): a version changes only when a
// redaction replaces its content, and its hash with it, so an entry is
// valid for every snapshot that reads that hash. The cache is bounded by
// its total text size and forgets at random past it.
type textCache struct {
	mu    sync.Mutex
	max   int
	size  int
	items map[textKey]store.VersionText
}

func newTextCache(maxBytes int) *textCache {
	return &textCache{max: maxBytes, items: map[textKey]store.VersionText{}}
}

func (c *textCache) get(k textKey) (store.VersionText, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.items[k]
	return t, ok
}

// textSize is what an entry counts against the cache's bound.
func textSize(k textKey, t store.VersionText) int {
	return len(t.Title) + len(t.Content) + len(t.Metadata) + len(t.Provenance.SourceRef) + len(k.ref.Project) + len(k.ref.Key) + len(k.sha256)
}

func (c *textCache) put(k textKey, t store.VersionText) {
	n := textSize(k, t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok || n > c.max {
		return
	}
	for old, ot := range c.items {
		if c.size+n <= c.max {
			break
		}
		c.size -= textSize(old, ot) // what put counted, so the bound holds
		delete(c.items, old)
	}
	c.items[k] = t
	c.size += n
}

// snapshotSource is pipeline 2's source as of a packet's snapshot: every
// current version it saw, and the relevance weights of its relevance
// items, computed as the write path computes them. It reads through db:
// a replay reads the packet's history where it read the packet.
func (s *Service) snapshotSource(ctx context.Context, db store.DB, proj string, p *Packet) (*assemble.MemorySource, error) {
	layers := []string{proj, ctxtype.SharedProject}
	vs, err := db.SnapshotVersions(ctx, layers, "", p.Snapshot)
	if err != nil {
		return nil, err
	}
	src := &assemble.MemorySource{Versions: vs}
	if strings.TrimSpace(p.Request.Query) != "" {
		if src.Lexemes, err = db.QueryLexemes(ctx, p.Request.Query, assemble.MaxQueryLexemes); err != nil {
			return nil, err
		}
		if src.Weights, err = db.SnapshotTerms(ctx, layers, p.Snapshot, src.Lexemes); err != nil {
			return nil, err
		}
	}
	return src, nil
}
