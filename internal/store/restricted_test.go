package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// TestRestrictedCountsAreTheItems: a cutoff counts the restricted items
// of the always-on and tool lanes from item_restricted (00039); for every
// cursor, role and time the counts are those of the item rows themselves
// (the partial indexes they were read from before), through new items,
// new versions that change roles, windows, rank and trigger, deletions,
// and rows that stop being restricted.
func TestRestrictedCountsAreTheItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner, _, st := asServerLogin(t)
	a, admin := withAcme(t, st)
	rng := rand.New(rand.NewPCG(34, 39))
	roles := []string{"support", "billing", "sales"}
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	input := func(i int) item.Input {
		in := item.Input{Key: fmt.Sprintf("k%03d", i), Content: fmt.Sprintf("fact %d", i), Priority: ptr(int32(rng.IntN(4)))}
		switch rng.IntN(4) {
		case 0:
			in.Trigger = &ctxtype.Trigger{Tool: ptr([]string{"lookup", "search"}[rng.IntN(2)])}
		case 1:
			in.Trigger = &ctxtype.Trigger{Keywords: []string{"refund"}}
		}
		switch rng.IntN(5) {
		case 0:
			in.Roles = &ctxtype.Roles{HiddenFrom: []string{roles[rng.IntN(3)]}}
		case 1:
			in.Roles = &ctxtype.Roles{VisibleTo: []string{roles[rng.IntN(3)]}}
		case 2:
			in.ValidFrom = ptr(base.Add(time.Duration(rng.IntN(4)) * 24 * time.Hour).Format(time.RFC3339))
		case 3:
			in.ValidUntil = ptr(base.Add(time.Duration(1+rng.IntN(4)) * 24 * time.Hour).Format(time.RFC3339))
		}
		return in
	}
	var batch []item.Input
	for i := range 120 {
		batch = append(batch, input(i))
	}
	batch = append(batch, manyRoles(rng, roles, 120, 132)...)
	_, err := a.Items.Batch(ctx, admin, "acme", batch)
	require.NoError(t, err)
	// New versions of a third, which may change every restriction.
	batch = batch[:0]
	for i := 0; i < 120; i += 3 {
		batch = append(batch, input(i))
	}
	_, err = a.Items.Batch(ctx, admin, "acme", batch)
	require.NoError(t, err)
	for i := 1; i < 120; i += 10 {
		_, err = a.Items.Delete(ctx, admin, "acme", fmt.Sprintf("k%03d", i), item.PutOpts{})
		require.NoError(t, err)
	}

	type lane struct{ tool, where string }
	lanes := []lane{{"", "trigger_kind = 'always'"}, {"lookup", "trigger_tool = 'lookup'"}, {"search", "trigger_tool = 'search'"}}
	// The cursors: the start and every live row of each lane.
	cursors := map[string][]ctxtype.RankPos{}
	for _, l := range lanes {
		cursors[l.tool] = append(cursors[l.tool], ctxtype.RankPos{Authority: -100, Priority: -1 << 62, Confidence: -100, Time: -1 << 62})
		rows, err := owner.Query(ctx, `SELECT rank_authority, rank_priority, rank_confidence, rank_time, key FROM items
			WHERE project = 'acme' AND live AND `+l.where)
		require.NoError(t, err)
		for rows.Next() {
			var p ctxtype.RankPos
			require.NoError(t, rows.Scan(&p.Authority, &p.Priority, &p.Confidence, &p.Time, &p.Key))
			cursors[l.tool] = append(cursors[l.tool], p)
		}
		require.NoError(t, rows.Err())
	}
	checked, nonzero := 0, 0
	for _, l := range lanes {
		for _, after := range cursors[l.tool] {
			for _, role := range append(roles, "nobody") {
				for day := range 6 {
					at := base.Add(time.Duration(day)*24*time.Hour - time.Hour)
					var want int
					require.NoError(t, owner.QueryRow(ctx, `SELECT count(*) FROM items
						WHERE project = 'acme' AND live AND NOT open AND `+l.where+`
						  AND (rank_authority, rank_priority, rank_confidence, rank_time, key COLLATE "C") > ($1, $2, $3, $4, $5 COLLATE "C")
						  AND (valid_from IS NULL OR valid_from <= $6) AND (valid_until IS NULL OR valid_until > $6)
						  AND (cardinality(visible_to) = 0 OR $7 = ANY(visible_to)) AND NOT ($7 = ANY(hidden_from))`,
						after.Authority, after.Priority, after.Confidence, after.Time, after.Key, at, role).Scan(&want))
					var got int
					require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) (err error) {
						got, err = tx.BoundedCountRestricted(ctx, "acme", l.tool, after, role, at)
						return err
					}))
					require.Equal(t, want, got, "lane %q after %+v, role %s at %s", l.tool, after, role, at)
					checked++
					if want > 0 {
						nonzero++
					}
				}
			}
		}
	}
	require.Greater(t, nonzero, checked/4, "the counts compared are mostly of something")
	var outside int
	require.NoError(t, owner.QueryRow(ctx, `SELECT count(*) FROM item_restricted WHERE project = 'acme' AND visible_to IS NULL`).Scan(&outside))
	require.Positive(t, outside, "some rows have their roles on the item row alone")
}

// manyRoles is items keyed first to last-1 whose roles are too many for
// item_restricted's index entries (00041): the count reads theirs from
// the item row. Each names one of roles among 40 others.
func manyRoles(rng *rand.Rand, roles []string, first, last int) []item.Input {
	many := func(role string) []string {
		out := make([]string, 40)
		for j := range out {
			out[j] = fmt.Sprintf("%s-%054d", role, rng.IntN(1000))
		}
		return append(out, role)
	}
	var out []item.Input
	for i := first; i < last; i++ {
		in := item.Input{Key: fmt.Sprintf("k%03d", i), Content: fmt.Sprintf("fact %d", i), Priority: ptr(int32(rng.IntN(4)))}
		if i%3 == 0 {
			in.Trigger = &ctxtype.Trigger{Tool: ptr([]string{"lookup", "search"}[rng.IntN(2)])}
		}
		if i%2 == 0 {
			in.Roles = &ctxtype.Roles{VisibleTo: many(roles[rng.IntN(3)])}
		} else {
			in.Roles = &ctxtype.Roles{HiddenFrom: many(roles[rng.IntN(3)])}
		}
		out = append(out, in)
	}
	return out
}

// TestRestrictedItemsAtTheLimits: an always-on item and a tool item
// (its tool as long as validation takes, in two-byte characters) with as
// many roles, each as long, as validation takes are written (an index
// entry holds at most 2,704 bytes: their rows of item_restricted leave
// the roles to the item row, 00041), counted for the roles they name and
// not for the others, and audit verify derives the same rows. A tool one
// character longer is refused.
func TestRestrictedItemsAtTheLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner, _, st := asServerLogin(t)
	a, admin := withAcme(t, st)
	l := limits.Get()
	rng := rand.New(rand.NewPCG(41, 2704))
	word := func(n int) string { return letters(rng, n) }
	list := func(first string) []string {
		out := []string{first}
		for len(out) < l.List {
			out = append(out, word(l.Role))
		}
		return out
	}
	visible, hidden := list(strings.Repeat("v", l.Role)), list(strings.Repeat("h", l.Role))
	tool := strings.Repeat("ü", 200)
	roles := &ctxtype.Roles{VisibleTo: visible, HiddenFrom: hidden}
	_, err := a.Items.Batch(ctx, admin, "acme", []item.Input{
		{Key: "always", Content: "At the limits.", Roles: roles},
		{Key: "tool", Content: "At the limits.", Trigger: &ctxtype.Trigger{Tool: &tool}, Roles: roles},
	})
	require.NoError(t, err)
	var rows, outside int
	require.NoError(t, owner.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE visible_to IS NULL AND hidden_from IS NULL)
		FROM item_restricted WHERE project = 'acme'`).Scan(&rows, &outside))
	require.Equal(t, 2, rows)
	require.Equal(t, 2, outside, "roles this many are the item row's alone")
	start := ctxtype.RankPos{Authority: -100, Priority: -1 << 62, Confidence: -100, Time: -1 << 62}
	for _, lane := range []string{"", tool} {
		for role, want := range map[string]int{visible[0]: 1, visible[999]: 1, hidden[0]: 0, hidden[500]: 0, "nobody": 0} {
			var got int
			require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) (err error) {
				got, err = tx.BoundedCountRestricted(ctx, "acme", lane, start, role, time.Now())
				return err
			}))
			require.Equal(t, want, got, "lane %.8q, role %.8s", lane, role)
		}
	}
	res, err := a.Evidence.Verify(ctx, admin, "acme")
	require.NoError(t, err)
	require.Nil(t, res.Problem, "audit verify derives the same rows")
	// A forged copy of the roles on a row that leaves them to the item
	// row is a mismatch: the count would read it.
	_, err = owner.Exec(ctx, `UPDATE item_restricted r SET visible_to = '{}', hidden_from = '{}' WHERE project = 'acme' AND key = 'always'`)
	require.NoError(t, err)
	res, err = a.Evidence.Verify(ctx, admin, "acme")
	require.NoError(t, err)
	require.NotNil(t, res.Problem)
	require.Contains(t, res.Problem.Error(), "always")

	long := tool + "ü"
	_, err = a.Items.Batch(ctx, admin, "acme", []item.Input{{Key: "longer", Content: "x", Trigger: &ctxtype.Trigger{Tool: &long}}})
	require.ErrorContains(t, err, "at most 200 characters")
}

// TestRestrictedRowsAreTheTriggers: item_restricted (00039) gives a
// cutoff its counts, so only its trigger, as the owner, writes it. Run as
// a login of contextd_app, as serve's: the login may read it but not
// insert, update, delete or truncate; changing the item row's columns
// the login may write rewrites the rows only as the trigger derives them;
// and audit verify, which derives the rows again, finds them right, and
// finds a row the owner forged.
func TestRestrictedRowsAreTheTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner, appURL, st := asServerLogin(t)
	a, admin := withAcme(t, st)
	hidden := &ctxtype.Roles{HiddenFrom: []string{"support"}}
	_, err := a.Items.Batch(ctx, admin, "acme", []item.Input{
		{Key: "rules", Content: "Refunds need a manager.", Roles: hidden},
		{Key: "lookup", Content: "Look it up.", Trigger: &ctxtype.Trigger{Tool: ptr("lookup")}, Roles: hidden},
		{Key: "open", Content: "Always here."},
		{Key: "word", Content: "Said.", Trigger: &ctxtype.Trigger{Keywords: []string{"refund"}}, Roles: hidden},
	})
	require.NoError(t, err)
	rows := func() map[string]string {
		rs, err := owner.Query(ctx, `SELECT key, lane, hidden_from::text FROM item_restricted WHERE project = 'acme' ORDER BY key, lane`)
		require.NoError(t, err)
		defer rs.Close()
		out := map[string]string{}
		for rs.Next() {
			var key, lane, hid string
			require.NoError(t, rs.Scan(&key, &lane, &hid))
			out[key] += "[" + lane + " " + hid + "]"
		}
		require.NoError(t, rs.Err())
		return out
	}
	require.Equal(t, map[string]string{"rules": "[ {support}]", "lookup": "[lookup {support}]"}, rows())
	verify := func() *string {
		res, err := a.Evidence.Verify(ctx, admin, "acme")
		require.NoError(t, err)
		if res.Problem == nil {
			return nil
		}
		p := res.Problem.Error()
		return &p
	}
	require.Nil(t, verify(), "audit verify derives the same rows from the item rows")

	// A new version that opens one item, and a deletion.
	_, err = a.Items.Batch(ctx, admin, "acme", []item.Input{{Key: "rules", Content: "Refunds need a manager."}})
	require.NoError(t, err)
	_, err = a.Items.Delete(ctx, admin, "acme", "lookup", item.PutOpts{})
	require.NoError(t, err)
	require.Empty(t, rows(), "an open item and a deleted one have no rows")
	require.Nil(t, verify())

	login, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(login.Close)
	var n int
	require.NoError(t, login.QueryRow(ctx, "SELECT count(*) FROM item_restricted WHERE project = 'acme'").Scan(&n))
	require.Zero(t, n, "the login reads the table")
	for _, forge := range []string{
		`INSERT INTO item_restricted (project, lane, rank_authority, rank_priority, rank_confidence, rank_time, key, visible_to, hidden_from)
			VALUES ('acme', '', 0, 0, 0, 0, 'ghost', '{}', '{support}')`,
		`UPDATE item_restricted SET hidden_from = '{}' WHERE project = 'acme'`,
		`DELETE FROM item_restricted WHERE project = 'acme'`,
		`TRUNCATE item_restricted`,
	} {
		_, err = login.Exec(ctx, forge)
		require.ErrorContains(t, err, "permission denied", forge)
	}
	// A row only the owner could write: audit verify finds it.
	_, err = owner.Exec(ctx, `INSERT INTO item_restricted (project, lane, rank_authority, rank_priority, rank_confidence, rank_time, key, visible_to, hidden_from)
		SELECT project, 'ghost_tool', rank_authority, rank_priority, rank_confidence, rank_time, key, visible_to, hidden_from
		FROM items WHERE project = 'acme' AND key = 'word'`)
	require.NoError(t, err)
	p := verify()
	require.NotNil(t, p, "a forged row is a state mismatch")
	require.Contains(t, *p, "word")
	_, err = owner.Exec(ctx, `DELETE FROM item_restricted WHERE lane = 'ghost_tool'`)
	require.NoError(t, err)
	require.Nil(t, verify())

	// What the login may write is the item row's own columns; the rows
	// follow them as the trigger derives them.
	_, err = login.Exec(ctx, `UPDATE items SET open = false, visible_to = '{billing}' WHERE project = 'acme' AND key = 'open'`)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"open": "[ {}]"}, rows())
}

// TestRestrictedRolesAtTheBound: a tool item with the longest project,
// key and tool (in 4-byte characters) whose roles come to the bound
// (contextd_restricted_inline, 00041) keeps them in its row of
// item_restricted, and one a byte over leaves them to the item row; both
// are counted right, through new versions that move each across the
// bound, and audit verify derives the same rows. Migrations run again
// from 00039 (as from 00026 they may) with both written derive them so.
func TestRestrictedRolesAtTheBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	owner, _, st := asServerLoginOn(t, url)
	proj := strings.Repeat("p", 100)
	a, admin := withProject(t, st, proj)
	tool := strings.Repeat("𝄞", 200) // 800 bytes
	// 100 + 800 + 200 bytes of project, lane and key, and 15 roles of 52
	// characters at 8 bytes over each: 2,000.
	roles := func(over bool) []string {
		out := make([]string, 15)
		for i := range out {
			out[i] = fmt.Sprintf("role%048d", i)
		}
		if over {
			out[14] += "x"
		}
		return out
	}
	keyAt, keyOver := "a"+strings.Repeat("k", 199), "b"+strings.Repeat("k", 199)
	write := func(atOver, overOver bool) {
		_, err := a.Items.Batch(ctx, admin, proj, []item.Input{
			{Key: keyAt, Content: "at", Trigger: &ctxtype.Trigger{Tool: &tool}, Roles: &ctxtype.Roles{HiddenFrom: roles(atOver)}},
			{Key: keyOver, Content: "over", Trigger: &ctxtype.Trigger{Tool: &tool}, Roles: &ctxtype.Roles{HiddenFrom: roles(overOver)}},
		})
		require.NoError(t, err)
	}
	check := func(wantInline map[string]bool) {
		t.Helper()
		for key, inline := range wantInline {
			var isNull bool
			require.NoError(t, owner.QueryRow(ctx, `SELECT visible_to IS NULL AND hidden_from IS NULL FROM item_restricted WHERE project = $1 AND key = $2`,
				proj, key).Scan(&isNull))
			require.Equal(t, !inline, isNull, "%.1s: roles NULL", key)
		}
		start := ctxtype.RankPos{Authority: -100, Priority: -1 << 62, Confidence: -100, Time: -1 << 62}
		for role, want := range map[string]int{roles(false)[0]: 0, roles(false)[13]: 0, "nobody": 2} {
			var got int
			require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) (err error) {
				got, err = tx.BoundedCountRestricted(ctx, proj, tool, start, role, time.Now())
				return err
			}))
			require.Equal(t, want, got, "role %.8s", role)
		}
		res, err := a.Evidence.Verify(ctx, admin, proj)
		require.NoError(t, err)
		require.Nil(t, res.Problem, "audit verify derives the same rows")
	}
	write(false, true)
	check(map[string]bool{keyAt: true, keyOver: false})
	write(true, false)
	check(map[string]bool{keyAt: false, keyOver: true})
	write(true, true)
	check(map[string]bool{keyAt: false, keyOver: false})

	_, err := owner.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id >= 39`)
	require.NoError(t, err)
	require.NoError(t, store.MigrateUp(ctx, url), "the migrations run again")
	check(map[string]bool{keyAt: false, keyOver: false})
}
