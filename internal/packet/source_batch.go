package packet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
)

// dbSource is an assemble.Batcher: the reads the pipeline can make at
// once go in one round trip (store.Tx.Reads), each through the same store
// method it uses alone.

// Prefetch implements assemble.Batcher: the small lanes, the relevance
// lists, every lane's first page (the keyword lane's items in rank order)
// and the counters of open items, in one round trip (store.Tx.Reads).
func (s *dbSource) Prefetch(ctx context.Context, r assemble.FirstReads) error {
	var reads []func(store.DB) error
	a := prefetched{pages: map[laneKey][]*ctxtype.Version{}, pageSize: r.PageSize}
	if len(r.Small.Pins) > 0 {
		a.hasSmall = true
		reads = append(reads, func(db store.DB) (err error) {
			a.small, err = db.BoundedSmall(ctx, r.Small.Layers, r.Small.Pins)
			return err
		})
	}
	if r.Relevance != nil {
		a.hasPost = true
		reads = append(reads, func(db store.DB) (err error) {
			a.postings, a.lexemes, err = postings(ctx, db, *r.Relevance)
			return err
		})
	}
	var layers []string
	tools := map[string][]string{}
	// Each read writes its own element: they run at once.
	refs := make([][]store.KeywordRef, len(r.Lanes))
	pages := make([][]*ctxtype.Version, len(r.Lanes))
	var refLanes []int
	for i, q := range r.Lanes {
		if !slices.Contains(layers, q.Layer) {
			layers = append(layers, q.Layer)
		}
		switch {
		case q.Lane.Keywords:
			if _, ok := s.keywords[q.Layer]; ok || slices.ContainsFunc(refLanes, func(j int) bool { return r.Lanes[j].Layer == q.Layer }) {
				continue
			}
			refLanes = append(refLanes, i)
			reads = append(reads, func(db store.DB) (err error) {
				refs[i], err = keywordRefs(ctx, db, q.Layer, q.Words)
				return err
			})
		default:
			if q.Lane.Tool != "" {
				tools[q.Layer] = append(tools[q.Layer], q.Lane.Tool)
			}
			reads = append(reads, func(db store.DB) (err error) {
				pages[i], err = db.BoundedLane(ctx, q.Layer, q.Lane.Tool, q.After, r.PageSize)
				return err
			})
		}
	}
	var opens map[string]int
	if s.opens == nil && len(layers) > 0 {
		reads = append(reads, func(db store.DB) (err error) {
			opens, err = db.BoundedOpenCounts(ctx, layers)
			return err
		})
	}
	toolOpens := make([]map[string]int, len(layers))
	for i, layer := range layers {
		if len(tools[layer]) == 0 {
			continue
		}
		reads = append(reads, func(db store.DB) (err error) {
			toolOpens[i], err = db.BoundedToolOpenCounts(ctx, layer, tools[layer])
			return err
		})
	}
	if err := s.tx.Reads(ctx, reads...); err != nil {
		return err
	}
	for i, q := range r.Lanes {
		if !q.Lane.Keywords {
			a.pages[laneKey{q.Layer, q.Lane}] = pages[i]
		}
	}
	for _, i := range refLanes {
		s.keywords[r.Lanes[i].Layer] = refs[i]
	}
	if opens != nil {
		s.opens = map[string]int{}
		for _, layer := range layers {
			s.opens[layer] = opens[layer]
		}
	}
	for i, layer := range layers {
		for _, tool := range tools[layer] {
			s.toolOpens[laneKey{layer, assemble.Lane{Tool: tool}}] = toolOpens[i][tool]
		}
	}
	s.ahead = a
	return nil
}

// Pages implements assemble.Batcher, in one round trip. The keyword lane
// is found whole by the first words from item_keyword_terms (what it holds
// is the person's words' matches, not the project), and its versions are
// read a page at a time by key; a lane's first page may have been read
// ahead.
func (s *dbSource) Pages(ctx context.Context, qs []assemble.LaneQuery, n int) ([][]*ctxtype.Version, error) {
	out := make([][]*ctxtype.Version, len(qs))
	more := make([]bool, len(qs)) // a keyword page that is not the lane's last
	asked := make([]int, len(qs)) // the keys a keyword page asked for
	var reads []func(store.DB) error
	for i, q := range qs {
		if q.Lane.Keywords {
			refs, err := s.keywordRefs(ctx, q.Layer, q.Words)
			if err != nil {
				return nil, err
			}
			j, _ := slices.BinarySearchFunc(refs, q.After, func(r store.KeywordRef, p ctxtype.RankPos) int { return r.Pos.Compare(p) })
			for j < len(refs) && refs[j].Pos.Compare(q.After) <= 0 {
				j++
			}
			var keys []string
			for _, r := range refs[j:min(j+n, len(refs))] {
				keys = append(keys, r.Version.Key)
			}
			if len(keys) == 0 {
				continue
			}
			more[i], asked[i] = j+n < len(refs), len(keys)
			reads = append(reads, func(db store.DB) (err error) {
				out[i], err = db.BoundedByKeys(ctx, q.Layer, keys)
				return err
			})
			continue
		}
		k := laneKey{q.Layer, q.Lane}
		if vs, ok := s.ahead.pages[k]; ok && q.After.Compare(assemble.StartPos) == 0 && n == s.ahead.pageSize {
			delete(s.ahead.pages, k)
			out[i] = vs
			continue
		}
		reads = append(reads, func(db store.DB) (err error) {
			out[i], err = db.BoundedLane(ctx, q.Layer, q.Lane.Tool, q.After, n)
			return err
		})
	}
	if err := s.tx.Reads(ctx, reads...); err != nil {
		return nil, err
	}
	for i, q := range qs {
		if q.Lane.Keywords {
			slices.SortFunc(out[i], func(a, b *ctxtype.Version) int { return assemble.PosOf(a).Compare(assemble.PosOf(b)) })
			if len(out[i]) < asked[i] && more[i] {
				// A page short of rows would end the lane early; it cannot
				// happen in one snapshot, so say so rather than drop items.
				return nil, fmt.Errorf("keyword lane of %s: %d of %d items read", q.Layer, len(out[i]), asked[i])
			}
			continue
		}
		k := laneKey{q.Layer, q.Lane}
		for _, v := range out[i] {
			s.read[k] = append(s.read[k], readRow{pos: assemble.PosOf(v), open: isOpen(v)})
		}
	}
	return out, nil
}

// ByKeysOf implements assemble.Batcher, in one round trip.
func (s *dbSource) ByKeysOf(ctx context.Context, layers []string, keys [][]string) ([][]*ctxtype.Version, error) {
	out := make([][]*ctxtype.Version, len(layers))
	reads := make([]func(store.DB) error, len(layers))
	for i, layer := range layers {
		reads[i] = func(db store.DB) (err error) {
			out[i], err = db.BoundedByKeys(ctx, layer, keys[i])
			return err
		}
	}
	return out, s.tx.Reads(ctx, reads...)
}

// CountsAfter implements assemble.Batcher: CountAfter of each query, with
// the restricted items of all of them counted in one round trip.
func (s *dbSource) CountsAfter(ctx context.Context, qs []assemble.LaneQuery, role string, now time.Time, fires func(*ctxtype.Version) bool) ([]int, error) {
	out := make([]int, len(qs))
	restricted := make([]int, len(qs))
	var reads []func(store.DB) error
	for i, q := range qs {
		n, err := s.countRead(ctx, q, now, role, fires)
		if err != nil {
			return nil, err
		}
		out[i] = n
		if !q.Lane.Keywords {
			reads = append(reads, func(db store.DB) (err error) {
				restricted[i], err = countRestricted(ctx, db, q, role, now)
				return err
			})
		}
	}
	if err := s.tx.Reads(ctx, reads...); err != nil {
		return nil, err
	}
	for i := range out {
		out[i] += restricted[i]
	}
	return out, nil
}
