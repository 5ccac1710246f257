package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/fault"
)

// Replica is a streaming standby of the store's primary that serves the
// reads of append-only history (why, replay, attribute, injections, a
// packet and its records, task histories, packet listings, audit entries):
// those rows never change once written, so a standby that has replayed
// them answers exactly as the primary would. Everything else, and every
// write, stays on the primary.
//
// Two rules keep an answer from the replica correct:
//
//   - Everything committed before the read. A read first asks the
//     primary for its WAL insert position and the replica for its replay
//     position (one small statement on each; the replica is asked anew
//     for every read, not answered from a remembered position, since a
//     standby that restarted may come back behind where it was, and the
//     reads waiting at once share the question: replayProbe), and goes to
//     the replica only once it has replayed up to the primary's, waiting
//     at most Wait, else to the primary. Every transaction the primary had
//     committed when the read began — by this process or any other: a
//     packet, a handoff event, a redaction, which rewrites history in
//     place — has its commit record before that position, so the replica's
//     answer holds it, a listing as much as a lookup. (Only this process's
//     own writes were covered before 2026-12-06: another server's packet
//     could be missing from a listing read a moment after it was written.)
//     The position is taken at read time rather than at each COMMIT, so
//     the write path, whose round trips tests hold to a budget, is
//     untouched; the insert position, not the flush position, so that it
//     lies past the commit record even under synchronous_commit = off.
//   - Never a false 404. A read that finds nothing on the replica runs
//     again on the primary before it answers not found. The first rule
//     makes such a miss rare; the rerun costs one read, where a wrong
//     404 would be a wrong answer.
//
// A replica that cannot be reached (connect error, lost connection,
// timeout, or a server that is not a standby) is set aside: its reads go to
// the primary at once, and a background probe checks it again every
// Recheck, so no request waits for a dead replica's timeout twice.
type Replica struct {
	st      *Store
	wait    time.Duration
	recheck time.Duration
	probe   time.Duration
	log     *slog.Logger

	// down is set while the replica is set aside; downErr says why.
	down    atomic.Bool
	mu      sync.Mutex
	downErr string
	stop    context.CancelFunc
	ctx     context.Context

	reads     atomic.Int64
	fallbacks [fallbackReasons]atomic.Int64
	// replay shares the replay position among the reads waiting for it;
	// questions counts the times it was asked.
	replay    replayProbe
	questions atomic.Int64
}

// Why a read went to the primary although a replica is configured.
const (
	// FallbackBehind: the replica had not replayed, within the wait, what
	// the primary had committed when the read began.
	FallbackBehind = iota
	// FallbackDown: the replica is set aside, or failed the read.
	FallbackDown
	// FallbackMissing: the replica found nothing; the primary was asked.
	FallbackMissing
	fallbackReasons
)

// FallbackReasonNames name the fallback reasons, for metrics.
var FallbackReasonNames = [fallbackReasons]string{"behind", "down", "missing"}

// ReplicaConfig is how a replica is opened; zero values take the defaults.
type ReplicaConfig struct {
	// Store is the replica's pool: URL, size and timeouts (those of the
	// primary's Config, with the replica's URL).
	Store Config
	// Wait bounds how long a read waits for the replica to replay what the
	// primary had committed when the read began before it goes to the
	// primary (0: 100 ms, a
	// standby on the same network replays within milliseconds, and a
	// longer wait only adds latency to a read the primary answers anyway;
	// negative: no wait).
	Wait time.Duration
	// Recheck is how often a replica set aside is probed again (default 5 s).
	Recheck time.Duration
	// ConnectTimeout bounds a new connection to the replica unless its URL
	// sets connect_timeout (default 2 s): a replica that vanished must not
	// hold a read longer than that before it goes to the primary.
	ConnectTimeout time.Duration
}

// Defaults of ReplicaConfig.
const (
	DefaultReplicaWait           = 100 * time.Millisecond
	DefaultReplicaRecheck        = 5 * time.Second
	DefaultReplicaConnectTimeout = 2 * time.Second
	// DefaultReplicaStatementTimeout bounds a statement on the replica
	// (the primary's statement timeout when that is shorter).
	DefaultReplicaStatementTimeout = 5 * time.Second
	// replicaPoll is how often a read waiting for the replica asks again:
	// under a steady stream of writes most reads wait for the last few,
	// and a standby on the same network replays them within a millisecond
	// or two.
	replicaPoll = 2 * time.Millisecond
)

// OpenReplica opens the pool of a replica without requiring that it
// answers: a replica down at start is set aside and probed again, and the
// server starts on its primary alone meanwhile. Close it once nothing
// reads through the store that uses it.
func OpenReplica(ctx context.Context, cfg ReplicaConfig) (*Replica, error) {
	// A read of history that takes longer than this on the replica is
	// asked of the primary instead: a slow replica costs a read at most
	// this much more, not the whole statement timeout twice.
	cfg.Store.StatementTimeout = min(orDefault(cfg.Store.StatementTimeout, DefaultStatementTimeout), DefaultReplicaStatementTimeout)
	st, err := open(ctx, cfg.Store, orDefault(cfg.ConnectTimeout, DefaultReplicaConnectTimeout))
	if err != nil {
		return nil, fmt.Errorf("read database url: %w", err)
	}
	r := &Replica{st: st, wait: orDefault(cfg.Wait, DefaultReplicaWait), recheck: orDefault(cfg.Recheck, DefaultReplicaRecheck),
		probe: orDefault(cfg.ConnectTimeout, DefaultReplicaConnectTimeout), log: st.log}
	r.ctx, r.stop = context.WithCancel(context.WithoutCancel(ctx))
	if err := r.check(ctx); err != nil {
		r.setAside(err)
	}
	return r, nil
}

// Close stops the probe and closes the replica's pool.
func (r *Replica) Close() {
	r.stop()
	r.st.Close()
}

// UseReplica makes r serve the store's reads of history (nil: none).
func (s *Store) UseReplica(r *Replica) { s.replica.Store(r) }

// Read runs fn, the reads of one answer about append-only history, on the
// replica when it may answer them (see Replica), else on the primary; on
// the replica, fn runs again on the primary when it finds nothing or the
// replica fails it. fn must therefore only read, and reset what it
// builds. Reads of what may change (an item's current version and roles,
// grants) do not belong in fn: they go to the store's own DB.
func (s *Store) Read(ctx context.Context, fn func(db DB) error) error {
	return s.route(ctx, func(st *Store) error { return fn(st.DB) })
}

// ReadSnapshot is Read in one read-only repeatable-read transaction
// (Snapshot), for reads that must agree with each other.
func (s *Store) ReadSnapshot(ctx context.Context, fn func(tx *Tx) error) error {
	return s.route(ctx, func(st *Store) error { return st.Snapshot(ctx, fn) })
}

// route runs run on the replica's store or the primary's, as Read says.
func (s *Store) route(ctx context.Context, run func(st *Store) error) error {
	r := s.replica.Load()
	if r == nil {
		return run(s)
	}
	if !r.usable(ctx, s) {
		return run(s)
	}
	err := run(r.st)
	switch {
	case err == nil:
		r.reads.Add(1)
		return nil
	case ctx.Err() != nil:
		return err
	case errors.Is(err, fault.ErrNotFound):
		r.fallbacks[FallbackMissing].Add(1)
	case errors.Is(err, fault.ErrUnavailable):
		// A lost connection sets it aside; so does any other unavailable
		// (a transaction that gave up reconnecting, a timeout) when the
		// replica then does not answer a probe: a busy replica stays.
		if lost(err) {
			r.setAside(err)
		} else if cerr := r.check(ctx); cerr != nil && ctx.Err() == nil {
			r.setAside(cerr)
		}
		r.fallbacks[FallbackDown].Add(1)
	default:
		return err
	}
	return run(s)
}

// usable reports whether a read may go to the replica: it is not set
// aside, and it has replayed what the primary had committed when the read
// began (waiting up to the bound). A false answer is counted as a fallback.
func (r *Replica) usable(ctx context.Context, primary *Store) bool {
	if r.down.Load() {
		r.fallbacks[FallbackDown].Add(1)
		return false
	}
	need, err := primaryLSN(ctx, primary)
	if err != nil {
		// The primary did not say where it is: the read goes to it, where
		// it meets the same error if the primary is the trouble.
		r.fallbacks[FallbackBehind].Add(1)
		return false
	}
	ok, err := r.caughtUp(ctx, need)
	switch {
	case err != nil && ctx.Err() != nil:
		// The client left: no verdict on the replica.
		r.fallbacks[FallbackBehind].Add(1)
	case err != nil:
		r.setAside(err)
		r.fallbacks[FallbackDown].Add(1)
	case !ok:
		r.fallbacks[FallbackBehind].Add(1)
	}
	return ok && err == nil
}

// primaryLSN is the primary's WAL insert position now, as the end of the
// last record written: past the commit record of every transaction
// committed so far (see Replica).
func primaryLSN(ctx context.Context, primary *Store) (int64, error) {
	lsn, err := WrittenLSN(ctx, primary.DB.ex)
	return lsn, interpret(err)
}

// WrittenLSN is the WAL insert position of the server q asks, as the end
// of the last record written (recordEnd), in bytes: what a standby's
// pg_last_wal_replay_lsn() reaches once it has replayed all of it.
// (pgtest's Standby.CatchUp waits for it too.)
func WrittenLSN(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int64, error) {
	var lsn, block, segment int64
	err := q.QueryRow(ctx, `select (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint,
		current_setting('wal_block_size')::bigint, (select setting::bigint from pg_settings where name = 'wal_segment_size')`).Scan(&lsn, &block, &segment)
	if err != nil {
		return 0, err
	}
	return recordEnd(lsn, block, segment), nil
}

// The sizes of a WAL page's header: the first page of a segment has the
// long one (PostgreSQL's SizeOfXLogShortPHD and SizeOfXLogLongPHD).
const (
	walShortPageHeader = 24
	walLongPageHeader  = 40
)

// recordEnd is an insert position as the end of the record before it.
// The insert position of a record that would start a page lies past the
// page's header, where no record ends; the replay position a standby
// reports is the end of the last record it replayed, the page's start.
// Compared as they are, a primary whose last record ended at a page's end
// (one in ~1,000, and every segment switch) would stay ahead of every
// standby until its next write, and each read would wait the whole wait.
func recordEnd(lsn, blockSize, segmentSize int64) int64 {
	switch {
	case segmentSize > 0 && lsn%segmentSize == walLongPageHeader:
		return lsn - walLongPageHeader
	case blockSize > 0 && lsn%blockSize == walShortPageHeader && (segmentSize <= 0 || lsn%segmentSize != walShortPageHeader):
		return lsn - walShortPageHeader
	}
	return lsn
}

// caughtUp reports whether the replica has replayed the WAL up to need,
// asking it every replicaPoll for at most the wait; an error is the
// replica's (it cannot be asked). It asks even when an earlier read saw
// the replica past need: a standby that restarted since may have come
// back at a point before records it had replayed (its minimum recovery
// point), and what it answers must hold every committed redaction.
func (r *Replica) caughtUp(ctx context.Context, need int64) (bool, error) {
	return r.waitFor(ctx, func(ctx context.Context) (bool, error) {
		got, err := r.sharedReplayLSN(ctx)
		return got >= need, err
	})
}

// waitFor asks reached every replicaPoll for at most the wait; an error is
// the replica's.
func (r *Replica) waitFor(ctx context.Context, reached func(context.Context) (bool, error)) (bool, error) {
	deadline := time.Now().Add(r.wait)
	for {
		ok, err := reached(ctx)
		if err != nil || ok {
			return ok, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(min(replicaPoll, left)):
		}
	}
}

// errNotStandby: the read URL names a server that is not in recovery, so
// whether it holds what the primary committed cannot be told by its
// replay position.
var errNotStandby = errors.New("the read database is not a streaming standby (pg_is_in_recovery() is false)")

// replayLSN asks the replica how far it has replayed.
func (r *Replica) replayLSN(ctx context.Context) (int64, error) {
	r.questions.Add(1)
	var lsn *int64
	if err := r.st.DB.ex.QueryRow(ctx, "select (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint").Scan(&lsn); err != nil {
		return 0, interpret(err)
	}
	if lsn == nil {
		return 0, errNotStandby
	}
	return *lsn, nil
}

// check asks the replica, within the probe's bound, whether it answers and
// is a standby.
func (r *Replica) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.probe)
	defer cancel()
	_, err := r.replayLSN(ctx)
	return err
}

// setAside sends the replica's reads to the primary until a probe finds it
// back, and starts that probe (once).
func (r *Replica) setAside(err error) {
	r.mu.Lock()
	r.downErr = replicaReason(err)
	r.mu.Unlock()
	if r.down.Swap(true) {
		return
	}
	r.log.Warn("read replica set aside: its reads go to the primary until it answers again", slog.Any("error", err))
	go r.watch()
}

// watch probes a replica set aside every Recheck until it answers as a
// standby again.
func (r *Replica) watch() {
	t := time.NewTicker(r.recheck)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		err := r.check(r.ctx)
		if err == nil {
			r.down.Store(false)
			r.log.Info("read replica answers again: reads of history go to it")
			return
		}
		r.mu.Lock()
		r.downErr = replicaReason(err)
		r.mu.Unlock()
	}
}

// replicaReason says why the replica is not used in words fit for /readyz,
// which anyone may ask: never the driver's text, which names the login,
// the database and the address (the log has it).
func replicaReason(err error) string {
	var to interface{ Timeout() bool }
	switch {
	case errors.Is(err, errNotStandby):
		return errNotStandby.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &to) && to.Timeout():
		return "the read database did not answer in time"
	}
	return "the read database cannot be reached"
}
