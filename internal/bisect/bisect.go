// Package bisect finds, by delta debugging, a smallest set of a failing
// packet's entries whose removal turns the failure into a success. It
// knows nothing of packets or commands: entries are indexes 0..n-1 and a
// Test says whether the packet without some of them succeeds, so the
// search is pure, deterministic and tested with a fake oracle.
package bisect

import (
	"context"
	"errors"
	"slices"
)

// Test runs the packet without the entries removed (none: the original)
// and says whether it succeeded; ref names what proves it (the packet that
// was run), kept in the trial.
type Test func(ctx context.Context, removed []int) (success bool, ref string, err error)

// Trial is one run of the Test, in the order the search asked for it.
type Trial struct {
	Removed []int
	Success bool
	Ref     string
}

// Result is what the search found. Set is the entries whose removal
// succeeds (nil when none was found), Proof the trial that shows it;
// Minimal says the set is 1-minimal (leaving any one of its entries in
// fails: every such trial was run) rather than the best the bound allowed.
type Result struct {
	// OriginalSucceeded: the packet as it was succeeded; there is nothing
	// to find.
	OriginalSucceeded bool
	// Exhausted: the bound on runs came before the search could end.
	Exhausted bool
	Set       []int
	Proof     *Trial
	Minimal   bool
	Trials    []Trial
}

// Runs is the number of times the Test ran.
func (r *Result) Runs() int { return len(r.Trials) }

// errBound stops the search when the next trial would pass the bound.
var errBound = errors.New("bisect: the bound on runs is reached")

// search holds one search's state: the trials run so far, each subset's
// answer (a subset asked twice runs once) and the bound.
type search struct {
	test    Test
	maxRuns int
	res     *Result
	seen    map[string]int
}

// Minimize runs the search over n entries with at most maxRuns trials: the
// original first (a success ends it), then the packet without every entry
// (a failure ends it: removing entries does not help, nothing is found),
// then ddmin over the removal set: split it in chunks, keep a chunk or a
// complement whose removal still succeeds, refine the chunks when none
// does, until the set is 1-minimal. The chunks are contiguous runs of the
// entries' order, so the same entries and the same answers ask for the
// same trials in the same order. An error of the Test ends the search with
// that error.
func Minimize(ctx context.Context, n, maxRuns int, test Test) (*Result, error) {
	s := &search{test: test, maxRuns: maxRuns, res: &Result{}, seen: map[string]int{}}
	err := s.run(ctx, n)
	if errors.Is(err, errBound) {
		s.res.Exhausted = true
		err = nil
	}
	return s.res, err
}

func (s *search) run(ctx context.Context, n int) error {
	ok, err := s.try(ctx, nil)
	if err != nil {
		return err
	}
	if ok {
		s.res.OriginalSucceeded = true
		return nil
	}
	if n == 0 {
		return nil
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	if ok, err := s.try(ctx, all); err != nil || !ok {
		return err
	}
	s.keep(all)
	return s.ddmin(ctx)
}

// ddmin narrows s.res.Set, which succeeds, to a 1-minimal set.
func (s *search) ddmin(ctx context.Context) error {
	granularity := 2
	for len(s.res.Set) >= 2 {
		set := s.res.Set
		chunks := split(set, granularity)
		next, err := s.firstSuccess(ctx, chunks)
		if err != nil {
			return err
		}
		if next != nil {
			s.keep(next)
			granularity = 2
			continue
		}
		if granularity > 2 {
			complements := make([][]int, len(chunks))
			for i := range chunks {
				complements[i] = without(set, chunks[i])
			}
			if next, err = s.firstSuccess(ctx, complements); err != nil {
				return err
			}
			if next != nil {
				s.keep(next)
				granularity = max(granularity-1, 2)
				continue
			}
		}
		if granularity >= len(set) {
			break
		}
		granularity = min(2*granularity, len(set))
	}
	s.res.Minimal = true
	return nil
}

// firstSuccess tries the candidates in order and answers the first whose
// removal succeeds, nil when none does.
func (s *search) firstSuccess(ctx context.Context, candidates [][]int) ([]int, error) {
	for _, c := range candidates {
		ok, err := s.try(ctx, c)
		if err != nil {
			return nil, err
		}
		if ok {
			return c, nil
		}
	}
	return nil, nil
}

// keep makes set the best found so far, with the trial that proved it.
func (s *search) keep(set []int) {
	proof := s.res.Trials[s.seen[key(set)]]
	s.res.Set = set
	s.res.Proof = &proof
}

// try answers whether removing the set succeeds, running the Test only for
// a set not asked before and only within the bound.
func (s *search) try(ctx context.Context, removed []int) (bool, error) {
	k := key(removed)
	if i, ok := s.seen[k]; ok {
		return s.res.Trials[i].Success, nil
	}
	if len(s.res.Trials) >= s.maxRuns {
		return false, errBound
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	ok, ref, err := s.test(ctx, slices.Clone(removed))
	if err != nil {
		return false, err
	}
	s.res.Trials = append(s.res.Trials, Trial{Removed: slices.Clone(removed), Success: ok, Ref: ref})
	s.seen[k] = len(s.res.Trials) - 1
	return ok, nil
}

// split cuts set into n contiguous chunks, the first ones one longer when
// it does not divide evenly.
func split(set []int, n int) [][]int {
	out := make([][]int, 0, n)
	start := 0
	for i := range n {
		size := len(set) / n
		if i < len(set)%n {
			size++
		}
		out = append(out, set[start:start+size])
		start += size
	}
	return out
}

// without is set less the entries of part, in set's order.
func without(set, part []int) []int {
	out := make([]int, 0, len(set)-len(part))
	for _, v := range set {
		if !slices.Contains(part, v) {
			out = append(out, v)
		}
	}
	return out
}

// key names a subset (always in ascending order) for the cache.
func key(set []int) string {
	b := make([]byte, 0, 4*len(set))
	for _, v := range set {
		b = append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return string(b)
}
