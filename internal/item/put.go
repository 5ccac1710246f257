package item

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// PutOpts are the options of a single write.
type PutOpts struct {
	// IfMatch, when set, names the versions the caller believes current;
	// the write fails with fault.ErrPreconditionFailed otherwise, or if the item
	// has no live version.
	IfMatch *Precondition
	// TombstoneMetadata is the metadata a tombstone carries (default {}):
	// an import that retires an item says why in it, for why to tell.
	TombstoneMetadata json.RawMessage
}

// Precondition is a parsed If-Match: any live version ("*"), or one of
// the listed versions. Weak validators never match (RFC 9110 compares
// If-Match strongly), so they add no version.
type Precondition struct {
	Any      bool
	Versions []int
}

// Holds reports whether the precondition holds for an item whose current
// version is version (live tells whether it is not a tombstone).
func (p *Precondition) Holds(live bool, version int) bool {
	if !live {
		return false
	}
	return p.Any || slices.Contains(p.Versions, version)
}

// String is the precondition as the If-Match that made it says it:
// *, or its entity tags ("3", "4").
func (p *Precondition) String() string {
	if p.Any {
		return "*"
	}
	if len(p.Versions) == 0 {
		return "with weak tags only (a weak tag never matches a write's precondition)"
	}
	tags := make([]string, len(p.Versions))
	for i, v := range p.Versions {
		tags[i] = strconv.Quote(strconv.Itoa(v))
	}
	return strings.Join(tags, ", ")
}

// PutResult is the outcome of a single write. A write that became a
// proposal has Proposal set and Status Proposed (or Unchanged when its
// author had proposed the same already), and Version is nil.
type PutResult struct {
	Version  *ctxtype.Version
	Status   Status
	Proposal *Proposal
}

// Put writes one item. Concurrent Puts to one project share a transaction
// (see writeGroups): each is still all or nothing, and its answer is what
// it would have been alone.
func (s *Service) Put(ctx context.Context, agent *auth.Agent, proj string, in Input, opts PutOpts) (PutResult, error) {
	p, cause, err := s.preparePut(ctx, s.store.DB, agent, proj, in)
	if err != nil {
		return PutResult{}, err
	}
	if cause.cause != "" {
		var res PutResult
		err := s.store.InTx(ctx, func(tx *store.Tx) error {
			res, err = s.proposeOne(ctx, tx, agent, proj, p, cause, opts.IfMatch)
			return err
		})
		return res, err
	}
	c := &putCall{agent: agent, p: p, ifMatch: opts.IfMatch, done: make(chan struct{})}
	if err := s.groups.await(ctx, proj, c); err != nil {
		return PutResult{}, err
	}
	if c.err != nil {
		return PutResult{}, fmt.Errorf("put item %s/%s: %w", proj, in.Key, c.err)
	}
	return c.res, nil
}

// PutTx is Put inside the caller's transaction.
func (s *Service) PutTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, in Input, opts PutOpts) (PutResult, error) {
	p, cause, err := s.preparePut(ctx, tx.DB, agent, proj, in)
	if err != nil {
		return PutResult{}, err
	}
	if cause.cause != "" {
		return s.proposeOne(ctx, tx, agent, proj, p, cause, opts.IfMatch)
	}
	c := &putCall{agent: agent, p: p, ifMatch: opts.IfMatch}
	if err := s.putMany(ctx, tx, proj, []*putCall{c}); err != nil {
		return PutResult{}, fmt.Errorf("put item %s/%s: %w", proj, in.Key, err)
	}
	if c.err != nil {
		return PutResult{}, fmt.Errorf("put item %s/%s: %w", proj, in.Key, c.err)
	}
	return c.res, nil
}

// preparePut checks and prepares a single write, and says whether it
// becomes a proposal (proposalCause).
func (s *Service) preparePut(ctx context.Context, db store.DB, agent *auth.Agent, proj string, in Input) (prepared, cause, error) {
	if err := s.projects.AuthorizeIn(ctx, db, agent, proj, auth.Edit); err != nil {
		return prepared{}, cause{}, err
	}
	if !ValidKey(in.Key) {
		return prepared{}, cause{}, validation.One("key", "format", ctxtype.KeyRule)
	}
	var errs validation.List
	f := in.normalize("", &errs)
	if err := errs.Err(); err != nil {
		return prepared{}, cause{}, err
	}
	defaultAuthority(agent, &f)
	causes, err := s.proposalCauses(ctx, db, agent, proj, CauseAsked, []bool{in.Propose}, []auth.Claim{{Authority: f.Authority, Source: f.Source}})
	if err != nil {
		return prepared{}, cause{}, err
	}
	p, err := prepare(in.Key, f)
	return p, causes[0], err
}
