package packet_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
)

// keywordShape is one kind of keyword item of TestKeywordLaneCountsAsItJudges:
// its trigger, roles and window, whether it is plain in item_keyword_terms
// (00038: fires on any term it is found by, for every role, at every time)
// and whether it is a candidate for the support role on keywordMessage.
type keywordShape struct {
	name      string
	keywords  []string
	match     string
	hidden    bool
	validFrom string
	plain     bool
	candidate bool
}

// keywordMessage is what the person says: "alpha" and "gamma" adjacent,
// "beta" apart from "alpha", a word with an accent, a hyphenated word and
// the stem of "refunds".
const keywordMessage = "alpha gamma then beta and café by e-mail about my refund"

var keywordShapes = []keywordShape{
	{name: "word", keywords: []string{"alpha"}, plain: true, candidate: true},
	{name: "upper", keywords: []string{"Alpha", "zeta"}, plain: true, candidate: true},
	{name: "digits", keywords: []string{"alpha_2", "alpha"}, plain: true, candidate: true},
	{name: "phrase-apart", keywords: []string{"alpha beta"}},
	{name: "phrase-adjacent", keywords: []string{"alpha gamma"}, candidate: true},
	{name: "word-and-phrase", keywords: []string{"beta", "alpha beta"}, candidate: true},
	{name: "hidden", keywords: []string{"alpha"}, hidden: true},
	{name: "future", keywords: []string{"alpha"}, validFrom: "2100-01-01T00:00:00Z"},
	{name: "accent", keywords: []string{"café"}, candidate: true},
	{name: "hyphen", keywords: []string{"e-mail"}, candidate: true},
	{name: "stem", keywords: []string{"refunds"}, match: ctxtype.MatchStem, candidate: true},
	{name: "unsaid", keywords: []string{"omega"}, plain: true},
}

// TestKeywordLaneCountsAsItJudges: the keyword lane counts the candidates
// it never tried from item_keyword_terms, without judging a plain item
// (00038); the count must be what judging every item gives. Over keyword
// items of every shape (plain words in any case, phrases that do and do
// not fire, hidden, not yet valid, non-ASCII, hyphenated, stem-matched,
// never said) a packet with a small budget cuts the lane off: its tried
// and untried candidates add up to the candidates, a replay (which judges
// every item from the snapshot's versions) is identical, and the table
// marks plain exactly the plain shapes, also after a new version makes a
// plain item hidden and a deletion.
func TestKeywordLaneCountsAsItJudges(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("kw")
	const each = 12
	var items []spec
	candidates := 0
	for i := range each {
		for _, s := range keywordShapes {
			items = append(items, keywordItem(s, i))
			if s.candidate {
				candidates++
			}
		}
	}
	w.batch("kw", items)
	support := w.reader("support", "kw")
	req := ctxtype.Request{TargetRole: "support", TokenBudget: 500,
		History: []ctxtype.Message{{Role: "user", Author: "person", Content: keywordMessage}}}

	check := func(candidates int) {
		t.Helper()
		p := w.assemble("kw", support, req)
		require.NotNil(t, p.Cutoff, "the budget cuts the lane off")
		tried := 0
		for _, rec := range w.get("kw", w.admin, p.ID).Records {
			if rec.SubjectKind == ctxtype.SubjectItem && rec.Rank > 0 {
				tried++
			}
		}
		require.Equal(t, candidates, tried+p.Cutoff.Count, "tried %d, untried %d", tried, p.Cutoff.Count)
		rep := w.replay("kw", w.admin, p.ID)
		require.True(t, rep.Identical, "%+v", rep.Differences)
	}
	check(candidates)
	w.requirePlain("kw", func(key string) bool { return shapeOf(key).plain })

	// A plain item made hidden is no longer plain, nor a candidate; a
	// deleted one has no terms.
	hid := keywordItem(keywordShapes[0], 0)
	hid.Roles = hiddenFrom("support")
	w.put("kw", hid)
	w.del("kw", keywordItem(keywordShapes[1], 0).Key)
	check(candidates - 2)
	w.requirePlain("kw", func(key string) bool { return shapeOf(key).plain && key != hid.Key })
	var n int
	require.NoError(t, w.pool.QueryRow(t.Context(), "SELECT count(*) FROM item_keyword_terms WHERE project = 'kw' AND key = $1",
		keywordItem(keywordShapes[1], 0).Key).Scan(&n))
	require.Zero(t, n, "a deleted item's terms go")
}

// keywordItem is the i-th item of a shape, large enough that a few fill
// the budget.
func keywordItem(s keywordShape, i int) spec {
	it := spec{Key: fmt.Sprintf("%s.%02d", s.name, i), Content: fmt.Sprintf("%s fact %d: %s", s.name, i, strings.Repeat("filler words ", 10)),
		Priority: int32(i % 5), Trigger: &ctxtype.Trigger{Keywords: s.keywords, Match: s.match}, ValidFrom: s.validFrom}
	if s.hidden {
		it.Roles = hiddenFrom("support")
	}
	return it
}

func shapeOf(key string) keywordShape {
	for _, s := range keywordShapes {
		if strings.HasPrefix(key, s.name+".") {
			return s
		}
	}
	panic("no shape for " + key)
}

// requirePlain: item_keyword_terms has rows for the live keyword items of
// proj alone, each term once per item, plain exactly when want says.
func (w *world) requirePlain(proj string, want func(key string) bool) {
	w.t.Helper()
	rows, err := w.pool.Query(w.t.Context(), `
		SELECT t.key, bool_and(t.plain), bool_or(t.plain), count(*), count(DISTINCT t.term), max(cardinality(i.trigger_terms))
		FROM item_keyword_terms t JOIN items i ON i.project = t.project AND i.key = t.key AND i.live
		WHERE t.project = $1 GROUP BY t.key`, proj)
	require.NoError(w.t, err)
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var key string
		var all, any bool
		var n, terms, itemTerms int
		require.NoError(w.t, rows.Scan(&key, &all, &any, &n, &terms, &itemTerms))
		require.Equal(w.t, all, any, "%s: one plain flag for every term", key)
		require.Equal(w.t, want(key), all, "%s plain", key)
		require.Equal(w.t, itemTerms, n, "%s: a row per term of the item", key)
		require.Equal(w.t, n, terms, key)
		seen++
	}
	require.NoError(w.t, rows.Err())
	var live int
	require.NoError(w.t, w.pool.QueryRow(w.t.Context(), "SELECT count(*) FROM items WHERE project = $1 AND live AND trigger_kind = 'keywords'",
		proj).Scan(&live))
	require.Equal(w.t, live, seen, "every live keyword item has its terms")
}
