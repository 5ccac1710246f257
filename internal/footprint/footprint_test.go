package footprint_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/footprint"
)

// TestFootprintFNV1a: the hashes agentfootprint's own fnv1a (src/lib/fnv1a.ts,
// run under node) gives for the same strings, non-ASCII and astral ones
// included, where hashing UTF-8 bytes would differ.
func TestFootprintFNV1a(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":  "811c9dc5",
		"a": "e40c292c",
		"- Refunds over 500 EUR need a manager.\n": "bcb40f6c",
		"café":     "3308be7c",
		"😀 x":      "1049ec90",
		"\x00\x01": "1076963a",
	} {
		require.Equal(t, want, footprint.FNV1a(in), "%q", in)
	}
}

// TestFootprintTruncate: agentfootprint's truncate(s, 80), counted in UTF-16
// code units, and a surrogate pair the cut would split left out whole.
func TestFootprintTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", footprint.Truncate("short", 80))
	exact := strings.Repeat("b", 80)
	require.Equal(t, exact, footprint.Truncate(exact, 80))
	require.Equal(t, strings.Repeat("x", 79)+"…", footprint.Truncate(strings.Repeat("x", 100), 80))
	require.Equal(t, strings.Repeat("é", 79)+"…", footprint.Truncate(strings.Repeat("é", 81), 80), "é is one unit, not two bytes")
	// 40 emoji are 80 units: no cut. 41 are 82: 39 whole ones fit in 79 units.
	require.Equal(t, strings.Repeat("😀", 40), footprint.Truncate(strings.Repeat("😀", 40), 80))
	require.Equal(t, strings.Repeat("😀", 39)+"…", footprint.Truncate(strings.Repeat("😀", 41), 80))
	require.Equal(t, strings.Repeat("a", 78)+"…", footprint.Truncate(strings.Repeat("a", 78)+"😀😀", 80))
}

// TestFootprintFromRecords: every record lands in exactly one list, with the
// slot, source, ids and reasons the mapping promises.
func TestFootprintFromRecords(t *testing.T) {
	t.Parallel()
	rendered := "## Objective\nFix it.\n- Tool: run.\n- Ledger nightly.\n"
	obj := strings.Index(rendered, "Fix it.\n")
	tool := strings.Index(rendered, "- Tool")
	led := strings.Index(rendered, "- Ledger")
	recs := []ctxtype.Record{
		{SubjectKind: ctxtype.SubjectRequest, SubjectKey: "objective", Decision: ctxtype.Included, Section: "Objective", Rule: "request",
			Span: &ctxtype.Span{Start: obj, End: obj + 8}, Tokens: 3},
		{SubjectKind: ctxtype.SubjectItem, SubjectProject: "acme", SubjectKey: "tool.run", SubjectVersion: 2, Decision: ctxtype.Included,
			Section: "Tools", Rule: "tool:run", Span: &ctxtype.Span{Start: tool, End: led}, Tokens: 5, Rank: 1, Position: 0},
		{SubjectKind: ctxtype.SubjectItem, SubjectProject: "_shared", SubjectKey: "ledger", SubjectVersion: 1, Decision: ctxtype.Included,
			Section: "Shared Defaults", Rule: "relevance:0.0333", Span: &ctxtype.Span{Start: led, End: len(rendered)}, Tokens: 4, Rank: 2, Position: 1},
		{SubjectKind: ctxtype.SubjectHandoff, SubjectKey: "hnd_1", Decision: ctxtype.Included, Section: "Predecessor Outputs", Rule: "predecessor"},
		{SubjectKind: ctxtype.SubjectItem, SubjectProject: "acme", SubjectKey: "huge", Decision: ctxtype.Excluded, Reason: ctxtype.ReasonBudget, Detail: "needed 900"},
		{SubjectKind: ctxtype.SubjectItem, SubjectProject: "acme", SubjectKey: "old", Decision: ctxtype.Excluded, Reason: ctxtype.ReasonContradicted},
		{SubjectKind: ctxtype.SubjectItem, SubjectProject: "_shared", SubjectKey: "tone", Decision: ctxtype.Excluded, Reason: ctxtype.ReasonOverridden},
		{SubjectKind: ctxtype.SubjectItem, SubjectProject: "acme", SubjectKey: "hole", Decision: ctxtype.Excluded, Reason: ctxtype.ReasonTemplateUnresolved, Detail: "no {{x}}"},
		{SubjectKind: ctxtype.SubjectItem, SubjectProject: "acme", SubjectKey: "secret", Decision: ctxtype.Excluded, Reason: ctxtype.ReasonHidden, AdminOnly: true},
	}
	tr := footprint.FromRecords(rendered, 200, recs)
	require.Len(t, tr.Data, 4)

	o := tr.Data[0]
	require.Equal(t, "Fix it.\n", o.ContentSummary)
	require.Equal(t, footprint.FNV1a("Fix it.\n"), o.ContentHash)
	require.Equal(t, [4]string{"system-prompt", "fact", "request/objective", "request"}, [4]string{o.Slot, o.Source, o.SourceID, o.Reason})
	require.Nil(t, o.RankPosition, "request parts are not ranked")
	require.Nil(t, o.RetrievalScore)
	require.Equal(t, &footprint.BudgetSpent{Tokens: 3, FractionOfCap: 0.015}, o.BudgetSpent)

	tl := tr.Data[1]
	require.Equal(t, [4]string{"tools", "registry", "tool.run", "tool:run"}, [4]string{tl.Slot, tl.Source, tl.SourceID, tl.Reason})
	require.Equal(t, "Tools", tl.SectionTag)
	require.Equal(t, 1, *tl.RankPosition)
	require.Equal(t, 0, *tl.Position)

	l := tr.Data[2]
	require.Equal(t, [3]string{"system-prompt", "rag", "_shared/ledger"}, [3]string{l.Slot, l.Source, l.SourceID})
	require.Equal(t, 0.0333, *l.RetrievalScore)
	require.Equal(t, 2, *l.RankPosition)
	require.Equal(t, 1, *l.Position)
	require.Equal(t, 0.02, l.BudgetSpent.FractionOfCap)

	h := tr.Data[3]
	require.Equal(t, [2]string{"memory", "handoff/hnd_1"}, [2]string{h.Source, h.SourceID})
	require.Equal(t, footprint.FNV1a(""), h.ContentHash, "no span: the empty text")

	require.Equal(t, []footprint.Evicted{{ID: "huge", Reason: "budget"}, {ID: "old", Reason: "contradicted"}, {ID: "_shared/tone", Reason: "overridden"}}, tr.Evicted)
	require.Equal(t, []footprint.Skipped{{ID: "hole", Reason: "unknown-fact", Error: "no {{x}}"}, {ID: "secret", Reason: "hidden"}}, tr.Skipped)

	// No budget: no fraction to give.
	require.Nil(t, footprint.FromRecords(rendered, 0, recs[:1]).Data[0].BudgetSpent)
	// Empty lists are lists, never null.
	b, err := json.Marshal(footprint.FromRecords("", 100, nil))
	require.NoError(t, err)
	require.JSONEq(t, `{"data":[],"skipped":[],"evicted":[]}`, string(b))
}
