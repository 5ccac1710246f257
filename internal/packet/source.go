package packet

import (
	"context"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
)

// dbSource is pipeline 2's Source over one read-only snapshot transaction:
// every read sees the packet's snapshot. It remembers the always-on rows
// it handed out, so that the candidates the budget never tried are counted
// from the layer's counter of open items minus the open rows read, plus
// the restricted rows after the cursor, never by reading them.
type dbSource struct {
	tx    *store.Tx
	texts *textCache
	// open counts, by layer, the open always-on rows handed out, with the
	// position of each, so CountAfter knows how many lie at or before its
	// cursor.
	read  map[string][]readRow
	opens map[string]int
}

type readRow struct {
	pos  ctxtype.RankPos
	open bool
}

func newDBSource(tx *store.Tx, texts *textCache) *dbSource {
	return &dbSource{tx: tx, texts: texts, read: map[string][]readRow{}}
}

// Small implements assemble.Source.
func (s *dbSource) Small(ctx context.Context, q assemble.SmallQuery) ([]*ctxtype.Version, error) {
	return s.tx.BoundedSmall(ctx, q.Layers, q.Pins, q.Words)
}

// Postings implements assemble.Source.
func (s *dbSource) Postings(ctx context.Context, q assemble.RelevanceQuery) ([]assemble.Posting, int, error) {
	lex, err := s.tx.QueryLexemes(ctx, q.Query, assemble.MaxQueryLexemes)
	if err != nil || len(lex) == 0 {
		return nil, 0, err
	}
	rows, err := s.tx.BoundedRelevanceLists(ctx, store.BoundedRelevanceParams{
		Layers: q.Layers, Lexemes: lex, At: q.Now, Role: q.Role, PerLexeme: assemble.PostingsPerLexeme,
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]assemble.Posting, len(rows))
	for i, r := range rows {
		out[i] = assemble.Posting{Layer: r.Layer, Lexeme: r.Lexeme, Key: r.Key, Weight: r.Weight}
	}
	return out, len(lex), nil
}

// Lane implements assemble.Source.
func (s *dbSource) Lane(ctx context.Context, layer string, lane assemble.Lane, after ctxtype.RankPos, n int) ([]*ctxtype.Version, error) {
	vs, err := s.tx.BoundedLane(ctx, layer, lane.Tool, after, n)
	if err != nil || lane.Tool != "" {
		return vs, err
	}
	for _, v := range vs {
		s.read[layer] = append(s.read[layer], readRow{pos: assemble.PosOf(v), open: isOpen(v)})
	}
	return vs, nil
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

// Texts implements assemble.Source: from the process's cache of versions
// (immutable, so valid under any snapshot), the rest in one read.
func (s *dbSource) Texts(ctx context.Context, vs []*ctxtype.Version) error {
	var need []store.VersionRef
	for _, v := range vs {
		ref := store.VersionRef{Project: v.Project, Key: v.Key, Version: v.Version}
		if t, ok := s.texts.get(ref); ok {
			v.Title, v.Content = t.Title, t.Content
			continue
		}
		need = append(need, ref)
	}
	if len(need) == 0 {
		return nil
	}
	got, err := s.tx.BoundedTexts(ctx, need)
	if err != nil {
		return err
	}
	for _, v := range vs {
		ref := store.VersionRef{Project: v.Project, Key: v.Key, Version: v.Version}
		if t, ok := got[ref]; ok {
			v.Title, v.Content = t.Title, t.Content
			s.texts.put(ref, t)
		}
	}
	return nil
}

// CountAfter implements assemble.Source. The always-on items are counted
// without reading them: the open items after the cursor are the layer's counter minus the open
// rows read up to the cursor (the rows are read in order from the start);
// the restricted ones are counted through their own partial index.
//
// A tool's items are counted through the tool's index: they are the tool's
// matches, not the project.
func (s *dbSource) CountAfter(ctx context.Context, layer string, lane assemble.Lane, after ctxtype.RankPos, role string, now time.Time) (int, error) {
	if lane.Tool != "" {
		return s.tx.BoundedCountTool(ctx, layer, lane.Tool, after, role, now)
	}
	if s.opens == nil {
		var err error
		if s.opens, err = s.tx.BoundedOpenCounts(ctx, []string{layer, otherLayer(layer)}); err != nil {
			return 0, err
		}
	}
	open := s.opens[layer]
	for _, r := range s.read[layer] {
		if r.open && r.pos.Compare(after) <= 0 {
			open--
		}
	}
	restricted, err := s.tx.BoundedCountRestricted(ctx, layer, after, role, now)
	if err != nil {
		return 0, err
	}
	return open + restricted, nil
}

func otherLayer(layer string) string {
	if layer == assemble.SharedProject {
		return ""
	}
	return assemble.SharedProject
}

// textCache keeps the title and content of versions read for packets.
// Versions never change, so an entry is valid for every snapshot; the
// cache is bounded by its total text size and forgets at random past it.
type textCache struct {
	mu    sync.Mutex
	max   int
	size  int
	items map[store.VersionRef]store.VersionText
}

func newTextCache(maxBytes int) *textCache {
	return &textCache{max: maxBytes, items: map[store.VersionRef]store.VersionText{}}
}

func (c *textCache) get(ref store.VersionRef) (store.VersionText, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.items[ref]
	return t, ok
}

func (c *textCache) put(ref store.VersionRef, t store.VersionText) {
	n := len(t.Title) + len(t.Content) + len(ref.Project) + len(ref.Key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[ref]; ok || n > c.max {
		return
	}
	for k, old := range c.items {
		if c.size+n <= c.max {
			break
		}
		c.size -= len(old.Title) + len(old.Content) + len(k.Project) + len(k.Key)
		delete(c.items, k)
	}
	c.items[ref] = t
	c.size += n
}
