package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
	"github.com/contextd/contextd/internal/token"
)

// narrowRow is the shape every bounded read returns: a version without its
// text, from its item row (see queries/bounded.sql). sqlc gives each query
// its own row type; they convert to this one. The trigger comes as the
// item row's columns of it (the lanes' rows have none: the lane is it).
type narrowRow struct {
	Project, Key                        string
	Version                             int32
	Kind, Source                        string
	Priority                            int32
	Authority, Confidence, StateKey     string
	ValidFrom, ValidUntil               *time.Time
	Slot                                string
	VisibleTo, HiddenFrom               []string
	Template                            bool
	ContentSha256                       []byte
	BlockTokensO200k, BlockTokensCl100k int32
	CreatedAt                           time.Time
	TriggerKind                         string
	TriggerTool                         *string
	TriggerKeywords                     []string
	TriggerMatch                        string
}

func (r narrowRow) version() *ctxtype.Version {
	v := &ctxtype.Version{
		Project: r.Project, Key: r.Key, Version: int(r.Version),
		Fields: ctxtype.Fields{
			Kind: r.Kind, Source: r.Source, Priority: int(r.Priority), Authority: r.Authority, Confidence: r.Confidence,
			StateKey: r.StateKey, ValidFrom: utc(r.ValidFrom), ValidUntil: utc(r.ValidUntil), Slot: r.Slot,
			Roles:    ctxtype.Roles{VisibleTo: nonNil(r.VisibleTo), HiddenFrom: nonNil(r.HiddenFrom)},
			Template: r.Template,
		},
		ContentSHA256: hex.EncodeToString(r.ContentSha256),
		BlockTokens:   token.Counts{O200k: int(r.BlockTokensO200k), Cl100k: int(r.BlockTokensCl100k)},
		CreatedAt:     r.CreatedAt.UTC(),
	}
	v.Trigger = triggerOf(r.TriggerKind, r.TriggerTool, r.TriggerKeywords, r.TriggerMatch)
	return v
}

// triggerOf is the trigger an item row's columns denormalise (the write
// path sets them from the version's trigger: ItemSetCurrentMany), as the
// version's JSON decodes: its one member, by trigger_kind (Trigger.Kind).
// An unknown kind is the zero trigger, which never fires.
func triggerOf(kind string, tool *string, keywords []string, match string) ctxtype.Trigger {
	switch kind {
	case "always":
		return ctxtype.Trigger{Always: true}
	case "keywords":
		return ctxtype.Trigger{Keywords: nonNil(keywords), Match: matchOf(match)}
	case "tool":
		return ctxtype.Trigger{Tool: tool}
	case "pinned_only":
		return ctxtype.Trigger{PinnedOnly: true}
	case "relevance":
		return ctxtype.Trigger{Relevance: true}
	}
	return ctxtype.Trigger{}
}

func narrowOf[R any](rows []R, conv func(R) narrowRow) []*ctxtype.Version {
	out := make([]*ctxtype.Version, len(rows))
	for i, r := range rows {
		out[i] = conv(r).version()
	}
	return out
}

// BoundedLane is the next page of a layer's always-on items (tool empty)
// or items of one tool after a rank position, in rank order, narrow.
func (db DB) BoundedLane(ctx context.Context, layer, tool string, after ctxtype.RankPos, n int) ([]*ctxtype.Version, error) {
	if tool != "" {
		rows, err := q.BoundedTool(ctx, db.ex, dbsqlc.BoundedToolParams{
			Project: layer, Tool: &tool, AfterAuthority: after.Authority, AfterPriority: after.Priority, AfterConfidence: after.Confidence,
			AfterTime: after.Time, AfterKey: after.Key, Max: int32(n),
		})
		if err != nil {
			return nil, interpret(err)
		}
		out := narrowOf(rows, func(r dbsqlc.BoundedToolRow) narrowRow { return laneRow(dbsqlc.BoundedAlwaysRow(r)) })
		for _, v := range out {
			v.Trigger = ctxtype.Trigger{Tool: &tool} // every row of this lane is of this tool
		}
		return out, nil
	}
	rows, err := q.BoundedAlways(ctx, db.ex, dbsqlc.BoundedAlwaysParams{
		Project: layer, AfterAuthority: after.Authority, AfterPriority: after.Priority, AfterConfidence: after.Confidence,
		AfterTime: after.Time, AfterKey: after.Key, Max: int32(n),
	})
	if err != nil {
		return nil, interpret(err)
	}
	out := narrowOf(rows, laneRow)
	for _, v := range out {
		v.Trigger = ctxtype.Trigger{Always: true} // every row of this lane is always-on
	}
	return out, nil
}

// BoundedToolOpenCounts is the count of open items of each tool in a layer
// (no roles, no validity window), kept by the item write path.
func (db DB) BoundedToolOpenCounts(ctx context.Context, layer string, tools []string) (map[string]int, error) {
	rows, err := q.BoundedToolOpenCounts(ctx, db.ex, dbsqlc.BoundedToolOpenCountsParams{Project: layer, Tools: tools})
	if err != nil {
		return nil, interpret(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Tool] = int(r.Open)
	}
	return out, nil
}

// laneRow is a lane's row (lane rows carry no trigger: the lane is it).
func laneRow(r dbsqlc.BoundedAlwaysRow) narrowRow {
	return narrowRow{Project: r.Project, Key: r.Key, Version: r.Version, Kind: r.Kind, Source: r.Source, Priority: r.Priority,
		Authority: r.Authority, Confidence: r.Confidence, StateKey: r.StateKey, ValidFrom: r.ValidFrom, ValidUntil: r.ValidUntil,
		Slot: r.Slot, VisibleTo: r.VisibleTo, HiddenFrom: r.HiddenFrom, Template: r.Template, ContentSha256: r.ContentSha256,
		BlockTokensO200k: r.BlockTokensO200k, BlockTokensCl100k: r.BlockTokensCl100k, CreatedAt: r.CreatedAt}
}

// KeywordRef is a keyword item as its item row holds it: enough to place
// it in rank order, tell whether it fires and whether the role sees it.
type KeywordRef struct {
	Pos ctxtype.RankPos
	// Plain marks an item that fires on any word it was found by, for
	// every role at every time (item_keyword_terms.plain: no roles, no
	// window, every keyword one ASCII word matched whole); its Version
	// carries the key alone.
	Plain bool
	// Version carries the key and, unless Plain, the trigger's keywords,
	// the roles and the validity window; nothing else.
	Version *ctxtype.Version
}

// BoundedKeywordRefs is the keyword items of a layer with a keyword that
// starts with one of the words, each once, from item_keyword_terms alone
// (00038; the rows of those that are not plain carry what they are judged
// by, 00040). The words are keyword.Term's terms: the words a person said,
// and "~" and their stems for the stem-mode items.
func (db DB) BoundedKeywordRefs(ctx context.Context, layer string, words []string) ([]KeywordRef, error) {
	// The words' terms, then the stems' (keyword.StemMark and a stem), as
	// items.trigger_terms holds them: the statement probes the stems'
	// only in a layer with a stem-mode item. (The store cannot import
	// package keyword, whose tests use the store; were the marks ever to
	// differ, stems would count as words and be probed always: slower,
	// never wrong.)
	const stemMark = "~"
	var wordTerms, stemTerms []string
	for _, w := range words {
		if strings.HasPrefix(w, stemMark) {
			stemTerms = append(stemTerms, layer+"\x1f"+w)
		} else {
			wordTerms = append(wordTerms, layer+"\x1f"+w)
		}
	}
	rows, err := q.BoundedKeywordRefs(ctx, db.ex, dbsqlc.BoundedKeywordRefsParams{
		Project: layer, Terms: append(slices.Clip(wordTerms), stemTerms...), WordTerms: nonNil(wordTerms)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]KeywordRef, 0, len(rows))
	seen := make(map[string]bool, len(rows))
	for _, r := range rows {
		if seen[r.Key] {
			// An item found by two of its terms comes twice.
			continue
		}
		seen[r.Key] = true
		ref := KeywordRef{
			Pos:     ctxtype.RankPos{Authority: r.RankAuthority, Priority: r.RankPriority, Confidence: r.RankConfidence, Time: r.RankTime, Key: r.Key},
			Plain:   r.Plain,
			Version: &ctxtype.Version{Project: layer, Key: r.Key},
		}
		if !r.Plain {
			// Its row carries what it is judged by (00040): the item
			// row's roles, window, keywords and match.
			ref.Version.Fields = ctxtype.Fields{
				Trigger:   triggerOf("keywords", nil, r.TriggerKeywords, r.TriggerMatch),
				Roles:     ctxtype.Roles{VisibleTo: nonNil(r.VisibleTo), HiddenFrom: nonNil(r.HiddenFrom)},
				ValidFrom: utc(r.ValidFrom), ValidUntil: utc(r.ValidUntil),
			}
		}
		out = append(out, ref)
	}
	return out, nil
}

// matchOf is a Trigger's Match for an item row's trigger_match ("word"
// is the default, stored in the trigger as "").
func matchOf(m string) string {
	if m == ctxtype.MatchStem {
		return m
	}
	return ""
}

// BoundedSmall is the pinned items of the layers, narrow.
func (db DB) BoundedSmall(ctx context.Context, layers, pins []string) ([]*ctxtype.Version, error) {
	if len(pins) == 0 {
		return nil, nil
	}
	rows, err := q.BoundedSmall(ctx, db.ex, dbsqlc.BoundedSmallParams{Projects: distinct(layers), Pins: distinct(pins)})
	if err != nil {
		return nil, interpret(err)
	}
	return narrowOf(rows, func(r dbsqlc.BoundedSmallRow) narrowRow { return narrowRow(r) }), nil
}

// BoundedByKeys is the live items of a layer with the keys, narrow.
func (db DB) BoundedByKeys(ctx context.Context, layer string, keys []string) ([]*ctxtype.Version, error) {
	rows, err := q.BoundedByKeys(ctx, db.ex, dbsqlc.BoundedByKeysParams{Project: layer, Keys: distinct(keys)})
	if err != nil {
		return nil, interpret(err)
	}
	return narrowOf(rows, func(r dbsqlc.BoundedByKeysRow) narrowRow { return narrowRow(r) }), nil
}

// BoundedStateGroups is every live item of the layers that claims one of
// the state keys, narrow.
func (db DB) BoundedStateGroups(ctx context.Context, layers, stateKeys []string) ([]*ctxtype.Version, error) {
	rows, err := q.BoundedStateGroups(ctx, db.ex, dbsqlc.BoundedStateGroupsParams{Projects: distinct(layers), StateKeys: distinct(stateKeys)})
	if err != nil {
		return nil, interpret(err)
	}
	return narrowOf(rows, func(r dbsqlc.BoundedStateGroupsRow) narrowRow { return narrowRow(r) }), nil
}

// distinct is ss sorted, without repeats (a new slice): the by-key reads
// probe once per element (queries/bounded.sql), so a repeated key would
// answer its row twice, where "= ANY" answered it once.
func distinct(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// VersionText is the title and content of one version.
type VersionText struct {
	Title, Content string
	Metadata       json.RawMessage
	Provenance     ctxtype.Provenance
}

// VersionRef names one version.
type VersionRef struct {
	Project, Key string
	Version      int
}

// BoundedTexts is the title and content of the versions.
func (db DB) BoundedTexts(ctx context.Context, refs []VersionRef) (map[VersionRef]VersionText, error) {
	p := dbsqlc.BoundedTextsParams{}
	for _, r := range refs {
		p.Projects = append(p.Projects, r.Project)
		p.Keys = append(p.Keys, r.Key)
		p.Versions = append(p.Versions, int32(r.Version))
	}
	rows, err := q.BoundedTexts(ctx, db.ex, p)
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[VersionRef]VersionText, len(rows))
	for _, r := range rows {
		t := VersionText{Title: r.Title, Content: r.Content, Metadata: r.Metadata}
		if err := json.Unmarshal(r.Provenance, &t.Provenance); err != nil {
			return nil, fmt.Errorf("decode provenance of %s/%s v%d: %w", r.Project, r.Key, r.Version, err)
		}
		out[VersionRef{r.Project, r.Key, int(r.Version)}] = t
	}
	return out, nil
}

// BoundedOpenCounts is each layer's count of open always-on items (no
// roles, no validity window), kept by the item write path.
func (db DB) BoundedOpenCounts(ctx context.Context, layers []string) (map[string]int, error) {
	rows, err := q.BoundedOpenCounts(ctx, db.ex, layers)
	if err != nil {
		return nil, interpret(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Project] = int(r.AlwaysOpen)
	}
	return out, nil
}

// BoundedCountRestricted counts the restricted items (with roles or a
// validity window) of a layer's always-on lane (tool empty) or of one
// tool's lane after a rank position that are valid at at and visible to
// role, from item_restricted (00039), which its trigger keeps.
func (db DB) BoundedCountRestricted(ctx context.Context, layer, tool string, after ctxtype.RankPos, role string, at time.Time) (int, error) {
	n, err := q.BoundedCountRestricted(ctx, db.ex, dbsqlc.BoundedCountRestrictedParams{
		Project: layer, Lane: tool, AfterAuthority: after.Authority, AfterPriority: after.Priority, AfterConfidence: after.Confidence,
		AfterTime: after.Time, AfterKey: after.Key, At: at, Role: role,
	})
	return int(n), interpret(err)
}

// QueryLexemes is the lexemes of a relevance query as the relevance index
// stores them, in byte order, at most max.
func (db DB) QueryLexemes(ctx context.Context, query string, max int) ([]string, error) {
	out, err := q.QueryLexemes(ctx, db.ex, dbsqlc.QueryLexemesParams{Query: query, Max: int32(max)})
	return out, interpret(err)
}

// Posting is one relevance item in the list of one lexeme of its layer.
type Posting struct {
	Layer, Lexeme, Key string
	Weight             int
}

// BoundedRelevanceParams asks for the per-lexeme relevance lists.
type BoundedRelevanceParams struct {
	Layers     []string
	Query      string
	MaxLexemes int
	At         time.Time
	Role       string
	PerLexeme  int
}

// BoundedRelevanceLists is, for each layer and each of the query's lexemes
// (at most MaxLexemes), the PerLexeme relevance items of highest weight
// valid at At and visible to Role, and the number of the query's lexemes
// (0 when no list has an item, which then does not matter).
func (db DB) BoundedRelevanceLists(ctx context.Context, p BoundedRelevanceParams) ([]Posting, int, error) {
	rows, err := q.BoundedRelevanceLists(ctx, db.ex, dbsqlc.BoundedRelevanceListsParams{
		Projects: p.Layers, Query: p.Query, MaxLexemes: int32(p.MaxLexemes), At: p.At, Role: p.Role, PerLexeme: int32(p.PerLexeme),
	})
	if err != nil {
		return nil, 0, interpret(err)
	}
	out := make([]Posting, len(rows))
	n := 0
	for i, r := range rows {
		out[i] = Posting{Layer: r.Project, Lexeme: r.Lexeme, Key: r.Key, Weight: int(r.Weight)}
		n = int(r.Lexemes)
	}
	return out, n, nil
}

// SnapshotTerms is the relevance weights of the relevance items current in
// a snapshot, by layer and key, then lexeme: of the lexemes alone (a
// query's), which are all a ranking reads.
func (db DB) SnapshotTerms(ctx context.Context, layers []string, snapshot string, lexemes []string) (map[[2]string]map[string]int, error) {
	rows, err := q.SnapshotTerms(ctx, db.ex, dbsqlc.SnapshotTermsParams{Projects: layers, Snapshot: snapshot, Lexemes: lexemes})
	if err != nil {
		return nil, interpret(err)
	}
	out := map[[2]string]map[string]int{}
	for _, r := range rows {
		k := [2]string{r.Project, r.Key}
		if out[k] == nil {
			out[k] = map[string]int{}
		}
		out[k][r.Lexeme] = int(r.Weight)
	}
	return out, nil
}
