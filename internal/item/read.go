package item

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// visibleCurrent returns the item's current version if the agent may see the
// item at all. Visibility is decided by the current version (a tombstone
// keeps its predecessor's roles), so an item hidden from a role now is hidden
// with its whole history.
func (s *Service) visibleCurrent(ctx context.Context, agent *auth.Agent, proj, key string) (*Version, error) {
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
func (s *Service) Get(ctx context.Context, agent *auth.Agent, proj, key string, asOf *time.Time) (*Version, error) {
	cur, err := s.visibleCurrent(ctx, agent, proj, key)
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
func (s *Service) GetVersion(ctx context.Context, agent *auth.Agent, proj, key string, n int) (*Version, error) {
	if _, err := s.visibleCurrent(ctx, agent, proj, key); err != nil {
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
	Versions []*Version
	Next     string
}

// cursor is the opaque position of a listing; which members are set
// depends on the listing.
type cursor struct {
	Key     string   `json:"k,omitempty"`
	Rank    *float64 `json:"r,omitempty"`
	Version int      `json:"v,omitempty"`
}

func (c cursor) encode() string { return page.Encode(c) }

func decodeCursor(s string) (cursor, error) {
	var c cursor
	_, err := page.Decode(s, &c)
	return c, err
}

// Versions lists every version of an item, oldest first.
func (s *Service) Versions(ctx context.Context, agent *auth.Agent, proj, key, cur string, limit int) (Page, error) {
	if _, err := s.visibleCurrent(ctx, agent, proj, key); err != nil {
		return Page{}, err
	}
	c, err := decodeCursor(cur)
	if err != nil {
		return Page{}, err
	}
	rows, err := s.store.ItemVersionList(ctx, store.ItemVersionListParams{
		Project: proj, Key: key, After: c.Version, Max: limit + 1, SeeAll: agent.SeesAllRoles(), Role: agent.Role,
	})
	if err != nil {
		return Page{}, fmt.Errorf("list versions: %w", err)
	}
	var p Page
	for i, r := range rows {
		if i == limit {
			p.Next = cursor{Version: rows[i-1].Version}.encode()
			break
		}
		p.Versions = append(p.Versions, r)
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
	c, err := decodeCursor(p.Cursor)
	if err != nil {
		return Page{}, err
	}
	lp := store.ItemListParams{
		Project: proj, Kind: p.Kind, Source: p.Source, SeeAll: agent.SeesAllRoles(), Role: agent.Role,
		Max: p.Limit + 1, AfterKey: c.Key, Query: p.Query,
	}
	var page Page
	if p.Query == "" {
		rows, err := s.store.ItemList(ctx, lp)
		if err != nil {
			return Page{}, fmt.Errorf("list items: %w", err)
		}
		for i, r := range rows {
			if i == p.Limit {
				page.Next = cursor{Key: rows[i-1].Key}.encode()
				break
			}
			page.Versions = append(page.Versions, r)
		}
		return page, nil
	}
	if c.Rank != nil {
		lp.HasCursor, lp.AfterRank = true, *c.Rank
	}
	rows, err := s.store.ItemSearch(ctx, lp)
	if err != nil {
		return Page{}, fmt.Errorf("search items: %w", err)
	}
	for i, r := range rows {
		if i == p.Limit {
			last := rows[i-1]
			page.Next = cursor{Key: last.Key, Rank: &last.Rank}.encode()
			break
		}
		page.Versions = append(page.Versions, r.Version)
	}
	return page, nil
}
