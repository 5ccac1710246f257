package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// LedgerFigures are an item's (or one version's) counters in one project's
// packets (migration 00034).
type LedgerFigures struct {
	// Offered counts the packets that had a record of it, Included and
	// Excluded split them, ExcludedBy by the reason of its first excluded
	// record.
	Offered, Included, Excluded int64
	ExcludedBy                  map[string]int64
	// Tokens sums its included records' tokens.
	Tokens int64
	// Successes, Failures and Partials count the outcomes of the packets
	// that included it; Answered those that carried an answer, Used those
	// whose answer used it.
	Successes, Failures, Partials, Answered, Used int64
}

// Outcomes is how many outcomes count for it.
func (f LedgerFigures) Outcomes() int64 { return f.Successes + f.Failures + f.Partials }

// Rates are its earn rate (successes per outcome) and failure rate
// (failures per outcome); ok is false without outcomes, where a rate
// means nothing.
func (f LedgerFigures) Rates() (earn, failure float64, ok bool) {
	n := f.Outcomes()
	if n == 0 {
		return 0, 0, false
	}
	return float64(f.Successes) / float64(n), float64(f.Failures) / float64(n), true
}

// LedgerVersion is one version's figures.
type LedgerVersion struct {
	Version int
	LedgerFigures
}

// LedgerEntry is one item's figures in a project's ledger: Project is the
// item's (the project's own or _shared).
type LedgerEntry struct {
	Project, Key string
	LedgerFigures
	failureOrder float64
}

// LedgerSort is an order of the project ledger.
type LedgerSort string

// The project ledger's orders: the highest failure rate first (the items
// without outcomes last), the most tokens first, the least used first.
const (
	LedgerByFailureRate LedgerSort = "failure_rate"
	LedgerByTokens      LedgerSort = "tokens"
	LedgerByUnused      LedgerSort = "unused"
)

// LedgerAfter is where a page of the project ledger resumes: the last
// entry of the page before, in the page's order.
type LedgerAfter struct {
	FailureOrder        float64
	Failures, Tokens    int64
	Used                int64
	SubjectProject, Key string
}

// After is the cursor position just past e.
func (e LedgerEntry) After() LedgerAfter {
	return LedgerAfter{FailureOrder: e.failureOrder, Failures: e.Failures, Tokens: e.Tokens, Used: e.Used, SubjectProject: e.Project, Key: e.Key}
}

// LedgerListParams choose a page of the project ledger: Role and SeesAll
// keep the items the caller's role may see (by their current version).
type LedgerListParams struct {
	Project string
	Sort    LedgerSort
	Role    string
	SeesAll bool
	After   *LedgerAfter
	Max     int
}

func figuresOf(offered, included, excluded int64, excludedBy json.RawMessage, tokens, s, f, p, a, u int64) (LedgerFigures, error) {
	lf := LedgerFigures{Offered: offered, Included: included, Excluded: excluded, Tokens: tokens,
		Successes: s, Failures: f, Partials: p, Answered: a, Used: u, ExcludedBy: map[string]int64{}}
	if err := json.Unmarshal(excludedBy, &lf.ExcludedBy); err != nil {
		return LedgerFigures{}, fmt.Errorf("decode ledger excluded_by: %w", err)
	}
	return lf, nil
}

// LedgerFold folds at most max queued packets and outcomes of a project
// into the ledger, in a transaction of its own that holds the project's
// fold lock (waiting for it, or with try giving up at once, folding
// nothing, when another fold holds it) and commits without waiting for
// its WAL to be flushed (LedgerFoldWithoutFlush says why that is safe).
// It returns how many it folded.
func (s *Store) LedgerFold(ctx context.Context, project string, max int, try bool) (folded int, err error) {
	err = s.InTx(ctx, func(tx *Tx) error {
		folded = 0
		if err := tx.Pipeline(ctx, func() error {
			if err := q.LedgerFoldWithoutFlush(ctx, tx.ex); err != nil {
				return err
			}
			if try {
				return nil
			}
			return q.LedgerLock(ctx, tx.ex, project)
		}); err != nil {
			return interpret(err)
		}
		if try {
			locked, err := q.LedgerTryLock(ctx, tx.ex, project)
			if err != nil || !locked {
				return interpret(err)
			}
		}
		row, err := q.LedgerFold(ctx, tx.ex, dbsqlc.LedgerFoldParams{Project: project, Lim: int32(max)})
		folded = int(row.Folded)
		return interpret(err)
	})
	return folded, err
}

// LedgerQueued reports whether a project has packets or outcomes waiting
// to be folded.
func (db DB) LedgerQueued(ctx context.Context, project string) (bool, error) {
	ok, err := q.LedgerQueued(ctx, db.ex, project)
	return ok, interpret(err)
}

// LedgerQueuedProjects are the projects with packets or outcomes waiting
// to be folded, at most max.
func (db DB) LedgerQueuedProjects(ctx context.Context, max int) ([]string, error) {
	ps, err := q.LedgerQueuedProjects(ctx, db.ex, int32(max))
	return ps, interpret(err)
}

// LedgerPending is how many packets and outcomes of a project wait to be
// folded.
func (db DB) LedgerPending(ctx context.Context, project string) (int64, error) {
	n, err := q.LedgerPending(ctx, db.ex, project)
	return n, interpret(err)
}

// LedgerItem is an item's figures over every version in a project's
// packets; ok is false when no packet of the project had a record of it.
func (db DB) LedgerItem(ctx context.Context, project, subjectProject, key string) (lf LedgerFigures, ok bool, err error) {
	rows, err := q.LedgerItem(ctx, db.ex, dbsqlc.LedgerItemParams{Project: project, SubjectProject: subjectProject, Key: key})
	if err != nil || len(rows) == 0 {
		return LedgerFigures{}, false, interpret(err)
	}
	r := rows[0]
	lf, err = figuresOf(r.Offered, r.Included, r.Excluded, r.ExcludedBy, r.Tokens, r.Successes, r.Failures, r.Partials, r.Answered, r.Used)
	return lf, err == nil, err
}

// LedgerItemVersions is a page of an item's figures per version after
// afterVersion, oldest first.
func (db DB) LedgerItemVersions(ctx context.Context, project, subjectProject, key string, afterVersion, max int) ([]LedgerVersion, error) {
	rows, err := q.LedgerItemVersions(ctx, db.ex, dbsqlc.LedgerItemVersionsParams{Project: project, SubjectProject: subjectProject,
		Key: key, AfterVersion: int32(afterVersion), Lim: int32(max)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]LedgerVersion, len(rows))
	for i, r := range rows {
		lf, err := figuresOf(r.Offered, r.Included, r.Excluded, r.ExcludedBy, r.Tokens, r.Successes, r.Failures, r.Partials, r.Answered, r.Used)
		if err != nil {
			return nil, err
		}
		out[i] = LedgerVersion{Version: int(r.Version), LedgerFigures: lf}
	}
	return out, nil
}

// LedgerList is a page of a project's ledger in one of its orders, read
// from the order's index.
func (db DB) LedgerList(ctx context.Context, p LedgerListParams) ([]LedgerEntry, error) {
	var a LedgerAfter
	if p.After != nil {
		a = *p.After
	}
	has, lim := p.After != nil, int32(p.Max)
	var rows []dbsqlc.LedgerByFailureRow
	var err error
	switch p.Sort {
	case LedgerByFailureRate:
		rows, err = q.LedgerByFailure(ctx, db.ex, dbsqlc.LedgerByFailureParams{Project: p.Project, SeesAll: p.SeesAll, Role: p.Role,
			HasCursor: has, CursorOrder: a.FailureOrder, CursorN: -a.Failures, CursorProject: a.SubjectProject, CursorKey: a.Key, Lim: lim})
	case LedgerByTokens:
		var rs []dbsqlc.LedgerByTokensRow
		rs, err = q.LedgerByTokens(ctx, db.ex, dbsqlc.LedgerByTokensParams{Project: p.Project, SeesAll: p.SeesAll, Role: p.Role,
			HasCursor: has, CursorN: -a.Tokens, CursorProject: a.SubjectProject, CursorKey: a.Key, Lim: lim})
		for _, r := range rs {
			rows = append(rows, dbsqlc.LedgerByFailureRow(r))
		}
	case LedgerByUnused:
		var rs []dbsqlc.LedgerByUnusedRow
		rs, err = q.LedgerByUnused(ctx, db.ex, dbsqlc.LedgerByUnusedParams{Project: p.Project, SeesAll: p.SeesAll, Role: p.Role,
			HasCursor: has, CursorUsed: a.Used, CursorN: -a.Tokens, CursorProject: a.SubjectProject, CursorKey: a.Key, Lim: lim})
		for _, r := range rs {
			rows = append(rows, dbsqlc.LedgerByFailureRow(r))
		}
	default:
		return nil, fmt.Errorf("ledger: unknown sort %q", p.Sort)
	}
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]LedgerEntry, len(rows))
	for i, r := range rows {
		lf, err := figuresOf(r.Offered, r.Included, r.Excluded, r.ExcludedBy, r.Tokens, r.Successes, r.Failures, r.Partials, r.Answered, r.Used)
		if err != nil {
			return nil, err
		}
		out[i] = LedgerEntry{Project: r.SubjectProject, Key: r.Key, LedgerFigures: lf, failureOrder: deref0(r.FailureOrder)}
	}
	return out, nil
}

func deref0(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}
