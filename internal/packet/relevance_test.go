package packet_test

// The relevance lane: its documented score, its top 50, and what may not
// take its places.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
)

// score parses the score out of a rule "relevance:0.42".
func score(t *testing.T, rule string) float64 {
	t.Helper()
	require.True(t, strings.HasPrefix(rule, "relevance:"), "rule %q", rule)
	v, err := strconv.ParseFloat(strings.TrimPrefix(rule, "relevance:"), 64)
	require.NoError(t, err, rule)
	return v
}

// lexemes is how many lexemes PostgreSQL's english configuration finds in
// text: the scenarios' vocabularies must stem to distinct lexemes.
func (w *world) lexemes(text string) int {
	w.t.Helper()
	var n int
	require.NoError(w.t, w.pool.QueryRow(w.t.Context(), "SELECT length(to_tsvector('english', $1))", text).Scan(&n))
	return n
}

// TestRelevanceHiddenMatchesDoNotCrowdOut: 60 items hidden from the role,
// 60 visible only to another role and 60 out of their window, all
// matching the query strongly, must not take the 50 places of a few weakly
// matching visible items; for a role that may see the strong ones, they do
// take them.
func TestRelevanceHiddenMatchesDoNotCrowdOut(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("crowd")
	var items []spec
	var keys []ikey
	var words []string
	for i := range 70 {
		words = append(words, fmt.Sprintf("kq%c%c", "bcdfghjklmnpqrstvwxz"[i/20], "bcdfghjklmnpqrstvwxz"[i%20]))
	}
	for i := range 60 {
		items = append(items,
			spec{Key: fmt.Sprintf("a.hid.%03d", i), Content: "zebra zebra zebra", Trigger: relevance(), Roles: hiddenFrom("support")},
			spec{Key: fmt.Sprintf("a.crit.%03d", i), Content: "zebra zebra zebra", Trigger: relevance(), Roles: visibleTo("critic")},
			spec{Key: fmt.Sprintf("a.exp.%03d", i), Content: "zebra zebra zebra", Trigger: relevance(), ValidUntil: past})
	}
	for i := range 5 {
		// zebra once among 64 other lexemes: weight 1000/(1+1+1) = 333.
		k := fmt.Sprintf("v.%03d", i)
		items = append(items, spec{Key: k, Content: "zebra " + strings.Join(words[:64], " "), Trigger: relevance()})
		keys = append(keys, ikey{k, "project"})
	}
	items = append(items, spec{Key: "v.window", Content: "zebra", Trigger: relevance(), ValidFrom: past})
	keys = append(keys, pk("v.window")...)
	w.batch("crowd", items)
	require.Equal(t, 65, w.lexemes("zebra "+strings.Join(words[:64], " ")), "the test's vocabulary stems to distinct lexemes")

	sup := w.reader("support", "crowd")
	for _, viewer := range []*auth.Agent{sup, w.admin} {
		p := w.assemble("crowd", viewer, ctxtype.Request{TargetRole: "support", Query: "zebra"})
		recs := w.check(p)
		res := w.whyAll(p, recs, keys, noneHidden)
		require.Equal(t, 6, res.reasons["included"], "every visible match fires")
		for i := range 5 {
			a := res.answers[ikey{fmt.Sprintf("v.%03d", i), "project"}]
			require.InDelta(t, 0.333, score(t, whyRule(a)), 0.0051, "%+v", a)
		}
		require.InDelta(t, 0.5, score(t, whyRule(res.answers[ikey{"v.window", "project"}])), 1e-9)
		require.NotContains(t, p.Rendered, "zebra zebra")
		for _, r := range recs {
			require.NotContains(t, r.SubjectKey, "a.", "no record of the hidden or expired matches: %+v", r)
		}
	}
	crit := w.reader("critic", "crowd")
	p := w.assemble("crowd", crit, ctxtype.Request{TargetRole: "critic", Query: "zebra"})
	recs := w.check(p)
	fired := map[string]bool{}
	for _, r := range recs {
		if r.SubjectKind == ctxtype.SubjectItem {
			fired[r.SubjectKey] = true
			require.InDelta(t, 0.75, score(t, r.Rule), 1e-9, "%+v", r)
		}
	}
	require.Len(t, fired, 50, "the top 50 by score")
	for i := range 50 {
		require.True(t, fired[fmt.Sprintf("a.crit.%03d", i)] || fired[fmt.Sprintf("a.hid.%03d", i)])
	}
	// By score then key: a.crit.* sort before a.hid.*, so a.crit.000..049.
	for i := range 50 {
		require.True(t, fired[fmt.Sprintf("a.crit.%03d", i)], "a.crit.%03d (key order among equal scores)", i)
	}
	a := w.why(p, crit, ikey{"v.000", "project"})
	require.Equal(t, "not_candidate", a.Decision, "%+v", a)
	require.Equal(t, "not_triggered", a.Reason, "%+v", a)
}

// TestRelevanceScore: the documented score — per lexeme a weight
// 1000·tf/(tf+1+⌊lexemes/64⌋), summed over the query's lexemes (at most
// 32, in byte order) and divided by 1000 × lexemes; the top 50 by score
// then key then layer, from lists of 50 per layer.
func TestRelevanceScore(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("score")
	var words []string
	const abc = "bcdfghjklmnpqrstvwxz"
	for i := range 200 {
		words = append(words, fmt.Sprintf("kq%c%c%c", abc[i/400%20], abc[i/20%20], abc[i%20]))
	}
	rel := relevance()
	w.batch("score", []spec{
		{Key: "one", Content: "zebra", Trigger: rel},
		{Key: "three", Content: "zebra zebra zebra", Trigger: rel},
		{Key: "pair", Content: "zebra lion", Trigger: rel},
		{Key: "long65", Content: "zebra " + strings.Join(words[100:164], " "), Trigger: rel},
		{Key: "long128", Content: "zebra zebra " + strings.Join(words[:127], " "), Trigger: rel},
		{Key: "lion.only", Content: "lion lion", Trigger: rel},
		{Key: "first.word", Content: words[0], Trigger: rel},
		{Key: "word31", Content: words[31], Trigger: rel},
		{Key: "word39", Content: words[39], Trigger: rel},
		{Key: "not.relevance", Content: "zebra zebra zebra", Trigger: keywords("nothing-said")},
	})
	for _, c := range []struct {
		text string
		n    int
	}{{"zebra " + strings.Join(words[100:164], " "), 65}, {"zebra zebra " + strings.Join(words[:127], " "), 128}, {strings.Join(words[:40], " "), 40}} {
		require.Equal(t, c.n, w.lexemes(c.text), "the test's vocabulary stems to distinct lexemes")
	}
	sup := w.reader("support", "score")
	for _, c := range []struct {
		query string
		want  map[string]float64 // key → score; absent keys must not fire
	}{
		{"zebra", map[string]float64{"one": 0.5, "three": 0.75, "pair": 0.5, "long65": 0.333, "long128": 0.4}},
		{"zebra lion", map[string]float64{"one": 0.25, "three": 0.375, "pair": 0.5, "long65": 0.1665, "long128": 0.2, "lion.only": 0.3335}},
		{"Zebras!", map[string]float64{"one": 0.5, "three": 0.75, "pair": 0.5, "long65": 0.333, "long128": 0.4}},
		// 40 lexemes: only the first 32 in byte order count, over 32 000.
		// long128 holds words[0..126] once each (weight 1000/(1+1+2)=250),
		// so its score is 32·250/32000 = 0.25.
		{strings.Join(words[:40], " "), map[string]float64{"first.word": 500.0 / 32000, "word31": 500.0 / 32000, "long128": 0.25}},
	} {
		p := w.assemble("score", sup, ctxtype.Request{TargetRole: "support", Query: c.query})
		recs := w.check(p)
		got := map[string]float64{}
		for _, r := range recs {
			if r.SubjectKind == ctxtype.SubjectItem {
				got[r.SubjectKey] = score(t, r.Rule)
				require.Equal(t, ctxtype.Included, r.Decision)
			}
		}
		require.Len(t, got, len(c.want), "query %q fired %v", c.query, got)
		for k, want := range c.want {
			require.Contains(t, got, k, "query %q", c.query)
			require.InDelta(t, want, got[k], 0.0051, "query %q, %s", c.query, k)
		}
	}

	// Per layer: 40 project items at 0.5 and 40 _shared items at 0.75 → the
	// 40 _shared and the 10 project items first by key.
	w.project("layered")
	var proj, shared []spec
	for i := range 40 {
		proj = append(proj, spec{Key: fmt.Sprintf("p.%03d", i), Content: "okapi", Trigger: rel})
		shared = append(shared, spec{Key: fmt.Sprintf("s.%03d", i), Content: "okapi okapi okapi", Trigger: rel})
	}
	w.batch("layered", proj)
	w.batch(ctxtype.SharedProject, shared)
	sup2 := w.reader("support", "layered")
	p := w.assemble("layered", sup2, ctxtype.Request{TargetRole: "support", Query: "okapi"})
	recs := w.check(p)
	fired := map[string]bool{}
	for _, r := range recs {
		if r.SubjectKind == ctxtype.SubjectItem {
			fired[layerOf(r)+":"+r.SubjectKey] = true
		}
	}
	require.Len(t, fired, 50)
	for i := range 40 {
		require.True(t, fired[fmt.Sprintf("shared:s.%03d", i)], "s.%03d", i)
		require.Equal(t, i < 10, fired[fmt.Sprintf("project:p.%03d", i)], "p.%03d", i)
	}
}
