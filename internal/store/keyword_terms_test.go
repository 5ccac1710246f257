package store_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/store"
)

// TestKeywordTermsAreTheTriggers: the keyword lane takes its members and
// their order from item_keyword_terms (00038), so only its trigger, as the
// owner, writes it. Run as a login of contextd_app, as serve's: the write
// path keeps the table (a new version, roles, a deletion); the login may
// read it but not insert, update, delete or truncate; and moving an item
// row to other keywords through the columns the login may write rewrites
// its rows as the trigger derives them, nothing else. audit verify, which
// derives the rows again from the item rows, finds them right.
func TestKeywordTermsAreTheTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner, appURL, st := asServerLogin(t)
	a, admin := withAcme(t, st)
	kw := func(words ...string) *ctxtype.Trigger { return &ctxtype.Trigger{Keywords: words} }
	_, err := a.Items.Batch(ctx, admin, "acme", []item.Input{
		{Key: "refunds", Content: "Refunds need a manager.", Trigger: kw("refund", "Chargeback")},
		{Key: "phrase", Content: "Late orders.", Trigger: kw("late order")},
		{Key: "always", Content: "Always here."},
	})
	require.NoError(t, err)
	terms := func() map[string][]string {
		rows, err := owner.Query(ctx, `SELECT key, term, plain FROM item_keyword_terms WHERE project = 'acme' ORDER BY key, term`)
		require.NoError(t, err)
		defer rows.Close()
		out := map[string][]string{}
		for rows.Next() {
			var key, term string
			var plain bool
			require.NoError(t, rows.Scan(&key, &term, &plain))
			if plain {
				term += " plain"
			}
			out[key] = append(out[key], term)
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Equal(t, map[string][]string{
		"refunds": {"acme\x1fchargeback plain", "acme\x1frefund plain"},
		"phrase":  {"acme\x1flate"},
	}, terms())

	_, err = a.Items.Batch(ctx, admin, "acme", []item.Input{
		{Key: "refunds", Content: "Refunds need a manager.", Trigger: kw("refund"), Roles: &ctxtype.Roles{HiddenFrom: []string{"support"}}}})
	require.NoError(t, err)
	_, err = a.Items.Delete(ctx, admin, "acme", "phrase", item.PutOpts{})
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"refunds": {"acme\x1frefund"}}, terms(), "a new version, roles and a deletion")
	// A row that is not plain carries what the lane judges it by (00040),
	// so the lane reads no item row.
	var judged string
	require.NoError(t, owner.QueryRow(ctx, `SELECT hidden_from::text || ' ' || visible_to::text || ' ' || trigger_keywords::text || ' ' || trigger_match
		FROM item_keyword_terms WHERE project = 'acme' AND key = 'refunds'`).Scan(&judged))
	require.Equal(t, "{support} {} {refund} word", judged)
	res, err := a.Evidence.Verify(ctx, admin, "acme")
	require.NoError(t, err)
	require.Nil(t, res.Problem, "audit verify derives the same rows from the item rows")

	login, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(login.Close)
	var n int
	require.NoError(t, login.QueryRow(ctx, "SELECT count(*) FROM item_keyword_terms WHERE project = 'acme'").Scan(&n))
	require.Equal(t, 1, n, "the login reads the table")
	for _, forge := range []string{
		`INSERT INTO item_keyword_terms (project, term, key, rank_authority, rank_priority, rank_confidence, rank_time, plain)
			VALUES ('acme', 'acme' || chr(31) || 'refund', 'ghost', 9, 9, 9, 9, true)`,
		`UPDATE item_keyword_terms SET plain = true WHERE project = 'acme'`,
		`UPDATE item_keyword_terms SET rank_authority = 9 WHERE project = 'acme'`,
		`UPDATE item_keyword_terms SET hidden_from = '{}' WHERE project = 'acme'`,
		`DELETE FROM item_keyword_terms WHERE project = 'acme'`,
		`TRUNCATE item_keyword_terms`,
	} {
		_, err = login.Exec(ctx, forge)
		require.ErrorContains(t, err, "permission denied", forge)
	}
	// What the login may write is the item row's own columns; the rows
	// follow them as the trigger derives them.
	_, err = login.Exec(ctx, `UPDATE items SET trigger_keywords = '{Deploy}', trigger_terms = ARRAY['acme' || chr(31) || 'deploy'], hidden_from = '{}'
		WHERE project = 'acme' AND key = 'refunds'`)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"refunds": {"acme\x1fdeploy plain"}}, terms())
	var nulls bool
	require.NoError(t, owner.QueryRow(ctx, `SELECT bool_and(hidden_from IS NULL AND visible_to IS NULL AND trigger_keywords IS NULL AND trigger_match IS NULL)
		FROM item_keyword_terms WHERE project = 'acme'`).Scan(&nulls))
	require.True(t, nulls, "a plain row carries nothing to judge it by")
}

// TestKeywordItemAtTheLimits: a keyword item with as many keywords and
// roles, each as long, as validation takes is written (its term rows
// carry what it is judged by, 00040, outside the primary key: an index
// row holds at most 2,704 bytes) and found by the lane with all of them.
func TestKeywordItemAtTheLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, st := asServerLogin(t)
	a, admin := withAcme(t, st)
	l := limits.Get()
	rng := rand.New(rand.NewPCG(40, 2704))
	word := func(n int) string { return letters(rng, n) }
	kws := make([]string, l.Keywords)
	for i := range kws {
		kws[i] = word(8) + " " + word(l.Keyword-9) // a phrase: never plain
	}
	roles := make([]string, l.List)
	for i := range roles {
		roles[i] = word(l.Role)
	}
	_, err := a.Items.Batch(ctx, admin, "acme", []item.Input{
		{Key: "big", Content: "At the limits.", Trigger: &ctxtype.Trigger{Keywords: kws}, Roles: &ctxtype.Roles{HiddenFrom: roles}},
	})
	require.NoError(t, err)
	var refs []store.KeywordRef
	require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) (err error) {
		refs, err = tx.BoundedKeywordRefs(ctx, "acme", []string{strings.Fields(kws[0])[0], strings.Fields(kws[63])[0]})
		return err
	}))
	require.Len(t, refs, 1, "found once by two of its terms")
	require.False(t, refs[0].Plain)
	require.Equal(t, kws, refs[0].Version.Trigger.Keywords)
	require.Equal(t, roles, refs[0].Version.Roles.HiddenFrom)
}

// letters is n random lowercase letters.
func letters(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return string(b)
}
