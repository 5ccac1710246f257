package packet_test

// Why, asked of every key of a scenario's packet, and each answer checked
// against the packet's records and cutoff.

import (
	"fmt"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/packet"
)

// whyResult is what why answered for each key of a packet.
type whyResult struct {
	answers  map[ikey]*packet.WhyAnswer
	reasons  map[string]int // "included", "budget", "budget_cutoff", "contradicted", "not_candidate/not_valid", ...
	pastCut  int            // visible candidates past the cutoff that a stage would drop (counted, not judged)
	notFound []ikey
}

func whyLabel(a *packet.WhyAnswer) string {
	switch a.Decision {
	case ctxtype.Included:
		return "included"
	case "not_candidate":
		return "not_candidate/" + a.Reason
	}
	return a.Reason
}

func whyRank(a *packet.WhyAnswer) int {
	if a == nil || a.Record == nil {
		return 0
	}
	return a.Record.Rank
}

func whyRule(a *packet.WhyAnswer) string {
	if a == nil || a.Record == nil {
		return ""
	}
	return a.Record.Rule
}

// whyLayer is the layer a why answer with a record answers for.
func whyLayer(a *packet.WhyAnswer) string {
	if a.Record != nil && a.Record.Layer != "" {
		return a.Record.Layer
	}
	return "project"
}

func (w *world) why(p assembled, viewer *auth.Agent, k ikey) *packet.WhyAnswer {
	w.t.Helper()
	a, err := w.svc.Packets.Why(w.t.Context(), viewer, p.proj, p.ID, k.key, k.layer)
	require.NoError(w.t, err, "why %v", k)
	return a
}

// whyMany asks why for many keys concurrently; the answers are checked
// afterwards on the test goroutine.
func (w *world) whyMany(p assembled, keys []ikey) []*packet.WhyAnswer {
	w.t.Helper()
	out := make([]*packet.WhyAnswer, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = w.svc.Packets.Why(w.t.Context(), p.viewer, p.proj, p.ID, keys[i].key, keys[i].layer)
			}
		}()
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		require.NoError(w.t, err, "why %v", keys[i])
	}
	return out
}

// whyAll asks why for every key and checks each answer against the
// records and the cutoff. hidden tells which keys the target role may not
// see (a non-admin viewer is told those never existed).
func (w *world) whyAll(p assembled, recs []ctxtype.Record, keys []ikey, hidden func(ikey) bool) whyResult {
	w.t.Helper()
	return w.whyAllOf(p, recs, keys, hidden, false)
}

// whyAllOf with partial set checks each answer but not that the keys
// cover every rank (the caller knows which candidates it left out).
func (w *world) whyAllOf(p assembled, recs []ctxtype.Record, keys []ikey, hidden func(ikey) bool, partial bool) whyResult {
	t := w.t
	t.Helper()
	admin := p.viewer.IsAdmin()
	byKey := itemRecords(recs)
	res := whyResult{answers: map[ikey]*packet.WhyAnswer{}, reasons: map[string]int{}}
	visibleRanks := map[int]ikey{}
	all := w.whyMany(p, keys)
	for i, k := range keys {
		a := all[i]
		if !admin && hidden(k) {
			// Answered as a key that never existed (issue 11).
			require.Equal(t, "did_not_exist", a.Reason, "%v is hidden from the role: %+v", k, a)
			require.Equal(t, fmt.Sprintf("no item %q existed in %s or _shared when the packet was assembled", k.key, p.proj), a.Detail, "%v", k)
			res.notFound = append(res.notFound, k)
			continue
		}
		res.answers[k] = a
		label := whyLabel(a)
		res.reasons[label]++
		if hidden(k) {
			if a.Decision != "not_candidate" { // a hidden item whose trigger never fired is no candidate
				require.Equal(t, "hidden", label, "%v", k)
			}
			continue
		}
		if a.Decision != "not_candidate" {
			require.Equal(t, k.layer, whyLayer(a), "%v answers its own layer: %+v", k, a)
		}
		w.checkWhy(p, k, a, label, byKey, &res)
		rank := whyRank(a)
		_, recorded := byKey[k]
		if label == "included" || label == "budget" || label == "budget_cutoff" || (rank > 0 && !recorded) {
			prev, dup := visibleRanks[rank]
			require.False(t, dup, "rank %d answered for %v and %v", rank, prev, k)
			visibleRanks[rank] = k
		}
	}
	if partial {
		return res
	}
	// Every rank from 1 to the last candidate belongs to one visible candidate.
	if p.Cutoff != nil {
		for i := 1; i < p.cutRank()+p.cutCount(); i++ {
			require.Contains(t, visibleRanks, i, "no candidate answers rank %d (cutoff %+v)", i, *p.Cutoff)
		}
		require.Len(t, visibleRanks, p.cutRank()+p.cutCount()-1)
	}
	require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"]+res.pastCut, "budget_cutoff answers + untried stage drops == cutoff.count")
	return res
}

// checkWhy checks one visible item's why answer against its record and
// the cutoff.
func (w *world) checkWhy(p assembled, k ikey, a *packet.WhyAnswer, label string, byKey map[ikey]ctxtype.Record, res *whyResult) {
	t := w.t
	t.Helper()
	rec, recorded := byKey[k]
	rank := whyRank(a)
	switch label {
	case "included", "budget":
		require.True(t, recorded, "%v is %s but has no record", k, label)
		require.Equal(t, rec.Decision, a.Decision, "%v", k)
		require.Equal(t, rank, rec.Rank, "%v", k)
		if label == "included" {
			require.Equal(t, rec.Span, a.Record.Span, "%v", k)
		}
		require.Less(t, rank, p.cutRank(), "%v tried at rank %d, cutoff %d", k, rank, p.cutRank())
	case "budget_cutoff":
		require.NotNil(t, p.Cutoff, "%v answers budget_cutoff in a packet without a cutoff", k)
		require.False(t, recorded, "%v was not tried, so it has no record", k)
		require.Equal(t, ctxtype.Excluded, a.Decision)
		require.Equal(t, p.Cutoff, a.Cutoff, "%v", k)
		require.GreaterOrEqual(t, rank, p.cutRank(), "%v", k)
	default:
		if recorded {
			require.Equal(t, rec.Reason, a.Reason, "%v", k)
		} else if a.Decision == ctxtype.Excluded {
			// Dropped by a stage but not met before the budget stopped:
			// counted in the cutoff, judged only by why.
			require.NotNil(t, p.Cutoff, "%v excluded (%s) without a record and without a cutoff", k, label)
			require.Equal(t, p.Cutoff, a.Cutoff, "%v", k)
			require.GreaterOrEqual(t, rank, p.cutRank(), "%v", k)
			res.pastCut++
		}
	}
}
