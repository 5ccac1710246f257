package item

import (
	"context"
	"runtime"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
)

// chunkSize is how many items of a batch one step of its write holds
// (Service.batch): large enough that a chunk's statements cost little more
// per row than one statement for the whole batch, small enough that the
// first chunk, which nothing overlaps, is prepared in a few milliseconds.
const chunkSize = 1000

// chunk is a prepared chunk of a batch, or the error that stopped it.
type chunk struct {
	at  []int // the chunk's items' indices in the batch
	ps  []prepared
	err error
}

// prepareChunks prepares a batch's items in key order, chunkSize at a time,
// on a goroutine of its own, and sends each chunk when it is ready; one
// chunk at most waits to be written. The first chunk is prepared on every
// core, since the database has nothing to do yet; the others leave one
// core to the database, which is writing the chunk before, and have their
// search vectors computed on a connection of their own meanwhile
// (store.Store.SearchVectors; the first chunk's would only move that work,
// not overlap it). It stops after an error, or when done is closed.
func (s *Service) prepareChunks(ctx context.Context, keys []string, fields []ctxtype.Fields, done <-chan struct{}) <-chan chunk {
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	out := make(chan chunk, 1)
	go func() {
		defer close(out)
		for lo := 0; lo < len(order); lo += chunkSize {
			at := order[lo:min(lo+chunkSize, len(order))]
			ks, fs := make([]string, len(at)), make([]ctxtype.Fields, len(at))
			for j, i := range at {
				ks[j], fs[j] = keys[i], fields[i]
			}
			workers := runtime.GOMAXPROCS(0)
			if lo > 0 {
				workers--
			}
			ps, err := prepareAll(ks, fs, workers)
			if err == nil && lo > 0 {
				err = s.searchAhead(ctx, ps)
			}
			select {
			case out <- chunk{at: at, ps: ps, err: err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// searchAhead gives ps their search vectors, computed on a connection of
// their own; when none is free they are left to the write.
func (s *Service) searchAhead(ctx context.Context, ps []prepared) error {
	texts := make([]store.SearchText, len(ps))
	for i, p := range ps {
		texts[i] = store.SearchText{Title: p.fields.Title, Summary: p.fields.Summary, Content: p.fields.Content}
	}
	vecs, ok, err := s.store.SearchVectors(ctx, texts)
	if err != nil || !ok {
		return err
	}
	for i := range ps {
		ps[i].search = &vecs[i]
	}
	return nil
}
