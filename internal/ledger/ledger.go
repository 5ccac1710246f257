// Package ledger answers, per item, what it cost and what it earned
// (issue 36): how often it was offered to a packet, included, excluded and
// why, the tokens it spent, the outcomes of the packets that included it,
// how often their answers used it, and its earn rate; and a project's
// items ordered by those figures (what is in most failures, what costs
// tokens, what answers never use).
//
// The figures are counters (migration 00034), so an answer reads a page.
// A packet's and an outcome's insert queue them for the counters, and the
// counters are folded from the queue: by Run in the background, and by
// every read first for its project (under the project's fold lock, so
// that a read counts every packet and outcome committed before it). A read
// folds at most ReadFoldMax of them; more (after a bulk import, with no
// server running its fold) are left to the background, and the answer
// says how many wait in pending.
package ledger

import (
	"context"
	"log/slog"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// The fold's bounds: FoldBatch packets and outcomes per statement (a
// packet has a record per candidate, ~80 by default), ReadFoldMax per
// read before it answers.
const (
	FoldBatch   = 250
	ReadFoldMax = 2000
)

// The pages' sizes: the versions of an item, and the items of a project.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Sorts are the project ledger's orders, the default first.
var Sorts = []string{string(store.LedgerByFailureRate), string(store.LedgerByTokens), string(store.LedgerByUnused)}

// Service reads the ledger and folds its queue.
type Service struct {
	store    *store.Store
	projects *project.Service
	items    *item.Service
}

// NewService returns the ledger over st.
func NewService(st *store.Store, projects *project.Service, items *item.Service) *Service {
	return &Service{store: st, projects: projects, items: items}
}

// Item is one item's ledger in one project's packets: its figures over
// every version and a page of them per version.
type Item struct {
	// Project is the packets' project; ItemProject the item's (the same,
	// or _shared).
	Project, ItemProject, Key string
	Totals                    store.LedgerFigures
	Versions                  []store.LedgerVersion
	Next                      string
	// Pending is how many packets and outcomes of the project were not
	// yet folded when the figures were read (0 but after a bulk import).
	Pending int64
}

// ItemParams choose the page: Project names the packets' project for a
// _shared item (as the reverse lookup's ?project=).
type ItemParams struct {
	Project, Cursor string
	Limit           int
}

// Item is the ledger of item key of proj, as the caller may see it: an
// item hidden from the caller's role does not exist for it (404).
func (s *Service) Item(ctx context.Context, agent *auth.Agent, proj, key string, p ItemParams) (Item, error) {
	if _, err := s.items.VisibleCurrent(ctx, agent, proj, key); err != nil {
		return Item{}, err
	}
	of, err := s.projects.PacketsProject(ctx, agent, proj, p.Project)
	if err != nil {
		return Item{}, err
	}
	listing := page.Listing("ledger", of, proj, key)
	var after struct{ Version int }
	if _, err := page.Decode(p.Cursor, listing, &after); err != nil {
		return Item{}, err
	}
	limit := pageLimit(p.Limit)
	out := Item{Project: of, ItemProject: proj, Key: key, Totals: store.LedgerFigures{ExcludedBy: map[string]int64{}}}
	if out.Pending, err = s.catchUp(ctx, of); err != nil {
		return Item{}, err
	}
	var rows []store.LedgerVersion
	err = s.store.Snapshot(ctx, func(tx *store.Tx) error {
		return tx.Reads(ctx,
			func(db store.DB) (err error) {
				if lf, ok, err := db.LedgerItem(ctx, of, proj, key); ok {
					out.Totals = lf
				} else if err != nil {
					return err
				}
				return nil
			},
			func(db store.DB) (err error) {
				rows, err = db.LedgerItemVersions(ctx, of, proj, key, after.Version, limit+1)
				return err
			})
	})
	if err != nil {
		return Item{}, err
	}
	if len(rows) > limit {
		rows = rows[:limit]
		out.Next = page.Encode(listing, struct{ Version int }{rows[limit-1].Version})
	}
	out.Versions = rows
	return out, nil
}

// List is a page of a project's ledger.
type List struct {
	Project string
	Sort    string
	Entries []store.LedgerEntry
	Next    string
	Pending int64
}

// ListParams choose the order (Sorts; "" for the first) and the page.
type ListParams struct {
	Sort, Cursor string
	Limit        int
}

// List is a page of the items of proj's packets in an order of the
// ledger, the items the caller's role may not see left out.
func (s *Service) List(ctx context.Context, agent *auth.Agent, proj string, p ListParams) (List, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return List{}, err
	}
	if proj == ctxtype.SharedProject {
		return List{}, validation.One("project", "invalid", "no packets are assembled in _shared: ask the ledger of a project whose packets used its items")
	}
	if p.Sort == "" {
		p.Sort = Sorts[0]
	}
	if !validation.OneOf(p.Sort, Sorts...) {
		return List{}, validation.One("sort", "enum", "sort must be failure_rate, tokens or unused, not %s", validation.QuoteShort(p.Sort))
	}
	listing := page.Listing("ledger", proj, p.Sort, agent.Role)
	var after store.LedgerAfter
	has, err := page.Decode(p.Cursor, listing, &after)
	if err != nil {
		return List{}, err
	}
	limit := pageLimit(p.Limit)
	out := List{Project: proj, Sort: p.Sort}
	if out.Pending, err = s.catchUp(ctx, proj); err != nil {
		return List{}, err
	}
	lp := store.LedgerListParams{Project: proj, Sort: store.LedgerSort(p.Sort), Role: agent.Role, SeesAll: agent.SeesAllRoles(), Max: limit + 1}
	if has {
		lp.After = &after
	}
	rows, err := s.store.LedgerList(ctx, lp)
	if err != nil {
		return List{}, err
	}
	if len(rows) > limit {
		rows = rows[:limit]
		out.Next = page.Encode(listing, rows[limit-1].After())
	}
	out.Entries = rows
	return out, nil
}

func pageLimit(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// catchUp folds the project's queue, at most ReadFoldMax, and returns how
// many packets and outcomes still wait. A queue found empty (what the
// background fold leaves) costs one probe: no lock, no transaction.
func (s *Service) catchUp(ctx context.Context, proj string) (int64, error) {
	queued, err := s.store.LedgerQueued(ctx, proj)
	if err != nil || !queued {
		return 0, err
	}
	for done := 0; done < ReadFoldMax; {
		n, err := s.store.LedgerFold(ctx, proj, FoldBatch, false)
		if err != nil {
			return 0, err
		}
		if n < FoldBatch {
			return 0, nil
		}
		done += n
	}
	return s.store.LedgerPending(ctx, proj)
}

// FoldAll folds every project's queue, skipping a project another fold
// holds, and returns how many packets and outcomes it folded.
func (s *Service) FoldAll(ctx context.Context) (int, error) {
	projects, err := s.store.LedgerQueuedProjects(ctx, 1000)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, proj := range projects {
		for {
			n, err := s.store.LedgerFold(ctx, proj, FoldBatch, true)
			total += n
			if err != nil {
				return total, err
			}
			if n < FoldBatch || ctx.Err() != nil {
				break
			}
		}
	}
	return total, nil
}

// Run folds the queue every interval until ctx ends, so that a read finds
// little to fold.
func (s *Service) Run(ctx context.Context, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := s.FoldAll(ctx); err != nil && ctx.Err() == nil {
			log.Warn("fold the item ledger", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
