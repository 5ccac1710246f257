package store

import (
	"sync"
	"sync/atomic"

	"github.com/contextd/contextd/internal/audit"
)

// Stats is what the store has done since the start, for metrics: the
// writes committed (counted when their transaction commits, so a rolled
// back or retried one counts once or not at all), the retries, the round
// trips and the pool. Nothing in it names a project.
type Stats struct {
	Retries    int64
	RoundTrips int64
	// ChainAppends are the audit chain entries committed, by kind
	// (item_version, packet, handoff, handoff_event, ...).
	ChainAppends map[string]int64
	// Packets, PacketRecords and ItemVersions are the rows committed.
	Packets, PacketRecords, ItemVersions int64
	// HandoffTransitions are the handoff events committed, by the status
	// they moved to (pending for a new handoff).
	HandoffTransitions map[string]int64
	Pool               PoolStats
}

// PoolStats is the connection pool's state (pgxpool's Stat, in the
// store's own terms).
type PoolStats struct {
	MaxConns, TotalConns, IdleConns, AcquiredConns, ConstructingConns int32
	AcquireCount, EmptyAcquireCount, CanceledAcquireCount             int64
	AcquireDurationSeconds                                            float64
	NewConns, MaxLifetimeDestroys, MaxIdleDestroys                    int64
}

// writeStats counts what committed transactions wrote.
type writeStats struct {
	mu          sync.Mutex
	appends     map[string]int64
	transitions map[string]int64
	packets     atomic.Int64
	records     atomic.Int64
	versions    atomic.Int64
}

// committed counts the entries of a transaction that just committed.
func (w *writeStats) committed(es []pendingEntry) {
	if len(es) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.appends == nil {
		w.appends, w.transitions = map[string]int64{}, map[string]int64{}
	}
	for _, e := range es {
		w.appends[e.kind]++
		switch e.kind {
		case audit.KindPacket:
			w.packets.Add(1)
			w.records.Add(int64(e.rows))
		case audit.KindItemVersion:
			w.versions.Add(1)
		case audit.KindHandoffEvent:
			w.transitions[e.label]++
		}
	}
}

func (w *writeStats) copyInto(st *Stats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st.ChainAppends = make(map[string]int64, len(w.appends))
	for k, v := range w.appends {
		st.ChainAppends[k] = v
	}
	st.HandoffTransitions = make(map[string]int64, len(w.transitions))
	for k, v := range w.transitions {
		st.HandoffTransitions[k] = v
	}
	st.Packets, st.PacketRecords, st.ItemVersions = w.packets.Load(), w.records.Load(), w.versions.Load()
}

// Stats is what the store has done since the start (see Stats).
func (s *Store) Stats() Stats {
	st := Stats{Retries: s.retries.Load(), RoundTrips: s.trips.Load()}
	s.writes.copyInto(&st)
	ps := s.pool.Stat()
	st.Pool = PoolStats{
		MaxConns: ps.MaxConns(), TotalConns: ps.TotalConns(), IdleConns: ps.IdleConns(), AcquiredConns: ps.AcquiredConns(),
		ConstructingConns: ps.ConstructingConns(), AcquireCount: ps.AcquireCount(), EmptyAcquireCount: ps.EmptyAcquireCount(),
		CanceledAcquireCount: ps.CanceledAcquireCount(), AcquireDurationSeconds: ps.AcquireDuration().Seconds(),
		NewConns: ps.NewConnsCount(), MaxLifetimeDestroys: ps.MaxLifetimeDestroyCount(), MaxIdleDestroys: ps.MaxIdleDestroyCount(),
	}
	return st
}
