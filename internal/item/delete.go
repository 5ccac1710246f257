package item

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store"
)

// tombstoneHash marks a tombstone's fields; no write can produce it, so a
// write after a delete is always a new version.
var tombstoneHash = sha256.Sum256([]byte("contextd:tombstone"))

// Delete writes a tombstone version in a transaction of its own.
func (s *Service) Delete(ctx context.Context, agent *auth.Agent, proj, key string, opts PutOpts) (*ctxtype.Version, error) {
	var v *ctxtype.Version
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		v, err = s.DeleteTx(ctx, tx, agent, proj, key, opts)
		return err
	})
	return v, err
}

// DeleteTx writes a tombstone version inside the caller's transaction. The
// tombstone keeps the roles of the version before it, so the item's
// history stays hidden from whom it was.
func (s *Service) DeleteTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, key string, opts PutOpts) (*ctxtype.Version, error) {
	if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Edit); err != nil {
		return nil, err
	}
	if !ValidKey(key) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err := s.projects.Writable(ctx, tx, proj); err != nil {
		return nil, err
	}
	v, err := s.tombstone(ctx, tx, agent, proj, key, opts)
	if err != nil {
		return nil, fmt.Errorf("delete item %s/%s: %w", proj, key, err)
	}
	return v, nil
}

func (s *Service) tombstone(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, key string, opts PutOpts) (*ctxtype.Version, error) {
	// Nothing to delete: 404, or 412 when the caller made it a
	// precondition that there is (If-Match).
	missing := func(err error) error {
		if opts.IfMatch != nil && (err == nil || errors.Is(err, fault.ErrNotFound)) {
			return fmt.Errorf("%w: If-Match %s, but the item has no live version", fault.ErrPreconditionFailed, opts.IfMatch)
		}
		if err == nil || errors.Is(err, fault.ErrNotFound) {
			err = fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return err
	}
	head, err := tx.ItemLock(ctx, proj, key)
	if err != nil {
		return nil, missing(err)
	}
	cur, err := tx.ItemVersionCurrent(ctx, proj, key)
	if err != nil {
		return nil, missing(err)
	}
	if cur.Deleted || (!agent.SeesAllRoles() && !cur.Roles.Visible(agent.Role)) {
		return nil, missing(nil)
	}
	if opts.IfMatch != nil && !opts.IfMatch.Holds(true, cur.Version) {
		return nil, fmt.Errorf("%w: If-Match %s, but the current version is %d", fault.ErrPreconditionFailed, opts.IfMatch, cur.Version)
	}
	empty := sha256.Sum256(nil)
	f := ctxtype.Fields{
		Kind: cur.Kind, Source: cur.Source, Authority: cur.Authority, Confidence: cur.Confidence, Slot: cur.Slot,
		Trigger: cur.Trigger, Roles: cur.Roles, Metadata: json.RawMessage(`{}`), Provenance: ctxtype.Provenance{DerivedFrom: []string{}},
	}
	if len(opts.TombstoneMetadata) > 0 {
		f.Metadata = opts.TombstoneMetadata
	}
	next := cur.Version + 1
	err = tx.ItemVersionsAppend(ctx, proj, []store.NewVersion{{
		Key: key, Version: next, Deleted: true, CreatedBy: agent.ID, After: head.CreatedAt, Fields: f, FieldsSHA256: tombstoneHash[:], ContentSHA: empty[:],
		Was: head.Counted,
	}})
	if err != nil {
		return nil, err
	}
	return tx.ItemVersionGet(ctx, proj, key, next)
}
