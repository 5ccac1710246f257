package assemble

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/navi"
)

// naviItems are the versions an import of navi's packets writes (ToItem),
// each newer than the next, so that contextd's rank order among equal
// priorities is the packets' order.
func naviItems(t *testing.T, fixture string) ([]navi.Packet, []*ctxtype.Version, string) {
	t.Helper()
	path := filepath.Join("..", "navi", "testdata", "render", fixture)
	in, err := os.ReadFile(path + ".json")
	require.NoError(t, err)
	want, err := os.ReadFile(path + ".want")
	require.NoError(t, err)
	packets, err := navi.ParseList(in)
	require.NoError(t, err)
	var vs []*ctxtype.Version
	for i, p := range packets {
		it := navi.ToItem(p)
		vs = append(vs, ver("acme", it.Key, it.Content, func(v *ctxtype.Version) {
			v.Kind, v.Source, v.Title, v.Priority, v.Trigger, v.Metadata = it.Kind, it.Source, it.Title, int(it.Priority), it.Trigger, it.Metadata
			v.CreatedAt = t0.Add(-time.Duration(i+1) * time.Minute)
		}))
	}
	return packets, vs, string(want)
}

// TestNaviPacket: a packet of format navi from items imported from navi's
// packets is byte for byte navi's render of them, each item's span is its
// block, and the used count is the text's.
func TestNaviPacket(t *testing.T) {
	t.Parallel()
	for _, fixture := range []string{"priority_order", "ties_negatives_untitled"} {
		packets, vs, want := naviItems(t, fixture)
		res := run(t, req(func(r *ctxtype.Request) { r.Format = ctxtype.Navi }), cands(vs...))
		require.Equal(t, want, res.Rendered, fixture)
		for i, p := range packets {
			rec := find(res, navi.Key(p))
			require.Equal(t, ctxtype.Included, rec.Decision)
			block := navi.Block(p.Source.Debug(), int64(p.Priority), p.Title, p.Content)
			require.Equal(t, strings.TrimSuffix(block, "\n"), res.Rendered[rec.Span.Start:rec.Span.End], "packet %d", i)
		}
	}
}

// TestNaviPacketWithRequestParts: the task, objective and criteria come
// first, as paragraphs; navi's block follows, unchanged.
func TestNaviPacketWithRequestParts(t *testing.T) {
	t.Parallel()
	_, vs, want := naviItems(t, "ties_negatives_untitled")
	res := run(t, req(func(r *ctxtype.Request) {
		r.Format = ctxtype.Navi
		r.Task = &ctxtype.Task{TaskID: "T-7", Objective: "Summarise the canvas."}
		r.AcceptanceCriteria = []ctxtype.Criterion{{ID: "AC1", Description: "short", VerificationKind: "critic"}}
	}), cands(vs...))
	require.True(t, strings.HasSuffix(res.Rendered, want), res.Rendered)
	require.Equal(t, "Task: T-7\n\nObjective:\nSummarise the canvas.\n\nAcceptance Criteria:\n- [ ] **AC1** (critic): short\n\n", strings.TrimSuffix(res.Rendered, want))
}

// TestNaviBudgetIsExact: the navi format prices its header once, so a
// budget of exactly the whole packet's count fits every entry, and one
// token less leaves one out.
func TestNaviBudgetIsExact(t *testing.T) {
	t.Parallel()
	for _, fixture := range []string{"priority_order", "ties_negatives_untitled", "other_tags", "raw_titles_and_trim"} {
		_, vs, _ := naviItems(t, fixture)
		var kept []*ctxtype.Version
		for _, v := range vs {
			if strings.TrimSpace(v.Content) != "" {
				kept = append(kept, v)
			}
		}
		all := run(t, req(func(r *ctxtype.Request) { r.Format = ctxtype.Navi; r.TokenBudget = ctxtype.MaxBudget }), cands(kept...))
		exact := run(t, req(func(r *ctxtype.Request) { r.Format = ctxtype.Navi; r.TokenBudget = all.Used }), cands(kept...))
		require.Empty(t, exact.Gaps, fixture)
		require.Equal(t, all.Rendered, exact.Rendered, fixture)
		short := run(t, req(func(r *ctxtype.Request) { r.Format = ctxtype.Navi; r.TokenBudget = all.Used - 1 }), cands(kept...))
		require.Less(t, len(short.Rendered), len(all.Rendered), fixture)
	}
}

// TestGoldenNavi: the rich scenario in the navi format (request parts as
// paragraphs, the contradiction paragraph, then navi's block).
func TestGoldenNavi(t *testing.T) {
	t.Parallel()
	r, cs := richScenario()
	r.Format = ctxtype.Navi
	res := run(t, r, cs)
	golden(t, "rich.navi", res.Rendered)
	require.True(t, strings.HasSuffix(res.Rendered, "\n\n"))
	require.Contains(t, res.Rendered, "=== External Context Packets ===\n")
}
