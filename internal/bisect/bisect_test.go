package bisect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// oracle is a fake Test: the packet fails while the culprits are present.
// It counts its runs and names each run's ref.
type oracle struct {
	culprits []int
	// needAll: the failure goes only when every culprit is removed (a pair
	// that must both go); else removing any one of them suffices.
	needAll bool
	never   bool
	runs    int
}

func (o *oracle) test(_ context.Context, removed []int) (bool, string, error) {
	o.runs++
	ref := fmt.Sprintf("run%d", o.runs)
	if o.never {
		return false, ref, nil
	}
	n := 0
	for _, c := range o.culprits {
		if slices.Contains(removed, c) {
			n++
		}
	}
	if o.needAll {
		return n == len(o.culprits), ref, nil
	}
	return n > 0, ref, nil
}

// TestSingleCulprit: one culprit among 20, wherever it is, is found alone
// and proven 1-minimal within 32 runs; the proof is the trial that removed
// exactly it and succeeded; no subset is run twice.
func TestSingleCulprit(t *testing.T) {
	t.Parallel()
	for c := range 20 {
		o := &oracle{culprits: []int{c}}
		r, err := Minimize(context.Background(), 20, 32, o.test)
		require.NoError(t, err)
		require.Equal(t, []int{c}, r.Set, "culprit %d", c)
		require.True(t, r.Minimal)
		require.False(t, r.Exhausted)
		require.LessOrEqual(t, r.Runs(), 32)
		require.Equal(t, o.runs, r.Runs())
		require.Equal(t, []int{c}, r.Proof.Removed)
		require.True(t, r.Proof.Success)
		require.Equal(t, fmt.Sprintf("run%d", r.Runs()), r.Trials[r.Runs()-1].Ref)
		require.Empty(t, r.Trials[0].Removed, "the original runs first")
		require.False(t, r.Trials[0].Success)
		seen := map[string]bool{}
		for _, tr := range r.Trials {
			require.False(t, seen[key(tr.Removed)], "a subset ran twice")
			seen[key(tr.Removed)] = true
		}
	}
}

// TestPairMustBothGo: a failure that goes only when both of two entries
// are removed is narrowed to exactly that pair, proven 1-minimal.
func TestPairMustBothGo(t *testing.T) {
	t.Parallel()
	for _, pair := range [][]int{{3, 4}, {0, 19}, {7, 12}} {
		o := &oracle{culprits: pair, needAll: true}
		r, err := Minimize(context.Background(), 20, 64, o.test)
		require.NoError(t, err)
		require.Equal(t, pair, r.Set)
		require.True(t, r.Minimal)
		require.Equal(t, pair, r.Proof.Removed)
	}
}

// TestNothingFound: when removing every entry does not succeed, the search
// stops after two runs with no set; when the original succeeds, after one.
func TestNothingFound(t *testing.T) {
	t.Parallel()
	o := &oracle{never: true}
	r, err := Minimize(context.Background(), 20, 32, o.test)
	require.NoError(t, err)
	require.Nil(t, r.Set)
	require.Nil(t, r.Proof)
	require.False(t, r.OriginalSucceeded)
	require.False(t, r.Exhausted)
	require.Equal(t, 2, r.Runs())
	require.Len(t, r.Trials[1].Removed, 20)

	ok := func(context.Context, []int) (bool, string, error) { return true, "", nil }
	r, err = Minimize(context.Background(), 20, 32, ok)
	require.NoError(t, err)
	require.True(t, r.OriginalSucceeded)
	require.Nil(t, r.Set)
	require.Equal(t, 1, r.Runs())

	r, err = Minimize(context.Background(), 0, 32, (&oracle{}).test)
	require.NoError(t, err)
	require.Nil(t, r.Set, "a packet with no entries has nothing to remove")
	require.Equal(t, 1, r.Runs())
}

// TestBound: the search never runs the Test more than maxRuns times; cut
// short, it reports the best set found so far (which did succeed), not
// proven minimal; cut before any success, no set.
func TestBound(t *testing.T) {
	t.Parallel()
	for bound := 1; bound <= 12; bound++ {
		o := &oracle{culprits: []int{13}}
		r, err := Minimize(context.Background(), 20, bound, o.test)
		require.NoError(t, err)
		require.LessOrEqual(t, o.runs, bound)
		require.Equal(t, o.runs, r.Runs())
		if r.Set == nil {
			require.True(t, r.Exhausted)
			require.Less(t, bound, 2)
			continue
		}
		require.Contains(t, r.Set, 13)
		require.True(t, r.Proof.Success)
		require.Equal(t, r.Set, r.Proof.Removed)
		if !r.Minimal {
			require.True(t, r.Exhausted, "bound %d", bound)
			require.Equal(t, bound, r.Runs())
		}
	}
	o := &oracle{culprits: []int{13}}
	r, err := Minimize(context.Background(), 20, 6, o.test)
	require.NoError(t, err)
	require.True(t, r.Exhausted)
	require.False(t, r.Minimal)
	require.Greater(t, len(r.Set), 1)
}

// TestDeterministic: the same answers ask for the same trials, in order.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	a, err := Minimize(context.Background(), 17, 40, (&oracle{culprits: []int{2, 9}, needAll: true}).test)
	require.NoError(t, err)
	b, err := Minimize(context.Background(), 17, 40, (&oracle{culprits: []int{2, 9}, needAll: true}).test)
	require.NoError(t, err)
	require.Equal(t, a.Trials, b.Trials)
}

// TestTestError: an error of the Test ends the search with it.
func TestTestError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	n := 0
	_, err := Minimize(context.Background(), 5, 32, func(context.Context, []int) (bool, string, error) {
		n++
		if n == 3 {
			return false, "", boom
		}
		return n == 2, "", nil
	})
	require.ErrorIs(t, err, boom)
}
