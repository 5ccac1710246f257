package item

import (
	"context"
	"fmt"
	"runtime"
	"slices"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// BatchResult is the outcome of a batch write.
type BatchResult struct {
	Created, Updated, Unchanged, Proposed int
	Items                                 []BatchEntry
}

// BatchEntry is what a batch did to one item, in request order.
type BatchEntry struct {
	Key     string
	Version int
	Status  Status
	// Tombstoned says an import wrote the item and then tombstoned it;
	// Version is then the tombstone's.
	Tombstoned bool
	// Proposal is the number of the proposal the item became (Status
	// Proposed, or Unchanged when its writer had proposed the same
	// already); Version is then the item's current version (0: none).
	Proposal int
}

// Batch writes up to MaxBatch items in one transaction, all or nothing. Every
// problem of every item is reported at once, by JSON Pointer.
func (s *Service) Batch(ctx context.Context, agent *auth.Agent, proj string, ins []Input) (BatchResult, error) {
	keys, fields, causes, err := s.checkBatch(ctx, s.store.DB, agent, proj, ins, CauseAsked)
	if err != nil {
		return BatchResult{}, err
	}
	var res BatchResult
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		res, err = s.batch(ctx, tx, agent, proj, keys, fields, causes)
		return err
	})
	return res, err
}

// BatchTx is Batch inside the caller's transaction.
func (s *Service) BatchTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, ins []Input) (BatchResult, error) {
	keys, fields, causes, err := s.checkBatch(ctx, tx.DB, agent, proj, ins, CauseAsked)
	if err != nil {
		return BatchResult{}, err
	}
	return s.batch(ctx, tx, agent, proj, keys, fields, causes)
}

// batch writes a checked batch a chunk at a time, in key order, while the
// next chunk is prepared (prepareChunks): the database writes one chunk as
// Go counts the tokens of the next and a second backend computes its search
// vectors, and the statements of a chunk's write are answered while Go
// builds the next one's rows (store.Tx.ItemVersionsAppend), so a large
// batch costs about the largest of these, not their sum. The rows of the
// whole batch are locked first, in key order, as for any write, and the
// chunks come in key order too (so the new keys' rows are made in key
// order): two batches cannot deadlock. The items that become proposals
// (causes) are proposed after, under the same locks (proposeLocked).
func (s *Service) batch(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, keys []string, fields []ctxtype.Fields, causes []cause) (BatchResult, error) {
	if err := s.projects.Writable(ctx, tx, proj); err != nil {
		return BatchResult{}, err
	}
	current, err := tx.ItemLockCurrent(ctx, proj, slices.Sorted(slices.Values(keys)))
	if err != nil {
		return BatchResult{}, err
	}
	done := make(chan struct{})
	defer close(done)
	out := make([]BatchEntry, len(keys))
	written, proposed := splitByCause(causes)
	wk, wf := pick(keys, written), pick(fields, written)
	for c := range s.prepareChunks(ctx, wk, wf, done) {
		if c.err != nil {
			return BatchResult{}, c.err
		}
		es, err := s.writeLocked(ctx, tx, agent, proj, c.ps, current, nil)
		if err != nil {
			return BatchResult{}, fmt.Errorf("batch write to %s: %w", proj, err)
		}
		for j, e := range es {
			out[written[c.at[j]]] = e
		}
	}
	if len(proposed) > 0 {
		if err := s.proposeBatch(ctx, tx, agent, proj, keys, fields, causes, proposed, current, out); err != nil {
			return BatchResult{}, fmt.Errorf("batch write to %s: %w", proj, err)
		}
	}
	return tally(out), nil
}

// checkBatch authorizes a batch and checks its items and the authority
// they claim: every problem of every item at once, before anything is
// written. It is the batch's keys and normalised fields.
// The causes say which items become proposals, and why (proposalCauses;
// asked is the cause of those whose write asked to be one).
func (s *Service) checkBatch(ctx context.Context, db store.DB, agent *auth.Agent, proj string, ins []Input, asked string) ([]string, []ctxtype.Fields, []cause, error) {
	if err := s.projects.AuthorizeIn(ctx, db, agent, proj, auth.Edit); err != nil {
		return nil, nil, nil, err
	}
	keys, fields, errs := checkAll(ins, nil)
	if err := errs.Err(); err != nil {
		return nil, nil, nil, err
	}
	claims := make([]auth.Claim, len(fields))
	propose := make([]bool, len(fields))
	for i := range fields {
		defaultAuthority(agent, &fields[i])
		claims[i] = auth.Claim{Pointer: fmt.Sprintf("/items/%d", i), Authority: fields[i].Authority, Source: fields[i].Source}
		propose[i] = ins[i].Propose
	}
	causes, err := s.proposalCauses(ctx, db, agent, proj, asked, propose, claims)
	if err != nil {
		return nil, nil, nil, err // a batch is all or nothing: refused whole
	}
	return keys, fields, causes, nil
}

// prepareBatch checks a batch (checkBatch) and prepares all of it.
func (s *Service) prepareBatch(ctx context.Context, db store.DB, agent *auth.Agent, proj string, ins []Input, asked string) ([]prepared, []cause, error) {
	keys, fields, causes, err := s.checkBatch(ctx, db, agent, proj, ins, asked)
	if err != nil {
		return nil, nil, err
	}
	ps, err := prepareAll(keys, fields, runtime.GOMAXPROCS(0))
	return ps, causes, err
}

// Check validates a batch's items as a write would, without writing or
// reading anything: every problem of every item, by JSON Pointer
// (/items/3/kind). skip, when not nil, names items already refused by the
// caller (an import's own parser), which are left out.
func Check(ins []Input, skip []bool) error {
	_, _, errs := checkAll(ins, skip)
	return errs.Err()
}

// checkAll is a batch's keys and normalised fields, and its problems.
func checkAll(ins []Input, skip []bool) ([]string, []ctxtype.Fields, *validation.List) {
	var errs validation.List
	if len(ins) == 0 {
		errs.Add("/items", "required", "items must hold at least one item")
	}
	if len(ins) > MaxBatch {
		errs.Add("/items", "too_many", "a batch holds at most %d items, not %d", MaxBatch, len(ins))
		return nil, nil, &errs
	}
	keys := make([]string, len(ins))
	fields := make([]ctxtype.Fields, len(ins))
	seen := make(map[string]int, len(ins))
	for i := range ins {
		if skip != nil && skip[i] {
			continue
		}
		prefix := fmt.Sprintf("/items/%d", i)
		k := ins[i].Key
		switch {
		case !ValidKey(k):
			errs.Add(prefix+"/key", "format", ctxtype.KeyRule)
		case seen[k] > 0:
			errs.Add(prefix+"/key", "duplicate", "key %q is also at /items/%d; a key may appear once per batch", k, seen[k]-1)
		default:
			seen[k] = i + 1
		}
		keys[i] = k
		fields[i] = ins[i].normalize(prefix, &errs)
	}
	return keys, fields, &errs
}
