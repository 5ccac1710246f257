package packet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
)

// Injection is one packet that included an item.
type Injection struct {
	PacketID, Project, TargetRole, Agent, Section, Rule string
	Version                                             int
	CreatedAt                                           time.Time
}

// InjectionParams filters the reverse lookup.
type InjectionParams struct {
	// Project is the project whose packets to list: for a _shared item,
	// required when the caller may see more than one project.
	Project      string
	Version      *int
	Since, Until *time.Time
	Cursor       string
	Limit        int
}

// Injections lists every packet of one project that included an item,
// newest first: what a user needs to recall a bad fact. It reads one page
// of an index in that order, whatever the item's uses. For a _shared item
// the project is the one named, or the caller's only project; it is
// returned.
func (s *Service) Injections(ctx context.Context, agent *auth.Agent, proj, key string, ip InjectionParams) ([]Injection, string, string, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, "", "", err
	}
	if !item.ValidKey(key) {
		return nil, "", "", fmt.Errorf("%w: %s", item.ErrNotFound, key)
	}
	cur, err := s.store.ItemVersionCurrent(ctx, proj, key)
	if err != nil {
		if errors.Is(err, fault.ErrNotFound) {
			return nil, "", "", fmt.Errorf("%w: %s", item.ErrNotFound, key)
		}
		return nil, "", "", err
	}
	if !agent.SeesAllRoles() && !cur.Roles.Visible(agent.Role) {
		return nil, "", "", fmt.Errorf("%w: %s", item.ErrNotFound, key)
	}
	of, err := s.projects.PacketsProject(ctx, agent, proj, ip.Project)
	if err != nil {
		return nil, "", "", err
	}
	c, err := page.DecodeAt(ip.Cursor, injectionsListing(of, proj, key))
	if err != nil {
		return nil, "", "", err
	}
	params := store.InjectionListParams{
		Project: of, SubjectProject: proj, SubjectKey: key, Version: ip.Version, Since: ip.Since, Until: ip.Until, Max: ip.Limit + 1,
	}
	if c != nil {
		params.HasCursor, params.CursorTime, params.CursorID = true, c.T, c.ID
	}
	// The packets that used the item are history: read through the store's
	// reader (the item's current version and the grants above are not).
	var rows []store.Injection
	err = s.store.Read(ctx, func(db store.DB) error {
		var err error
		rows, err = db.InjectionList(ctx, params)
		return err
	})
	if err != nil {
		return nil, "", "", err
	}
	var out []Injection
	next := ""
	for i, r := range rows {
		if i == ip.Limit {
			last := rows[i-1]
			next = page.Encode(injectionsListing(of, proj, key), page.At{T: last.CreatedAt, ID: last.PacketID})
			break
		}
		out = append(out, Injection{PacketID: r.PacketID, Project: r.Project, TargetRole: r.TargetRole, Agent: r.CreatedBy,
			Section: r.Section, Rule: r.Rule, Version: r.SubjectVersion, CreatedAt: r.CreatedAt})
	}
	return out, next, of, nil
}
