package store

import (
	"context"
	"time"
)

// ReplicaStatus is how the read replica stands, for /readyz and the
// metrics: whether reads go to it, how far behind the primary it is, and
// what its reads did since the start.
type ReplicaStatus struct {
	// InUse: reads of history go to it (it is not set aside).
	InUse bool
	// Error says why it is set aside, or why it could not be asked now.
	Error string
	// LagBytes is the primary's WAL write position minus the replica's
	// replay position; -1 when either could not be asked.
	LagBytes int64
	// LagSeconds is the time since the replica replayed its last
	// transaction, while it is behind (0 when it has replayed all the
	// primary wrote: an idle primary is no lag); -1 when unknown.
	LagSeconds float64
	// Reads are the reads it answered; Fallbacks those that went to the
	// primary, by reason (FallbackReasonNames).
	Reads     int64
	Fallbacks map[string]int64
}

// replicaStatusTimeout bounds the status's two statements: a replica that
// does not answer within it is reported so, not waited for.
const replicaStatusTimeout = 500 * time.Millisecond

// ReplicaStatus is the read replica's status; false when none is
// configured. It asks the primary and the replica where they are, each
// within replicaStatusTimeout.
func (s *Store) ReplicaStatus(ctx context.Context) (ReplicaStatus, bool) {
	r := s.replica.Load()
	if r == nil {
		return ReplicaStatus{}, false
	}
	st := ReplicaStatus{InUse: !r.down.Load(), LagBytes: -1, LagSeconds: -1, Reads: r.reads.Load(), Fallbacks: map[string]int64{}}
	for i, name := range FallbackReasonNames {
		st.Fallbacks[name] = r.fallbacks[i].Load()
	}
	if !st.InUse {
		r.mu.Lock()
		st.Error = r.downErr
		r.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctx, replicaStatusTimeout)
	defer cancel()
	var primary int64
	if err := s.DB.ex.QueryRow(ctx, "select (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint").Scan(&primary); err != nil {
		st.Error = "the primary did not say where it is"
		return st, true
	}
	var replayed *int64
	var since *float64
	err := r.st.DB.ex.QueryRow(ctx, "select (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint, "+
		"extract(epoch from clock_timestamp() - pg_last_xact_replay_timestamp())::float8").Scan(&replayed, &since)
	switch {
	case err != nil:
		st.Error = replicaReason(err)
	case replayed == nil:
		st.Error = errNotStandby.Error()
	default:
		st.LagBytes, st.LagSeconds = max(0, primary-*replayed), 0
		if st.LagBytes > 0 && since != nil {
			st.LagSeconds = max(0, *since)
		}
	}
	return st, true
}
