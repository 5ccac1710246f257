package item

import (
	"context"
	"fmt"
	"slices"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/keyword"
	"github.com/contextd/contextd/internal/store"
)

// write is the one write path, for one item or ten thousand: lock every
// item row in key order (so two batches cannot deadlock), compare with the
// current versions, append the new versions. ifMatch applies to a single
// write only.
func (s *Service) write(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, ps []prepared, ifMatch *Precondition) ([]BatchEntry, error) {
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.key
	}
	slices.Sort(keys)
	current, err := tx.ItemLockCurrent(ctx, proj, keys)
	if err != nil {
		return nil, err
	}
	return s.writeLocked(ctx, tx, agent, proj, ps, current, ifMatch)
}

// writeLocked is write once the rows are locked: current holds the locked
// rows of the keys that exist.
func (s *Service) writeLocked(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, ps []prepared, current map[string]store.CurrentItem, ifMatch *Precondition) ([]BatchEntry, error) {
	out := make([]BatchEntry, len(ps))
	var news []store.NewVersion
	for i, p := range ps {
		cur, exists := current[p.key]
		e, changed, err := decide(agent, p, cur, exists, ifMatch)
		if err != nil {
			return nil, err
		}
		out[i] = e
		if changed {
			nv := newVersion(p, e.Version)
			nv.Was, nv.CreatedBy, nv.After = cur.Counted, agent.ID, cur.CreatedAt
			news = append(news, nv)
		}
	}
	if err := tx.ItemVersionsAppend(ctx, proj, news); err != nil {
		return nil, err
	}
	return out, nil
}

// decide is what a write does to one item given its current version:
// refuse it, leave it unchanged, or make version n+1.
func decide(agent *auth.Agent, p prepared, cur store.CurrentItem, exists bool, ifMatch *Precondition) (BatchEntry, bool, error) {
	live := exists && cur.Live
	if exists && !agent.SeesAllRoles() && !cur.Roles.Visible(agent.Role) {
		// An item hidden from the caller does not exist for it, and it may
		// not be overwritten by it either; with If-Match it answers as a
		// missing item does.
		if ifMatch != nil {
			return BatchEntry{}, false, fmt.Errorf("%w: If-Match %s, but the item has no live version", fault.ErrPreconditionFailed, ifMatch)
		}
		return BatchEntry{}, false, fmt.Errorf("%w: %s", ErrNotFound, p.key)
	}
	if ifMatch != nil && (!exists || !ifMatch.Holds(live, cur.Version)) {
		have := "no live version"
		if live {
			have = fmt.Sprintf("version %d", cur.Version)
		}
		return BatchEntry{}, false, fmt.Errorf("%w: If-Match %s, but the item has %s", fault.ErrPreconditionFailed, ifMatch, have)
	}
	if live && string(cur.FieldsSHA256) == string(p.fieldsHash) {
		return BatchEntry{Key: p.key, Version: cur.Version, Status: Unchanged}, false, nil
	}
	status, next := Created, 1
	if exists {
		next = cur.Version + 1 // after a tombstone too
	}
	if live {
		status = Updated
	}
	return BatchEntry{Key: p.key, Version: next, Status: status}, true, nil
}

func newVersion(p prepared, version int) store.NewVersion {
	t := p.fields.Trigger
	nv := store.NewVersion{
		Key: p.key, Version: version, Fields: p.fields, FieldsSHA256: p.fieldsHash, ContentSHA: p.content,
		Tokens: p.tokens, BlockTokens: p.block, TriggerKind: t.Kind(), Search: p.search,
	}
	if t.Tool != nil {
		nv.TriggerTool = *t.Tool
	}
	for _, k := range t.Keywords {
		if w := keyword.Term(k, t.Stem()); w != "" && !slices.Contains(nv.TriggerWords, w) {
			nv.TriggerWords = append(nv.TriggerWords, w)
		}
	}
	return nv
}
