// Package item stores context items as immutable versions. A write makes a
// new version only when something changed; concurrent writers of one key are
// serialised by a row lock on the item, so both succeed as versions n+1 and
// n+2. Deleting writes a tombstone version; history is never rewritten.
package item

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/keyword"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/token"
	"github.com/contextd/contextd/internal/validation"
)

// Errors of this package.
var (
	// ErrNotFound: no such item, no such version, a tombstone, or an item the
	// caller's role may not see (which must look the same).
	ErrNotFound = fmt.Errorf("item %w", fault.ErrNotFound)
	// ErrPreconditionFailed: If-Match named another version than the current one.
	ErrPreconditionFailed = fault.ErrPreconditionFailed
)

// MaxBatch is the most items one batch may write.
const MaxBatch = 10000

// The types of an item, from the core's leaf package.
type (
	Trigger    = ctxtype.Trigger
	Roles      = ctxtype.Roles
	Provenance = ctxtype.Provenance
	Fields     = ctxtype.Fields
	Version    = ctxtype.Version
)

// prepared is a validated write with everything computed that does not
// need the database: hashes and exact token counts.
type prepared struct {
	key        string
	fields     Fields
	fieldsHash []byte
	content    []byte // sha256
	tokens     token.Counts
	block      token.Counts // the markdown block, see render.MarkdownItemBlock
	search     *string      // the search vector, when computed ahead (store.NewVersion.Search)
}

func prepare(key string, f Fields) (prepared, error) {
	canon, err := json.Marshal(f)
	if err != nil {
		return prepared{}, fmt.Errorf("encode fields: %w", err)
	}
	fh := sha256.Sum256(canon)
	ch := sha256.Sum256([]byte(f.Content))
	counts, block, err := countContentAndBlock(f.Title, f.Content)
	if err != nil {
		return prepared{}, err
	}
	return prepared{key: key, fields: f, fieldsHash: fh[:], content: ch[:], tokens: counts, block: block}, nil
}

// countContentAndBlock counts the content and its markdown block under
// every tokenizer in one pass over the content: each line of it is counted
// once, and token.CountPieces adds the lines up with what lies between them,
// the content's "\n" or the block's lead and indented line breaks.
func countContentAndBlock(title, content string) (tokens, block token.Counts, err error) {
	pieces := render.MarkdownItemBlockPieces(title, content)
	lines := make([]string, 0, len(pieces)/2)
	for i := 1; i < len(pieces); i += 2 {
		lines = append(lines, pieces[i])
	}
	joinable := strings.Join(lines, "\n") == content // no "\r\n", no trailing line breaks
	for _, t := range []token.Tokenizer{token.O200kBase, token.Cl100kBase} {
		known := make([]int, len(pieces))
		for i := range known {
			known[i] = -1
			if i%2 == 1 {
				if known[i], err = token.Count(t, pieces[i]); err != nil {
					return tokens, block, err
				}
			}
		}
		b, err := token.CountPieces(t, pieces, known)
		if err != nil {
			return tokens, block, err
		}
		var c int
		if joinable { // the content is the lines and "\n" between them
			c, err = token.CountPieces(t, interleave(lines), interleaveKnown(known))
		} else {
			c, err = token.Count(t, content)
		}
		if err != nil {
			return tokens, block, err
		}
		if t == token.O200kBase {
			tokens.O200k, block.O200k = c, b
		} else {
			tokens.Cl100k, block.Cl100k = c, b
		}
	}
	return tokens, block, nil
}

// interleave puts "\n" between lines; interleaveKnown gives its counts
// from the block's: the lines' at the block pieces' odd indices, -1 (count
// it) for each "\n".
func interleave(lines []string) []string {
	out := make([]string, 0, 2*len(lines))
	for i, l := range lines {
		if i > 0 {
			out = append(out, "\n")
		}
		out = append(out, l)
	}
	return out
}

func interleaveKnown(blockKnown []int) []int {
	out := make([]int, 0, len(blockKnown))
	for i := 1; i < len(blockKnown); i += 2 {
		if i > 1 {
			out = append(out, -1)
		}
		out = append(out, blockKnown[i])
	}
	return out
}

// prepareAll prepares writes on workers goroutines (at least one): exact
// token counts are the costly part of a large batch, and they need no
// database.
func prepareAll(keys []string, fields []Fields, workers int) ([]prepared, error) {
	out := make([]prepared, len(keys))
	errs := make([]error, len(keys))
	workers = max(1, min(workers, len(keys)))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(keys); i += workers {
				out[i], errs[i] = prepare(keys[i], fields[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Status is what a write did to one item.
type Status string

// The outcomes of a write.
const (
	Created   Status = "created"   // the item had no live version (new, or after a tombstone)
	Updated   Status = "updated"   // a new version replaced a live one
	Unchanged Status = "unchanged" // nothing changed; no version was written
)

// Service reads and writes items.
type Service struct {
	store    *store.Store
	projects *project.Service
	groups   *writeGroups
}

// NewService returns an item service.
func NewService(st *store.Store, projects *project.Service) *Service {
	s := &Service{store: st, projects: projects}
	s.groups = newWriteGroups(s.runGroup, writeLanes)
	return s
}

// PutOpts are the options of a single write.
type PutOpts struct {
	// IfMatch, when set, names the versions the caller believes current;
	// the write fails with ErrPreconditionFailed otherwise, or if the item
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

// PutResult is the outcome of a single write.
type PutResult struct {
	Version *Version
	Status  Status
}

// Put writes one item. Concurrent Puts to one project share a transaction
// (see writeGroups): each is still all or nothing, and its answer is what
// it would have been alone.
func (s *Service) Put(ctx context.Context, agent *auth.Agent, proj string, in Input, opts PutOpts) (PutResult, error) {
	p, err := s.preparePut(ctx, s.store.DB, agent, proj, in)
	if err != nil {
		return PutResult{}, err
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
	p, err := s.preparePut(ctx, tx.DB, agent, proj, in)
	if err != nil {
		return PutResult{}, err
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

func (s *Service) preparePut(ctx context.Context, db store.DB, agent *auth.Agent, proj string, in Input) (prepared, error) {
	if err := s.projects.AuthorizeIn(ctx, db, agent, proj, auth.Edit); err != nil {
		return prepared{}, err
	}
	if !ValidKey(in.Key) {
		return prepared{}, validation.One("key", "format", ctxtype.KeyRule)
	}
	var errs validation.List
	f := in.normalize("", &errs)
	if err := errs.Err(); err != nil {
		return prepared{}, err
	}
	if err := agent.CheckAuthority([]auth.Claim{{Authority: f.Authority, Source: f.Source}}); err != nil {
		return prepared{}, err
	}
	return prepare(in.Key, f)
}

// BatchResult is the outcome of a batch write.
type BatchResult struct {
	Created, Updated, Unchanged int
	Items                       []BatchEntry
}

// BatchEntry is what a batch did to one item, in request order.
type BatchEntry struct {
	Key     string
	Version int
	Status  Status
	// Tombstoned says an import wrote the item and then tombstoned it;
	// Version is then the tombstone's.
	Tombstoned bool
}

// Batch writes up to MaxBatch items in one transaction, all or nothing. Every
// problem of every item is reported at once, by JSON Pointer.
func (s *Service) Batch(ctx context.Context, agent *auth.Agent, proj string, ins []Input) (BatchResult, error) {
	keys, fields, err := s.checkBatch(ctx, s.store.DB, agent, proj, ins)
	if err != nil {
		return BatchResult{}, err
	}
	var res BatchResult
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		res, err = s.batch(ctx, tx, agent, proj, keys, fields)
		return err
	})
	return res, err
}

// BatchTx is Batch inside the caller's transaction.
func (s *Service) BatchTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, ins []Input) (BatchResult, error) {
	keys, fields, err := s.checkBatch(ctx, tx.DB, agent, proj, ins)
	if err != nil {
		return BatchResult{}, err
	}
	return s.batch(ctx, tx, agent, proj, keys, fields)
}

// batch writes a checked batch a chunk at a time, in key order, while the
// next chunk is prepared (prepareChunks): the database writes one chunk as
// Go counts the tokens of the next and a second backend computes its search
// vectors, and the statements of a chunk's write are answered while Go
// builds the next one's rows (store.Tx.ItemVersionsAppend), so a large
// batch costs about the largest of these, not their sum. The rows of the
// whole batch are locked first, in key order, as for any write, and the
// chunks come in key order too (so the new keys' rows are made in key
// order): two batches cannot deadlock.
func (s *Service) batch(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj string, keys []string, fields []Fields) (BatchResult, error) {
	current, err := tx.ItemLockCurrent(ctx, proj, slices.Sorted(slices.Values(keys)))
	if err != nil {
		return BatchResult{}, err
	}
	done := make(chan struct{})
	defer close(done)
	out := make([]BatchEntry, len(keys))
	for c := range s.prepareChunks(ctx, keys, fields, done) {
		if c.err != nil {
			return BatchResult{}, c.err
		}
		es, err := s.writeLocked(ctx, tx, agent, proj, c.ps, current, nil)
		if err != nil {
			return BatchResult{}, fmt.Errorf("batch write to %s: %w", proj, err)
		}
		for j, e := range es {
			out[c.at[j]] = e
		}
	}
	return tally(out), nil
}

// checkBatch authorizes a batch and checks its items and the authority
// they claim: every problem of every item at once, before anything is
// written. It is the batch's keys and normalised fields.
func (s *Service) checkBatch(ctx context.Context, db store.DB, agent *auth.Agent, proj string, ins []Input) ([]string, []Fields, error) {
	if err := s.projects.AuthorizeIn(ctx, db, agent, proj, auth.Edit); err != nil {
		return nil, nil, err
	}
	keys, fields, errs := checkAll(ins, nil)
	if err := errs.Err(); err != nil {
		return nil, nil, err
	}
	claims := make([]auth.Claim, len(fields))
	for i, f := range fields {
		claims[i] = auth.Claim{Pointer: fmt.Sprintf("/items/%d", i), Authority: f.Authority, Source: f.Source}
	}
	if err := agent.CheckAuthority(claims); err != nil {
		return nil, nil, err // a batch is all or nothing: refused whole
	}
	return keys, fields, nil
}

// prepareBatch checks a batch (checkBatch) and prepares all of it.
func (s *Service) prepareBatch(ctx context.Context, db store.DB, agent *auth.Agent, proj string, ins []Input) ([]prepared, error) {
	keys, fields, err := s.checkBatch(ctx, db, agent, proj, ins)
	if err != nil {
		return nil, err
	}
	return prepareAll(keys, fields, runtime.GOMAXPROCS(0))
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
func checkAll(ins []Input, skip []bool) ([]string, []Fields, *validation.List) {
	var errs validation.List
	if len(ins) == 0 {
		errs.Add("/items", "required", "items must hold at least one item")
	}
	if len(ins) > MaxBatch {
		errs.Add("/items", "too_many", "a batch holds at most %d items, not %d", MaxBatch, len(ins))
		return nil, nil, &errs
	}
	keys := make([]string, len(ins))
	fields := make([]Fields, len(ins))
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
			return BatchEntry{}, false, fmt.Errorf("%w: If-Match %s, but the item has no live version", ErrPreconditionFailed, ifMatch)
		}
		return BatchEntry{}, false, fmt.Errorf("%w: %s", ErrNotFound, p.key)
	}
	if ifMatch != nil && (!exists || !ifMatch.Holds(live, cur.Version)) {
		have := "no live version"
		if live {
			have = fmt.Sprintf("version %d", cur.Version)
		}
		return BatchEntry{}, false, fmt.Errorf("%w: If-Match %s, but the item has %s", ErrPreconditionFailed, ifMatch, have)
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

// tombstoneHash marks a tombstone's fields; no write can produce it, so a
// write after a delete is always a new version.
var tombstoneHash = sha256.Sum256([]byte("contextd:tombstone"))

// Delete writes a tombstone version in a transaction of its own.
func (s *Service) Delete(ctx context.Context, agent *auth.Agent, proj, key string, opts PutOpts) (*Version, error) {
	var v *Version
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
func (s *Service) DeleteTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, key string, opts PutOpts) (*Version, error) {
	if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Edit); err != nil {
		return nil, err
	}
	if !ValidKey(key) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	v, err := s.tombstone(ctx, tx, agent, proj, key, opts)
	if err != nil {
		return nil, fmt.Errorf("delete item %s/%s: %w", proj, key, err)
	}
	return v, nil
}

func (s *Service) tombstone(ctx context.Context, tx *store.Tx, agent *auth.Agent, proj, key string, opts PutOpts) (*Version, error) {
	// Nothing to delete: 404, or 412 when the caller made it a
	// precondition that there is (If-Match).
	missing := func(err error) error {
		if opts.IfMatch != nil && (err == nil || errors.Is(err, fault.ErrNotFound)) {
			return fmt.Errorf("%w: If-Match %s, but the item has no live version", ErrPreconditionFailed, opts.IfMatch)
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
		return nil, fmt.Errorf("%w: If-Match %s, but the current version is %d", ErrPreconditionFailed, opts.IfMatch, cur.Version)
	}
	empty := sha256.Sum256(nil)
	f := Fields{
		Kind: cur.Kind, Source: cur.Source, Authority: cur.Authority, Confidence: cur.Confidence, Slot: cur.Slot,
		Trigger: cur.Trigger, Roles: cur.Roles, Metadata: json.RawMessage(`{}`), Provenance: Provenance{DerivedFrom: []string{}},
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
