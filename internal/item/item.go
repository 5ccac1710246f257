// Package item stores context items as immutable versions. A write makes a
// new version only when something changed; concurrent writers of one key are
// serialised by a row lock on the item, so both succeed as versions n+1 and
// n+2. Deleting writes a tombstone version; history is never rewritten.
package item

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/keyword"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/dbsqlc"
	"github.com/contextd/contextd/internal/token"
	"github.com/contextd/contextd/internal/validation"
)

// Errors of this package.
var (
	// ErrNotFound: no such item, no such version, a tombstone, or an item the
	// caller's role may not see (which must look the same).
	ErrNotFound = errors.New("item not found")
	// ErrPreconditionFailed: If-Match named another version than the current one.
	ErrPreconditionFailed = errors.New("precondition failed")
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

// FromRow converts a stored version. Packet assembly loads versions with its
// own queries and converts them here, so there is one mapping.
func FromRow(r dbsqlc.ItemVersionRow) *Version {
	v := &Version{
		Project: r.Project, Key: r.Key, Version: int(r.Version), Deleted: r.Deleted,
		Fields: Fields{
			Kind: r.Kind, Source: r.Source, Title: r.Title, Summary: r.Summary, Content: r.Content,
			Priority: int(r.Priority), Authority: r.Authority, Confidence: r.Confidence, StateKey: r.StateKey,
			ValidFrom: utc(r.ValidFrom), ValidUntil: utc(r.ValidUntil), Slot: r.Slot,
			Roles:    Roles{VisibleTo: nonNil(r.VisibleTo), HiddenFrom: nonNil(r.HiddenFrom)},
			Template: r.Template, Metadata: r.Metadata,
		},
		ContentSHA256: hex.EncodeToString(r.ContentSha256),
		Tokens:        token.Counts{O200k: int(r.TokensO200k), Cl100k: int(r.TokensCl100k)},
		BlockTokens:   token.Counts{O200k: int(r.BlockTokensO200k), Cl100k: int(r.BlockTokensCl100k)},
		CreatedAt:     r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, XactID: r.XactID,
	}
	// Both were written by this package from these types; a decode error
	// would mean a corrupted row, and the zero value is the honest answer.
	_ = json.Unmarshal(r.Trigger, &v.Trigger)
	_ = json.Unmarshal(r.Provenance, &v.Provenance)
	v.Provenance.DerivedFrom = nonNil(v.Provenance.DerivedFrom)
	return v
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// prepared is a validated write with everything computed that does not
// need the database: hashes and exact token counts.
type prepared struct {
	key        string
	fields     Fields
	fieldsHash []byte
	content    []byte // sha256
	tokens     token.Counts
	trigger    []byte
	provenance []byte
	block      token.Counts // the markdown block, see render.MarkdownItemBlock
}

func prepare(key string, f Fields) (prepared, error) {
	canon, err := json.Marshal(f)
	if err != nil {
		return prepared{}, fmt.Errorf("encode fields: %w", err)
	}
	fh := sha256.Sum256(canon)
	ch := sha256.Sum256([]byte(f.Content))
	counts, err := token.CountAll(f.Content)
	if err != nil {
		return prepared{}, err
	}
	block, err := token.CountAll(render.MarkdownItemBlock(f.Title, f.Content))
	if err != nil {
		return prepared{}, err
	}
	trig, _ := json.Marshal(f.Trigger)
	prov, _ := json.Marshal(f.Provenance)
	return prepared{key: key, fields: f, fieldsHash: fh[:], content: ch[:], tokens: counts, block: block, trigger: trig, provenance: prov}, nil
}

// prepareAll prepares writes on every core: exact token counts are the
// costly part of a large batch, and they need no database.
func prepareAll(keys []string, fields []Fields) ([]prepared, error) {
	out := make([]prepared, len(keys))
	errs := make([]error, len(keys))
	workers := min(runtime.GOMAXPROCS(0), len(keys))
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
	pool     *pgxpool.Pool
	projects *project.Service
}

// NewService returns an item service.
func NewService(pool *pgxpool.Pool, projects *project.Service) *Service {
	return &Service{pool: pool, projects: projects}
}

// PutOpts are the options of a single write.
type PutOpts struct {
	// IfMatch, when set, names the versions the caller believes current;
	// the write fails with ErrPreconditionFailed otherwise, or if the item
	// has no live version.
	IfMatch *Precondition
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

func (p *Precondition) String() string {
	if p.Any {
		return "*"
	}
	return fmt.Sprint(p.Versions)
}

// PutResult is the outcome of a single write.
type PutResult struct {
	Version *Version
	Status  Status
}

// Put writes one item.
func (s *Service) Put(ctx context.Context, agent *auth.Agent, proj string, in Input, opts PutOpts) (PutResult, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.Edit); err != nil {
		return PutResult{}, err
	}
	if !ValidKey(in.Key) {
		return PutResult{}, validation.One("key", "format", "item keys match [A-Za-z0-9._:-]{1,200}")
	}
	var errs validation.List
	f := in.normalize("", &errs)
	if err := errs.Err(); err != nil {
		return PutResult{}, err
	}
	p, err := prepare(in.Key, f)
	if err != nil {
		return PutResult{}, err
	}
	var res PutResult
	err = store.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		out, err := s.write(ctx, tx, agent, proj, []prepared{p}, opts.IfMatch)
		if err != nil {
			return err
		}
		res.Status = out[0].Status
		row, err := store.Q.ItemVersionCurrent(ctx, tx, dbsqlc.ItemVersionCurrentParams{Project: proj, Key: in.Key})
		if err != nil {
			return store.Interpret(err)
		}
		res.Version = FromRow(row)
		return nil
	})
	if err != nil {
		return PutResult{}, fmt.Errorf("put item %s/%s: %w", proj, in.Key, err)
	}
	return res, nil
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
}

// Batch writes up to MaxBatch items in one transaction, all or nothing. Every
// problem of every item is reported at once, by JSON Pointer.
func (s *Service) Batch(ctx context.Context, agent *auth.Agent, proj string, ins []Input) (BatchResult, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.Edit); err != nil {
		return BatchResult{}, err
	}
	var errs validation.List
	if len(ins) == 0 {
		errs.Add("/items", "required", "items must hold at least one item")
	}
	if len(ins) > MaxBatch {
		errs.Add("/items", "range", "a batch holds at most %d items, not %d", MaxBatch, len(ins))
		return BatchResult{}, errs.Err()
	}
	keys := make([]string, len(ins))
	fields := make([]Fields, len(ins))
	seen := make(map[string]int, len(ins))
	for i := range ins {
		prefix := fmt.Sprintf("/items/%d", i)
		k := ins[i].Key
		switch {
		case !ValidKey(k):
			errs.Add(prefix+"/key", "format", "item keys match [A-Za-z0-9._:-]{1,200}")
		case seen[k] > 0:
			errs.Add(prefix+"/key", "duplicate", "key %q is also at /items/%d; a key may appear once per batch", k, seen[k]-1)
		default:
			seen[k] = i + 1
		}
		keys[i] = k
		fields[i] = ins[i].normalize(prefix, &errs)
	}
	if err := errs.Err(); err != nil {
		return BatchResult{}, err
	}
	ps, err := prepareAll(keys, fields)
	if err != nil {
		return BatchResult{}, err
	}
	var res BatchResult
	err = store.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		out, err := s.write(ctx, tx, agent, proj, ps, nil)
		if err != nil {
			return err
		}
		res = BatchResult{Items: out}
		return nil
	})
	if err != nil {
		return BatchResult{}, fmt.Errorf("batch write to %s: %w", proj, err)
	}
	for _, e := range res.Items {
		switch e.Status {
		case Created:
			res.Created++
		case Updated:
			res.Updated++
		case Unchanged:
			res.Unchanged++
		}
	}
	return res, nil
}

// write is the one write path, for one item or ten thousand: make sure every
// item row exists, lock them in key order (so two batches cannot deadlock),
// compare with the current versions, COPY the new versions, move the
// pointers. ifMatch applies to a single write only.
func (s *Service) write(ctx context.Context, tx pgx.Tx, agent *auth.Agent, proj string, ps []prepared, ifMatch *Precondition) ([]BatchEntry, error) {
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.key
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	if err := store.Q.ItemEnsureMany(ctx, tx, dbsqlc.ItemEnsureManyParams{Project: proj, Keys: sorted}); err != nil {
		return nil, store.Interpret(err)
	}
	locked, err := store.Q.ItemLockMany(ctx, tx, dbsqlc.ItemLockManyParams{Project: proj, Keys: sorted})
	if err != nil {
		return nil, store.Interpret(err)
	}
	currentVersion := make(map[string]int, len(locked))
	var existing []string
	for _, it := range locked {
		currentVersion[it.Key] = int(it.CurrentVersion)
		if it.CurrentVersion > 0 {
			existing = append(existing, it.Key)
		}
	}
	current := make(map[string]dbsqlc.ItemVersionRow, len(existing))
	if len(existing) > 0 {
		rows, err := store.Q.ItemVersionCurrentMany(ctx, tx, dbsqlc.ItemVersionCurrentManyParams{Project: proj, Keys: existing})
		if err != nil {
			return nil, store.Interpret(err)
		}
		for _, r := range rows {
			current[r.Key] = r
		}
	}
	out := make([]BatchEntry, len(ps))
	var inserts []dbsqlc.ItemVersionInsertManyParams
	var set pointerUpdate
	for i, p := range ps {
		cur, exists := current[p.key]
		live := exists && !cur.Deleted
		if exists && !agent.SeesAllRoles() && !rolesOf(cur).Visible(agent.Role) {
			// An item hidden from the caller does not exist for it, and it
			// may not be overwritten by it either; with If-Match it answers
			// as a missing item does.
			if ifMatch != nil {
				return nil, fmt.Errorf("%w: If-Match %s, but the item has no live version", ErrPreconditionFailed, ifMatch)
			}
			return nil, fmt.Errorf("%w: %s", ErrNotFound, p.key)
		}
		if ifMatch != nil && !ifMatch.Holds(live, int(cur.Version)) {
			have := "no live version"
			if live {
				have = fmt.Sprintf("version %d", cur.Version)
			}
			return nil, fmt.Errorf("%w: If-Match %s, but the item has %s", ErrPreconditionFailed, ifMatch, have)
		}
		if live && string(cur.FieldsSha256) == string(p.fieldsHash) {
			out[i] = BatchEntry{Key: p.key, Version: int(cur.Version), Status: Unchanged}
			continue
		}
		next := currentVersion[p.key] + 1
		status := Created
		if live {
			status = Updated
		}
		out[i] = BatchEntry{Key: p.key, Version: next, Status: status}
		f := p.fields
		inserts = append(inserts, dbsqlc.ItemVersionInsertManyParams{
			Project: proj, Key: p.key, Version: int32(next), Kind: f.Kind, Source: f.Source,
			Title: f.Title, Summary: f.Summary, Content: f.Content, Priority: int32(f.Priority),
			Authority: f.Authority, Confidence: f.Confidence, StateKey: f.StateKey,
			ValidFrom: f.ValidFrom, ValidUntil: f.ValidUntil, Slot: f.Slot, Trigger: p.trigger,
			VisibleTo: f.Roles.VisibleTo, HiddenFrom: f.Roles.HiddenFrom, Template: f.Template,
			Metadata: f.Metadata, Provenance: p.provenance, FieldsSha256: p.fieldsHash,
			ContentSha256: p.content, TokensO200k: int32(p.tokens.O200k), TokensCl100k: int32(p.tokens.Cl100k),
			BlockTokensO200k: int32(p.block.O200k), BlockTokensCl100k: int32(p.block.Cl100k),
			CreatedBy: agent.ID,
		})
		set.add(p.key, next, true, f.Trigger)
	}
	if len(inserts) == 0 {
		return out, nil
	}
	if _, err := store.Q.ItemVersionInsertMany(ctx, tx, inserts); err != nil {
		return nil, store.Interpret(err)
	}
	if err := store.Q.ItemSetCurrentMany(ctx, tx, set.params(proj)); err != nil {
		return nil, store.Interpret(err)
	}
	return out, nil
}

// pointerUpdate collects new current versions and their denormalised
// triggers for ItemSetCurrentMany.
type pointerUpdate struct {
	keys, kinds, tools, words []string
	versions                  []int32
	lives                     []bool
}

func (u *pointerUpdate) add(key string, version int, live bool, t Trigger) {
	kind, tool, words := "", "", ""
	if live {
		kind = t.Kind()
		if t.Tool != nil {
			tool = *t.Tool
		}
		var firsts []string
		for _, k := range t.Keywords {
			if w := keyword.First(k); w != "" && !slices.Contains(firsts, w) {
				firsts = append(firsts, w)
			}
		}
		words = strings.Join(firsts, ",")
	}
	u.keys = append(u.keys, key)
	u.versions = append(u.versions, int32(version))
	u.lives = append(u.lives, live)
	u.kinds = append(u.kinds, kind)
	u.tools = append(u.tools, tool)
	u.words = append(u.words, words)
}

func (u *pointerUpdate) params(proj string) dbsqlc.ItemSetCurrentManyParams {
	return dbsqlc.ItemSetCurrentManyParams{
		Project: proj, Keys: u.keys, Versions: u.versions, Lives: u.lives,
		TriggerKinds: u.kinds, TriggerTools: u.tools, TriggerWords: u.words,
	}
}

func rolesOf(r dbsqlc.ItemVersionRow) Roles {
	return Roles{VisibleTo: r.VisibleTo, HiddenFrom: r.HiddenFrom}
}

// tombstoneHash marks a tombstone's fields; no write can produce it, so a
// write after a delete is always a new version.
var tombstoneHash = sha256.Sum256([]byte("contextd:tombstone"))

// Delete writes a tombstone version. The tombstone keeps the roles of the
// version before it, so the item's history stays hidden from whom it was.
func (s *Service) Delete(ctx context.Context, agent *auth.Agent, proj, key string, opts PutOpts) (*Version, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.Edit); err != nil {
		return nil, err
	}
	if !ValidKey(key) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	var v *Version
	err := store.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		// Nothing to delete: 404, or 412 when the caller made it a
		// precondition that there is (If-Match).
		missing := func(err error) error {
			if opts.IfMatch != nil && (err == nil || errors.Is(err, ErrNotFound)) {
				return fmt.Errorf("%w: If-Match %s, but the item has no live version", ErrPreconditionFailed, opts.IfMatch)
			}
			if err == nil {
				err = fmt.Errorf("%w: %s", ErrNotFound, key)
			}
			return err
		}
		if _, err := store.Q.ItemLock(ctx, tx, dbsqlc.ItemLockParams{Project: proj, Key: key}); err != nil {
			return missing(notFound(err, key))
		}
		cur, err := store.Q.ItemVersionCurrent(ctx, tx, dbsqlc.ItemVersionCurrentParams{Project: proj, Key: key})
		if err != nil {
			return missing(notFound(err, key))
		}
		if cur.Deleted || (!agent.SeesAllRoles() && !rolesOf(cur).Visible(agent.Role)) {
			return missing(nil)
		}
		if opts.IfMatch != nil && !opts.IfMatch.Holds(true, int(cur.Version)) {
			return fmt.Errorf("%w: If-Match %s, but the current version is %d", ErrPreconditionFailed, opts.IfMatch, cur.Version)
		}
		empty := sha256.Sum256(nil)
		next := cur.Version + 1
		_, err = store.Q.ItemVersionInsertMany(ctx, tx, []dbsqlc.ItemVersionInsertManyParams{{
			Project: proj, Key: key, Version: next, Deleted: true, Kind: cur.Kind, Source: cur.Source,
			Authority: cur.Authority, Confidence: cur.Confidence, Slot: cur.Slot, Trigger: cur.Trigger,
			VisibleTo: cur.VisibleTo, HiddenFrom: cur.HiddenFrom, Metadata: json.RawMessage(`{}`),
			Provenance: json.RawMessage(`{"derived_from":[]}`), FieldsSha256: tombstoneHash[:],
			ContentSha256: empty[:], CreatedBy: agent.ID,
		}})
		if err != nil {
			return store.Interpret(err)
		}
		var set pointerUpdate
		set.add(key, int(next), false, Trigger{})
		if err := store.Q.ItemSetCurrentMany(ctx, tx, set.params(proj)); err != nil {
			return store.Interpret(err)
		}
		row, err := store.Q.ItemVersionGet(ctx, tx, dbsqlc.ItemVersionGetParams{Project: proj, Key: key, Version: next})
		if err != nil {
			return store.Interpret(err)
		}
		v = FromRow(row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete item %s/%s: %w", proj, key, err)
	}
	return v, nil
}

func notFound(err error, key string) error {
	if err = store.Interpret(err); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return err
}
