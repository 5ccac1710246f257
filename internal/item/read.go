package item

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// VisibleCurrent returns the item's current version if the agent may see the
// item at all. Visibility is decided by the current version (a tombstone
// keeps its predecessor's roles), so an item hidden from a role now is hidden
// with its whole history.
func (s *Service) VisibleCurrent(ctx context.Context, agent *auth.Agent, proj, key string) (*ctxtype.Version, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	if !ValidKey(key) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	cur, err := s.store.ItemVersionCurrent(ctx, proj, key)
	if err != nil {
		return nil, notFound(err, key)
	}
	if !agent.SeesAllRoles() && !cur.Roles.Visible(agent.Role) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return cur, nil
}

// notFound names the item in a store's not-found; other errors pass.
func notFound(err error, key string) error {
	if errors.Is(err, fault.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return err
}

// Get returns the latest live version of an item, or with asOf the version
// that was latest at that recorded time. A tombstone answers ErrNotFound.
func (s *Service) Get(ctx context.Context, agent *auth.Agent, proj, key string, asOf *time.Time) (*ctxtype.Version, error) {
	cur, err := s.VisibleCurrent(ctx, agent, proj, key)
	if err != nil {
		return nil, err
	}
	v := cur
	if asOf != nil {
		v, err = s.store.ItemVersionAsOf(ctx, proj, key, *asOf)
		if err != nil {
			return nil, notFound(err, key)
		}
	}
	if v.Deleted {
		return nil, fmt.Errorf("%w: %s is deleted", ErrNotFound, key)
	}
	if !agent.SeesAllRoles() && !v.Roles.Visible(agent.Role) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return v, nil
}

// GetVersion returns version n of an item, tombstones included.
func (s *Service) GetVersion(ctx context.Context, agent *auth.Agent, proj, key string, n int) (*ctxtype.Version, error) {
	if _, err := s.VisibleCurrent(ctx, agent, proj, key); err != nil {
		return nil, err
	}
	v, err := s.store.ItemVersionGet(ctx, proj, key, n)
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("%s version %d", key, n))
	}
	if !agent.SeesAllRoles() && !v.Roles.Visible(agent.Role) {
		return nil, fmt.Errorf("%w: %s version %d", ErrNotFound, key, n)
	}
	return v, nil
}

// Page is one page of a listing; Next is empty on the last page.
type Page struct {
	Versions []*ctxtype.Version
	Next     string
}

// cursor is the opaque position of a listing; which members are set
// depends on the listing.
type cursor struct {
	Key     string   `json:"k,omitempty"`
	Rank    *float64 `json:"r,omitempty"`
	Version int      `json:"v,omitempty"`
}

func (c cursor) encode(listing string) string { return page.Encode(listing, c) }

func decodeCursor(s, listing string) (cursor, error) {
	var c cursor
	_, err := page.Decode(s, listing, &c)
	return c, err
}

// versionsListing and itemsListing name the listings a cursor belongs to:
// an item's versions; a project's items by key, or by rank for a query
// (a rank is a position only in the ranking of its own query).
func versionsListing(proj, key string) string { return page.Listing("versions", proj, key) }
func itemsListing(proj, query string) string {
	// Queries that differ only in white space rank alike.
	return page.Listing("items", proj, strings.Join(strings.Fields(query), " "))
}

// Versions lists every version of an item, oldest first.
func (s *Service) Versions(ctx context.Context, agent *auth.Agent, proj, key, cur string, limit int) (Page, error) {
	if _, err := s.VisibleCurrent(ctx, agent, proj, key); err != nil {
		return Page{}, err
	}
	c, err := decodeCursor(cur, versionsListing(proj, key))
	if err != nil {
		return Page{}, err
	}
	lp := store.ItemVersionListParams{Project: proj, Key: key, After: c.Version, SeeAll: agent.SeesAllRoles(), Role: agent.Role}
	rows, more, err := fillPage(limit, func(max int) ([]*ctxtype.Version, error) {
		lp.Max = max
		return s.store.ItemVersionList(ctx, lp)
	}, func(last *ctxtype.Version) { lp.After = last.Version }, textBytes)
	if err != nil {
		return Page{}, fmt.Errorf("list versions: %w", err)
	}
	p := Page{Versions: rows}
	if more {
		p.Next = cursor{Version: rows[len(rows)-1].Version}.encode(versionsListing(proj, key))
	}
	return p, nil
}

// ListParams filters a listing of an item's latest live versions.
type ListParams struct {
	Kind, Source string // empty: any
	Query        string // PostgreSQL full-text query; orders by rank, then key
	Cursor       string
	Limit        int
}

// List returns the latest live versions the agent may see, by key, or by
// full-text rank then key when a query is given.
func (s *Service) List(ctx context.Context, agent *auth.Agent, proj string, p ListParams) (Page, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return Page{}, err
	}
	var errs validation.List
	if p.Kind != "" && !ValidKind(p.Kind) {
		errs.Add("kind", "enum", "kind must be one of knowledge, state, episode, skill, decision, instruction, evidence, tool")
	}
	if p.Source != "" && !ValidSource(p.Source) {
		errs.Add("source", "enum", "source must be one of the seed vocabulary or other:<tag>")
	}
	if err := errs.Err(); err != nil {
		return Page{}, err
	}
	c, err := decodeCursor(p.Cursor, itemsListing(proj, p.Query))
	if err != nil {
		return Page{}, err
	}
	lp := store.ItemListParams{
		Project: proj, Kind: p.Kind, Source: p.Source, SeeAll: agent.SeesAllRoles(), Role: agent.Role,
		AfterKey: c.Key, Query: p.Query,
	}
	var page Page
	if p.Query == "" {
		rows, more, err := fillPage(p.Limit, func(max int) ([]*ctxtype.Version, error) {
			lp.Max = max
			return s.store.ItemList(ctx, lp)
		}, func(last *ctxtype.Version) { lp.AfterKey = last.Key }, textBytes)
		if err != nil {
			return Page{}, fmt.Errorf("list items: %w", err)
		}
		page.Versions = rows
		if more {
			page.Next = cursor{Key: rows[len(rows)-1].Key}.encode(itemsListing(proj, p.Query))
		}
		return page, nil
	}
	if c.Rank != nil {
		lp.HasCursor, lp.AfterRank = true, *c.Rank
	}
	rows, more, err := fillPage(p.Limit, func(max int) ([]store.RankedVersion, error) {
		lp.Max = max
		return s.store.ItemSearch(ctx, lp)
	}, func(last store.RankedVersion) { lp.HasCursor, lp.AfterKey, lp.AfterRank = true, last.Key, last.Rank },
		func(r store.RankedVersion) int { return textBytes(r.Version) })
	if err != nil {
		return Page{}, fmt.Errorf("search items: %w", err)
	}
	for _, r := range rows {
		page.Versions = append(page.Versions, r.Version)
	}
	if more {
		last := rows[len(rows)-1]
		page.Next = cursor{Key: last.Key, Rank: &last.Rank}.encode(itemsListing(proj, p.Query))
	}
	return page, nil
}

// A page of a listing holds at most MaxPageBytes of item text (content,
// title and summary) beyond its first item, so that an answer, and what a
// slow reader pins, stays bounded whatever the limit: 1,000 items of 1 MiB
// would otherwise be a gigabyte. The rows are read pageChunk at a time.
const (
	MaxPageBytes = 8 << 20
	pageChunk    = 64
)

// textBytes is what a version weighs in a page.
func textBytes(v *ctxtype.Version) int { return len(v.Content) + len(v.Title) + len(v.Summary) }

// fillPage reads up to limit rows in chunks (fetch(max) returns the next
// rows after the position advance last moved to), stopping early once the
// page holds MaxPageBytes by size; more reports whether rows remain after
// it.
func fillPage[R any](limit int, fetch func(max int) ([]R, error), advance func(last R), size func(R) int) (rows []R, more bool, err error) {
	bytes := 0
	for len(rows) < limit {
		want := min(limit-len(rows), pageChunk)
		got, err := fetch(want + 1)
		if err != nil {
			return nil, false, err
		}
		for i, r := range got {
			if i == want {
				break
			}
			if len(rows) > 0 && bytes >= MaxPageBytes {
				return rows, true, nil
			}
			rows = append(rows, r)
			bytes += size(r)
		}
		if len(got) <= want {
			return rows, false, nil
		}
		advance(rows[len(rows)-1])
	}
	return rows, true, nil
}

// CurrentMany is the live current versions of keys the caller may see, by
// key, in one read: a key missing, tombstoned or hidden from the caller is
// absent, as Get would answer it not found.
func (s *Service) CurrentMany(ctx context.Context, agent *auth.Agent, proj string, keys []string) (map[string]*ctxtype.Version, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	rows, err := s.store.ItemVersionCurrentMany(ctx, proj, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*ctxtype.Version, len(rows))
	for k, r := range rows {
		if !r.Deleted && (agent.SeesAllRoles() || r.Roles.Visible(agent.Role)) {
			out[k] = r.Version
		}
	}
	return out, nil
}
