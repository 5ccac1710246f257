package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
	"github.com/contextd/contextd/internal/token"
)

// versionOf maps a stored version; it is the one mapping, used by every
// read of versions (item endpoints, candidates, snapshots).
func versionOf(r dbsqlc.ItemVersionRow) *ctxtype.Version {
	v := &ctxtype.Version{
		Project: r.Project, Key: r.Key, Version: int(r.Version), Deleted: r.Deleted,
		Fields: ctxtype.Fields{
			Kind: r.Kind, Source: r.Source, Title: r.Title, Summary: r.Summary, Content: r.Content,
			Priority: int(r.Priority), Authority: r.Authority, Confidence: r.Confidence, StateKey: r.StateKey,
			ValidFrom: utc(r.ValidFrom), ValidUntil: utc(r.ValidUntil), Slot: r.Slot,
			Roles:    ctxtype.Roles{VisibleTo: nonNil(r.VisibleTo), HiddenFrom: nonNil(r.HiddenFrom)},
			Template: r.Template, Metadata: r.Metadata,
		},
		ContentSHA256: hex.EncodeToString(r.ContentSha256),
		Tokens:        token.Counts{O200k: int(r.TokensO200k), Cl100k: int(r.TokensCl100k)},
		BlockTokens:   token.Counts{O200k: int(r.BlockTokensO200k), Cl100k: int(r.BlockTokensCl100k)},
		CreatedAt:     r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, XactID: r.XactID,
	}
	// Both were written by the item service from these types; a decode
	// error would mean a corrupted row, and the zero value is the honest
	// answer.
	_ = json.Unmarshal(r.Trigger, &v.Trigger)
	_ = json.Unmarshal(r.Provenance, &v.Provenance)
	v.Provenance.DerivedFrom = nonNil(v.Provenance.DerivedFrom)
	return v
}

func versionsOf(rows []dbsqlc.ItemVersionRow) []*ctxtype.Version {
	out := make([]*ctxtype.Version, len(rows))
	for i, r := range rows {
		out[i] = versionOf(r)
	}
	return out
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ItemVersionCurrent is the current version of an item, tombstone or not.
func (db DB) ItemVersionCurrent(ctx context.Context, project, key string) (*ctxtype.Version, error) {
	r, err := q.ItemVersionCurrent(ctx, db.ex, dbsqlc.ItemVersionCurrentParams{Project: project, Key: key})
	if err != nil {
		return nil, interpret(err)
	}
	return versionOf(r), nil
}

// ItemVersionGet is version n of an item.
func (db DB) ItemVersionGet(ctx context.Context, project, key string, n int) (*ctxtype.Version, error) {
	r, err := q.ItemVersionGet(ctx, db.ex, dbsqlc.ItemVersionGetParams{Project: project, Key: key, Version: int32(n)})
	if err != nil {
		return nil, interpret(err)
	}
	return versionOf(r), nil
}

// ItemVersionAsOf is the version that was current at a recorded time.
func (db DB) ItemVersionAsOf(ctx context.Context, project, key string, asOf time.Time) (*ctxtype.Version, error) {
	r, err := q.ItemVersionAsOf(ctx, db.ex, dbsqlc.ItemVersionAsOfParams{Project: project, Key: key, AsOf: asOf})
	if err != nil {
		return nil, interpret(err)
	}
	return versionOf(r), nil
}

// ItemVersionListParams pages through the versions of one item.
type ItemVersionListParams struct {
	Project, Key string
	After        int // version
	Max          int
	SeeAll       bool   // admins: every version
	Role         string // otherwise only versions this role may see
}

// ItemVersionList is a page of an item's versions, oldest first.
func (db DB) ItemVersionList(ctx context.Context, p ItemVersionListParams) ([]*ctxtype.Version, error) {
	rows, err := q.ItemVersionList(ctx, db.ex, dbsqlc.ItemVersionListParams{
		Project: p.Project, Key: p.Key, After: int32(p.After), Max: int32(p.Max), SeeAll: p.SeeAll, Role: p.Role,
	})
	if err != nil {
		return nil, interpret(err)
	}
	return versionsOf(rows), nil
}

// ItemListParams pages through the latest live versions of a project.
type ItemListParams struct {
	Project      string
	Kind, Source string // empty: any
	SeeAll       bool
	Role         string
	Max          int
	AfterKey     string
	// Query, when set, searches full text and orders by rank, then key;
	// the cursor is then (AfterRank, AfterKey) when HasCursor.
	Query     string
	HasCursor bool
	AfterRank float64
}

// RankedVersion is a version with its full-text rank.
type RankedVersion struct {
	*ctxtype.Version
	Rank float64
}

// ItemList is a page of latest live versions by key.
func (db DB) ItemList(ctx context.Context, p ItemListParams) ([]*ctxtype.Version, error) {
	rows, err := q.ItemVersionListLatest(ctx, db.ex, dbsqlc.ItemVersionListLatestParams{
		Project: p.Project, AfterKey: p.AfterKey, Kind: nullable(p.Kind), Source: nullable(p.Source),
		SeeAll: p.SeeAll, Role: p.Role, Max: int32(p.Max),
	})
	if err != nil {
		return nil, interpret(err)
	}
	return versionsOf(rows), nil
}

// ItemSearch is a page of latest live versions matching p.Query, by rank.
func (db DB) ItemSearch(ctx context.Context, p ItemListParams) ([]RankedVersion, error) {
	rows, err := q.ItemVersionSearchLatest(ctx, db.ex, dbsqlc.ItemVersionSearchLatestParams{
		Project: p.Project, Q: p.Query, Kind: nullable(p.Kind), Source: nullable(p.Source),
		SeeAll: p.SeeAll, Role: p.Role, HasCursor: p.HasCursor, AfterRank: p.AfterRank, AfterKey: p.AfterKey, Max: int32(p.Max),
	})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]RankedVersion, len(rows))
	for i, r := range rows {
		out[i] = RankedVersion{Version: versionOf(r.ItemVersionRow), Rank: r.Rank}
	}
	return out, nil
}

// ItemVersionMatches reports whether a version's text matches a query.
func (db DB) ItemVersionMatches(ctx context.Context, v *ctxtype.Version, query string) (bool, error) {
	ok, err := q.ItemVersionMatches(ctx, db.ex, dbsqlc.ItemVersionMatchesParams{Project: v.Project, Key: v.Key, Version: int32(v.Version), Query: query})
	return ok, interpret(err)
}

// ItemLockCurrent locks the item rows of the keys that exist, in key
// order, so two writers cannot deadlock on them, and returns them by key; a
// key it does not return is new. A new key's row is written by
// ItemVersionsAppend; two writers creating the same key meet on the
// version's primary key, where the second waits for the first and then
// runs again (interpret).
func (tx *Tx) ItemLockCurrent(ctx context.Context, project string, keys []string) (map[string]CurrentItem, error) {
	rows, err := q.ItemLockCurrentMany(ctx, tx.ex, dbsqlc.ItemLockCurrentManyParams{Project: project, Keys: keys})
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[string]CurrentItem, len(rows))
	for _, r := range rows {
		out[r.Key] = CurrentItem{Version: int(r.CurrentVersion), Live: r.Live,
			Roles: ctxtype.Roles{VisibleTo: r.VisibleTo, HiddenFrom: r.HiddenFrom}, FieldsSHA256: r.FieldsSha256,
			Counted: countedOf(r.Live, r.Open, r.TriggerKind, r.TriggerTool), CreatedAt: rankTime(r.RankTime)}
	}
	return out, nil
}

// Retired is an item whose current version is a tombstone: that
// version's number and roles, and the fields hash of the version before it.
type Retired struct {
	Version      int
	Roles        ctxtype.Roles
	FieldsSHA256 []byte
}

// ItemRetired reads, for the keys whose current version is a tombstone
// that follows a live version, what an import of a retired item compares
// with (see the query).
func (tx *Tx) ItemRetired(ctx context.Context, project string, keys []string) (map[string]Retired, error) {
	if len(keys) == 0 {
		return map[string]Retired{}, nil
	}
	rows, err := q.ItemRetiredMany(ctx, tx.ex, dbsqlc.ItemRetiredManyParams{Project: project, Keys: keys})
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[string]Retired, len(rows))
	for _, r := range rows {
		out[r.Key] = Retired{Version: int(r.CurrentVersion), Roles: ctxtype.Roles{VisibleTo: r.VisibleTo, HiddenFrom: r.HiddenFrom}, FieldsSHA256: r.FieldsSha256}
	}
	return out, nil
}

// rankTime is the creation time of an item's current version, from the
// item row's rank_time (minus its microseconds since the epoch).
func rankTime(rt int64) time.Time { return time.UnixMicro(-rt).UTC() }

// CurrentItem is what a write compares with: the item's current version
// number, whether it is live (not a tombstone), the version's roles (a
// tombstone keeps those before it) and the hash of its fields (a write
// whose fields hash the same changes nothing).
type CurrentItem struct {
	Version      int
	Live         bool
	Roles        ctxtype.Roles
	FieldsSHA256 []byte
	Counted      Counted
	CreatedAt    time.Time // of the current version
}

// Counted is what an item adds to the derived rows of migration 00005:
// whether it is a live, open always-on item and the tool of a live, open
// tool item (the project's counters), and whether it is a live relevance
// item (its item_terms rows).
type Counted struct {
	AlwaysOpen bool
	Tool       string
	Relevance  bool
}

func countedOf(live, open bool, kind string, tool *string) Counted {
	c := Counted{AlwaysOpen: live && open && kind == "always", Relevance: live && kind == "relevance"}
	if live && open && tool != nil {
		c.Tool = *tool
	}
	return c
}

// counted is what v will add once it is current, derived as the item row's
// columns are by ItemSetCurrentMany.
func (v NewVersion) counted() Counted {
	f := v.Fields
	open := len(f.Roles.VisibleTo) == 0 && len(f.Roles.HiddenFrom) == 0 && f.ValidFrom == nil && f.ValidUntil == nil
	var tool *string
	if v.TriggerTool != "" {
		tool = &v.TriggerTool
	}
	return countedOf(!v.Deleted, open, v.TriggerKind, tool)
}

// ItemHead is an item row: its current version and what it counts for.
type ItemHead struct {
	Key            string
	CurrentVersion int
	Counted        Counted
	CreatedAt      time.Time // of the current version
}

// ItemLock locks an existing item row (fault.ErrNotFound if there is none).
func (tx *Tx) ItemLock(ctx context.Context, project, key string) (ItemHead, error) {
	r, err := q.ItemLock(ctx, tx.ex, dbsqlc.ItemLockParams{Project: project, Key: key})
	if err != nil {
		return ItemHead{}, interpret(err)
	}
	return ItemHead{Key: r.Key, CurrentVersion: int(r.CurrentVersion), Counted: countedOf(r.Live, r.Open, r.TriggerKind, r.TriggerTool),
		CreatedAt: rankTime(r.RankTime)}, nil
}

// NewVersion is one version to append, with what the item service
// computed before the transaction (hashes, exact token counts).
type NewVersion struct {
	Key       string
	Version   int
	Deleted   bool
	CreatedBy string // the writing agent's id
	// After is the creation time of the version this one follows (zero
	// for a new item): a version is written later than the one before it,
	// whatever the clocks of the processes that wrote them.
	After        time.Time
	Fields       ctxtype.Fields
	FieldsSHA256 []byte
	ContentSHA   []byte
	Tokens       token.Counts
	BlockTokens  token.Counts
	// Pointer: the denormalised trigger of the item row once this is
	// current (empty for a tombstone).
	TriggerKind, TriggerTool string
	TriggerWords             []string
	// Was is what the item counted for before this version (the zero
	// Counted for a new item).
	Was Counted
	// Search, when not nil, is the version's search vector computed ahead
	// (Store.SearchVectors); otherwise the write computes it.
	Search *string
}

// ItemVersionsAppend appends versions and writes each item's row from
// its new version, with the project's counters and head: the one write path
// of item versions, for one item or ten thousand. More than copyMin
// versions go by COPY; fewer go as one INSERT each, and then every
// statement here waits in the transaction's pipeline (Tx.Pipeline) to go in
// one round trip with the caller's next read or COMMIT. (A few single-row
// INSERTs cost less than a COPY's round trip of its own: their plans are
// generic and cached, and they ride with the other statements.)
func (tx *Tx) ItemVersionsAppend(ctx context.Context, project string, vs []NewVersion) error {
	if len(vs) == 0 {
		return nil
	}
	// In key order, as the rows were locked: two batches creating the same
	// new keys then wait for each other in one order and cannot deadlock.
	// (A version's created_at is the transaction's, tx.writeTime.)
	vs = slices.SortedFunc(slices.Values(vs), func(a, b NewVersion) int { return strings.Compare(a.Key, b.Key) })
	rows := make([]dbsqlc.ItemVersionInsertManyParams, len(vs))
	set := dbsqlc.ItemSetCurrentManyParams{Project: project}
	now := tx.writeTime()
	for i, v := range vs {
		rows[i] = insertParams(project, v)
		rows[i].CreatedAt = now
		if !now.After(v.After) {
			rows[i].CreatedAt = v.After.Add(time.Microsecond)
		}
		set.Keys = append(set.Keys, v.Key)
		set.Versions = append(set.Versions, int32(v.Version))
		set.Lives = append(set.Lives, !v.Deleted)
		set.TriggerKinds = append(set.TriggerKinds, v.TriggerKind)
		set.TriggerTools = append(set.TriggerTools, v.TriggerTool)
		set.TriggerWords = append(set.TriggerWords, joinWords(v.TriggerWords))
	}
	set.Searches = searches(vs)
	pipeline := tx.Pipeline
	if len(rows) > copyMin {
		if _, err := q.ItemVersionInsertMany(ctx, tx.ex, rows); err != nil {
			return interpret(err)
		}
		// A large write: PostgreSQL writes the rows while the caller
		// prepares its next chunk (Tx.pipelineUnread).
		pipeline = tx.pipelineUnread
	}
	return pipeline(ctx, func() error {
		for i := 0; len(rows) <= copyMin && i < len(rows); i++ {
			if err := q.ItemVersionInsert(ctx, tx.ex, dbsqlc.ItemVersionInsertParams(rows[i])); err != nil {
				return interpret(err)
			}
		}
		if err := q.ItemSetCurrentMany(ctx, tx.ex, set); err != nil {
			return interpret(err)
		}
		if err := tx.rewriteTerms(ctx, project, vs); err != nil {
			return err
		}
		if err := tx.countersAtCommit(ctx, project, vs); err != nil {
			return err
		}
		return tx.auditItemVersions(project, rows)
	})
}

// searches are the versions' search vectors computed ahead, when every
// version has one, else none (ItemSetCurrentMany computes them all).
func searches(vs []NewVersion) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if v.Search == nil {
			return nil
		}
		out = append(out, *v.Search)
	}
	return out
}

// SearchText is what a version's search vector is made of.
type SearchText struct{ Title, Summary, Content string }

// searchAcquire is how long SearchVectors waits for a connection: only a
// connection that is free, or made, at once is worth taking.
const searchAcquire = 20 * time.Millisecond

// SearchVectors is contextd_search_vector of each text, in order, in
// tsvector's text form, computed on a pooled connection of its own outside
// any transaction. PostgreSQL runs a statement on one core, so a large batch
// has the vectors of its next chunk computed on a second backend while its
// transaction's backend writes the chunk before (NewVersion.Search); the
// function is immutable, so where it runs changes nothing, and its text
// form reads back as the same vector. ok is false, with nothing computed,
// when no connection is free within searchAcquire: the write then computes
// the vectors itself, and a busy pool is never waited on by a transaction
// that holds a connection already.
func (s *Store) SearchVectors(ctx context.Context, texts []SearchText) (vecs []string, ok bool, err error) {
	if len(texts) == 0 {
		return nil, true, nil
	}
	conn, err := s.connWithin(ctx, searchAcquire)
	if err != nil {
		if ue := (*fault.UnavailableError)(nil); errors.As(err, &ue) {
			return nil, false, nil
		}
		return nil, false, err
	}
	defer conn.Release()
	p := dbsqlc.SearchVectorsParams{
		Titles: make([]string, len(texts)), Summaries: make([]string, len(texts)), Contents: make([]string, len(texts)),
	}
	for i, t := range texts {
		p.Titles[i], p.Summaries[i], p.Contents[i] = t.Title, t.Summary, t.Content
	}
	s.trips.Add(1)
	vecs, err = q.SearchVectors(ctx, conn, p)
	if err != nil {
		return nil, false, interpret(err)
	}
	if len(vecs) != len(texts) {
		return nil, false, fmt.Errorf("search vectors: %d for %d texts", len(vecs), len(texts))
	}
	return vecs, true, nil
}

// writeTime is the created_at of the item versions the transaction
// writes: the time of its first, for all of them, so that a batch written
// in chunks is one moment in the history as it is one commit (an as-of
// read never sees part of it); a version written after another of the same
// key in the transaction still comes a microsecond after it (NewVersion.After).
func (tx *Tx) writeTime() time.Time {
	if tx.tc.at.IsZero() {
		tx.tc.at = time.Now().UTC().Truncate(time.Microsecond)
	}
	return tx.tc.at
}

// rewriteTerms keeps the relevance index (item_terms) to current versions:
// the rows of every key that was a live relevance item go, and those of
// every key that now is one are derived from its version. Writes that
// touch no relevance item send neither statement.
func (tx *Tx) rewriteTerms(ctx context.Context, project string, vs []NewVersion) error {
	var was, is []string
	for _, v := range vs {
		if v.Was.Relevance {
			was = append(was, v.Key)
		}
		if v.counted().Relevance {
			is = append(is, v.Key)
		}
	}
	if len(was) > 0 {
		if err := q.ItemTermsDelete(ctx, tx.ex, dbsqlc.ItemTermsDeleteParams{Project: project, Keys: was}); err != nil {
			return interpret(err)
		}
	}
	if len(is) > 0 {
		return interpret(q.ItemTermsInsert(ctx, tx.ex, dbsqlc.ItemTermsInsertParams{Project: project, Keys: is}))
	}
	return nil
}

// countersAtCommit queues for COMMIT the moves of the project's counter of
// always-on items and of the tools' counters that vs make.
func (tx *Tx) countersAtCommit(ctx context.Context, project string, vs []NewVersion) error {
	always := int64(0)
	tools := map[string]int64{}
	for _, v := range vs {
		was, is := v.Was, v.counted()
		always += b2i(is.AlwaysOpen) - b2i(was.AlwaysOpen)
		if was.Tool != "" {
			tools[was.Tool]--
		}
		if is.Tool != "" {
			tools[is.Tool]++
		}
	}
	ex := atCommitExec{tx.tc}
	if always != 0 {
		if err := q.ProjectCountersAdd(ctx, ex, dbsqlc.ProjectCountersAddParams{Project: project, AlwaysOpen: always}); err != nil {
			return interpret(err)
		}
	}
	p := dbsqlc.ToolCountersAddParams{Project: project}
	for _, t := range slices.Sorted(maps.Keys(tools)) {
		if tools[t] != 0 {
			p.Tools, p.Deltas = append(p.Tools, t), append(p.Deltas, tools[t])
		}
	}
	if len(p.Tools) == 0 {
		return nil
	}
	return interpret(q.ToolCountersAdd(ctx, ex, p))
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func joinWords(ws []string) string { return strings.Join(ws, ",") }

// copyMin is the most versions ItemVersionsAppend writes as INSERTs in
// the pipeline; more go by COPY.
const copyMin = 32

func insertParams(project string, v NewVersion) dbsqlc.ItemVersionInsertManyParams {
	f := v.Fields
	trig, _ := json.Marshal(f.Trigger)
	prov, _ := json.Marshal(f.Provenance)
	meta := f.Metadata
	if meta == nil {
		meta = json.RawMessage(`{}`)
	}
	return dbsqlc.ItemVersionInsertManyParams{
		Project: project, Key: v.Key, Version: int32(v.Version), Deleted: v.Deleted, Kind: f.Kind, Source: f.Source,
		Title: f.Title, Summary: f.Summary, Content: f.Content, Priority: int32(f.Priority),
		Authority: f.Authority, Confidence: f.Confidence, StateKey: f.StateKey,
		ValidFrom: f.ValidFrom, ValidUntil: f.ValidUntil, Slot: f.Slot, Trigger: trig,
		VisibleTo: nonNil(f.Roles.VisibleTo), HiddenFrom: nonNil(f.Roles.HiddenFrom), Template: f.Template,
		Metadata: meta, Provenance: prov, FieldsSha256: v.FieldsSHA256,
		ContentSha256: v.ContentSHA, TokensO200k: int32(v.Tokens.O200k), TokensCl100k: int32(v.Tokens.Cl100k),
		BlockTokensO200k: int32(v.BlockTokens.O200k), BlockTokensCl100k: int32(v.BlockTokens.Cl100k),
		CreatedBy: v.CreatedBy,
	}
}

// CurrentVersion is an item's current version with the hash of its
// fields: a write whose fields hash the same changes nothing.
type CurrentVersion struct {
	*ctxtype.Version
	FieldsSHA256 []byte
}

// ItemVersionCurrentMany is the current versions of the keys that exist,
// by key.
func (db DB) ItemVersionCurrentMany(ctx context.Context, project string, keys []string) (map[string]CurrentVersion, error) {
	out := map[string]CurrentVersion{}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := q.ItemVersionCurrentMany(ctx, db.ex, dbsqlc.ItemVersionCurrentManyParams{Project: project, Keys: keys})
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		out[r.Key] = CurrentVersion{Version: versionOf(r), FieldsSHA256: r.FieldsSha256}
	}
	return out, nil
}

// KindSource is a version's kind and source.
type KindSource struct{ Kind, Source string }

// ItemVersionKindSources is the kind and source of versions of a project,
// by key and version, in one query.
func (db DB) ItemVersionKindSources(ctx context.Context, project string, keys []string, versions []int32) (map[VersionKey]KindSource, error) {
	rows, err := q.ItemVersionKindSources(ctx, db.ex, dbsqlc.ItemVersionKindSourcesParams{Project: project, Keys: keys, Versions: versions})
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[VersionKey]KindSource, len(rows))
	for _, r := range rows {
		out[VersionKey{Key: r.Key, Version: int(r.Version)}] = KindSource{Kind: r.Kind, Source: r.Source}
	}
	return out, nil
}
