package assemble

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/token"
)

// world is a random snapshot for comparing the pipelines: items of both
// layers with every trigger, roles, validity windows, state keys,
// templates, and relevance weights for a query.
type world struct {
	vs      []*ctxtype.Version
	weights map[[2]string]map[string]int
	lexemes []string
	req     *ctxtype.Request
}

func randomWorld(rng *rand.Rand, n int) world {
	words := []string{"refund", "ledger", "deploy", "alpha", "beta", "gamma", "delta", "policy", "money", "back"}
	text := func(k int) string {
		var b []string
		for range k {
			b = append(b, words[rng.IntN(len(words))])
		}
		return strings.Join(b, " ")
	}
	w := world{weights: map[[2]string]map[string]int{}}
	for i := range n {
		project := "acme"
		if rng.IntN(4) == 0 {
			project = "_shared"
		}
		key := fmt.Sprintf("k%02d", i)
		if rng.IntN(8) == 0 {
			// the same key in the other layer: overrides
			key = fmt.Sprintf("k%02d", rng.IntN(i+1))
		}
		if slices.ContainsFunc(w.vs, func(v *ctxtype.Version) bool { return v.Project == project && v.Key == key }) {
			continue
		}
		w.vs = append(w.vs, ver(project, key, text(1+rng.IntN(60))+fmt.Sprintf(" marker%02d", i), func(v *ctxtype.Version) {
			v.Priority = rng.IntN(4)
			v.Authority = []string{"policy", "instruction", "evidence", "hypothesis"}[rng.IntN(4)]
			v.Confidence = []string{"verified", "probable", "uncertain"}[rng.IntN(3)]
			v.Kind = []string{"knowledge", "state", "skill", "decision"}[rng.IntN(4)]
			v.Slot = []string{"system", "system", "system", "tools", "messages"}[rng.IntN(5)]
			v.CreatedAt = t0.Add(-time.Duration(rng.IntN(5)) * time.Minute)
			v.ContentSHA256 = fmt.Sprintf("%x", v.Content)
			switch rng.IntN(10) {
			case 0:
				v.Roles = ctxtype.Roles{HiddenFrom: []string{"implementer"}}
			case 1:
				v.Roles = ctxtype.Roles{VisibleTo: []string{"critic"}}
			}
			switch rng.IntN(12) {
			case 0:
				v.ValidUntil = ptr(t0.Add(-time.Minute))
			case 1:
				v.ValidFrom = ptr(t0.Add(-time.Minute))
			}
			if rng.IntN(4) == 0 {
				v.StateKey = fmt.Sprintf("s%d", rng.IntN(3))
				if rng.IntN(3) == 0 {
					v.Content = "agreed state"
					v.ContentSHA256 = fmt.Sprintf("%x", v.Content)
				}
			}
			if rng.IntN(10) == 0 {
				v.Template = true
				v.Content += []string{" for {{customer}}", " in {{project}}", " by {{nobody}}"}[rng.IntN(3)]
				v.ContentSHA256 = fmt.Sprintf("%x", v.Content)
			}
			randomTrigger(rng, v, words)
			if rng.IntN(6) == 0 {
				v.Title = "T" + text(1)
			}
			if rng.IntN(20) == 0 {
				v.Deleted = true
			}
		}))
	}
	for _, v := range w.vs {
		if v.Trigger.Relevance {
			m := map[string]int{}
			for _, f := range strings.Fields(v.Content) {
				m[f] += 100
			}
			w.weights[[2]string{v.Project, v.Key}] = m
		}
	}
	w.lexemes = []string{"alpha", "ledger", "refund"}
	w.req = req(func(r *ctxtype.Request) {
		r.TokenBudget = 40 + rng.IntN(900)
		r.Format = []ctxtype.Format{ctxtype.Markdown, ctxtype.Blocks, ctxtype.JSON, ctxtype.Navi}[rng.IntN(4)]
		r.Tokenizer = []token.Tokenizer{token.O200kBase, token.Cl100kBase}[rng.IntN(2)]
		r.History = []ctxtype.Message{{Role: "user", Author: "person", Content: inflect(rng, text(5))}}
		r.Query = "alpha ledger refund"
		r.ToolResults = []ctxtype.ToolResult{{Tool: "lookup", Status: "ok", Content: "{}"}}
		r.Variables = map[string]any{"customer": "Ada"}
		if rng.IntN(3) == 0 {
			r.Pins = []string{fmt.Sprintf("k%02d", rng.IntN(n))}
		}
		if rng.IntN(2) == 0 {
			r.Task = &ctxtype.Task{Objective: text(1 + rng.IntN(40))}
		}
	})
	return w
}

// randomTrigger gives v one of every kind of trigger (or leaves it
// always-on); half the keyword triggers match by stems.
func randomTrigger(rng *rand.Rand, v *ctxtype.Version, words []string) {
	switch rng.IntN(8) {
	case 0, 1:
		v.Trigger = ctxtype.Trigger{Keywords: []string{words[rng.IntN(len(words))]}}
		if rng.IntN(2) == 0 {
			v.Trigger.Match = ctxtype.MatchStem // matches the inflected words too
		}
	case 2:
		v.Trigger = ctxtype.Trigger{Tool: ptr([]string{"lookup", "search"}[rng.IntN(2)])}
	case 3, 4:
		v.Trigger = ctxtype.Trigger{Relevance: true}
	case 5:
		v.Trigger = ctxtype.Trigger{PinnedOnly: true}
	}
}

// inflect gives some of the words an ending ("refunds", "deploying"), so
// that stem-mode keywords match where whole words do not.
func inflect(rng *rand.Rand, text string) string {
	ws := strings.Fields(text)
	for i := range ws {
		ws[i] += []string{"", "", "s", "ing", "ed"}[rng.IntN(5)]
	}
	return strings.Join(ws, " ")
}

// firstPipelineInput is the world as pipeline 1 takes it: every current
// version, with pipeline 2's relevance scores.
func (w world) firstPipelineInput(t *testing.T) Input {
	src := &MemorySource{Versions: w.vs, Weights: w.weights, Lexemes: w.lexemes}
	postings, n, err := src.Postings(context.Background(), RelevanceQuery{Layers: []string{"acme", ctxtype.SharedProject}, Role: w.req.TargetRole, Now: t0})
	require.NoError(t, err)
	scores := map[[2]string]float64{}
	for _, s := range TopRelevance(postings, n) {
		scores[[2]string{s.Layer, s.Key}] = s.Score
	}
	var cs []Candidate
	for _, v := range w.vs {
		c := Candidate{Version: v}
		if s, ok := scores[[2]string{v.Project, v.Key}]; ok {
			c.Relevance = &s
		}
		cs = append(cs, c)
	}
	return Input{Project: "acme", Request: w.req, Candidates: cs, Now: t0}
}

func runBounded(t *testing.T, w world, narrow bool, opt Options) (*Result, *Explanation) {
	t.Helper()
	src := &MemorySource{Versions: w.vs, Weights: w.weights, Lexemes: w.lexemes, Narrow: narrow}
	res, why, err := AssembleBounded(context.Background(), Input{Project: "acme", Request: w.req, Now: t0}, src, opt)
	require.NoError(t, err)
	checkInvariants(t, w.req, res)
	return res, why
}

// TestBoundedMatchesFirstPipeline: on random worlds, pipeline 2 gives the
// bytes and records of pipeline 1 whenever its budget tried every
// candidate; when it stopped, every candidate the role sees is recorded
// once or counted once, and the records of what it tried are pipeline 1's.
// A source that hands out narrow rows and reads text on demand gives the
// same packet as one that hands out whole versions.
func TestBoundedMatchesFirstPipeline(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	cutoffs, full, stemFired, wordFired := 0, 0, 0, 0
	for iter := range 400 {
		w := randomWorld(rng, 10+rng.IntN(120))
		one, err := Assemble(w.firstPipelineInput(t))
		require.NoError(t, err)
		two, _ := runBounded(t, w, false, Options{})
		narrow, _ := runBounded(t, w, true, Options{})
		for _, r := range two.Records {
			switch {
			case strings.HasPrefix(r.Rule, "keyword(stem):"):
				stemFired++
			case strings.HasPrefix(r.Rule, "keyword:"):
				wordFired++
			}
		}
		require.Equal(t, two.Rendered, narrow.Rendered, "iteration %d: narrow rows give the same bytes", iter)
		require.Equal(t, two.Records, narrow.Records, "iteration %d", iter)
		require.Equal(t, two.Cutoff, narrow.Cutoff, "iteration %d", iter)
		if two.Cutoff == nil {
			full++
			require.Equal(t, one.Rendered, two.Rendered, "iteration %d: no cutoff, the bytes of pipeline 1", iter)
			// Hidden items ranked after the last one the budget tried are
			// never met: no record (only admins would see one).
			require.Equal(t, withoutUnmetHidden(one.Records, two.Records), two.Records, "iteration %d: no cutoff, the records of pipeline 1", iter)
			require.Equal(t, one.Used, two.Used)
			budgetGaps, other := 0, 0
			for _, g := range one.Gaps {
				if g.Reason == ctxtype.ReasonBudget {
					budgetGaps++
				} else {
					other++
				}
			}
			require.Equal(t, max(0, budgetGaps-MaxGaps), two.GapsMore, "iteration %d", iter)
			require.LessOrEqual(t, len(two.Gaps), MaxGaps+other)
			continue
		}
		cutoffs++
		// Every item pipeline 1 recorded is recorded by pipeline 2 or
		// counted in its cutoff; what pipeline 2 recorded as tried carries
		// pipeline 1's decision when pipeline 1 included it in a prefix.
		recorded := map[string]bool{}
		for _, r := range two.Records {
			if r.SubjectKind == ctxtype.SubjectItem {
				k := r.SubjectProject + "/" + r.SubjectKey
				require.False(t, recorded[k], "iteration %d: %s recorded twice", iter, k)
				recorded[k] = true
			}
		}
		untried := 0
		for _, r := range one.Records {
			k := r.SubjectProject + "/" + r.SubjectKey
			if r.SubjectKind != ctxtype.SubjectItem || recorded[k] || r.AdminOnly {
				continue
			}
			untried++
		}
		require.Equal(t, untried, two.Cutoff.Count, "iteration %d: the cutoff counts what was not tried", iter)
		require.GreaterOrEqual(t, two.GapsMore, two.Cutoff.Count, "iteration %d: the gaps not listed count the untried", iter)
		require.Equal(t, two.Allocated-two.Used, two.Cutoff.Headroom)
		require.LessOrEqual(t, countBudget(two), MaxGaps)
	}
	t.Logf("%d worlds with a cutoff, %d without; %d stem-mode and %d whole-word keyword records", cutoffs, full, stemFired, wordFired)
	require.Greater(t, stemFired, 100, "stem-mode keyword items fire")
	require.Greater(t, wordFired, 100, "whole-word keyword items fire")
	require.Greater(t, cutoffs, 20)
	require.Greater(t, full, 20)
}

func withoutUnmetHidden(one, two []ctxtype.Record) []ctxtype.Record {
	met := map[string]bool{}
	for _, r := range two {
		met[r.SubjectProject+"/"+r.SubjectKey] = true
	}
	var out []ctxtype.Record
	for _, r := range one {
		if r.SubjectKind == ctxtype.SubjectItem && r.AdminOnly && !met[r.SubjectProject+"/"+r.SubjectKey] {
			continue
		}
		out = append(out, r)
	}
	return out
}

func countBudget(res *Result) int {
	n := 0
	for _, g := range res.Gaps {
		if g.Reason == ctxtype.ReasonBudget {
			n++
		}
	}
	return n
}
