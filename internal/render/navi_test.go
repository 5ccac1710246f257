package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/navi"
)

// naviDoc is the Doc of items imported from packets, ranked in the
// packets' order.
func naviDoc(t *testing.T, packets []navi.Packet) *Doc {
	t.Helper()
	d := &Doc{Project: "acme", TargetRole: "implementer"}
	for i, p := range packets {
		it := navi.ToItem(p)
		d.Ranked = append(d.Ranked, Entry{Ref: i, Key: it.Key, Version: 1, Source: it.Source, Priority: int(it.Priority), Title: it.Title, Content: it.Content})
	}
	return d
}

// TestNaviFormatIsNavisBlock: for items imported from navi's packets, the
// navi format is byte for byte navi's render_context_packets of them (the
// fixtures of internal/navi, written from navi's source), and each entry's
// piece is its block.
func TestNaviFormatIsNavisBlock(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"priority_order", "ties_negatives_untitled"} {
		path := filepath.Join("..", "navi", "testdata", "render", name)
		in, err := os.ReadFile(path + ".json")
		require.NoError(t, err)
		want, err := os.ReadFile(path + ".want")
		require.NoError(t, err)
		packets, err := navi.ParseList(in)
		require.NoError(t, err)
		pieces := Render(ctxtype.Navi, naviDoc(t, packets))
		require.Equal(t, string(want), Text(pieces), name)
		owned := map[int]string{}
		for _, p := range pieces {
			if p.Ref != Scaffold {
				owned[p.Ref] = p.Text
			}
		}
		require.Len(t, owned, len(packets))
		for i, p := range packets {
			require.Equal(t, navi.Block(p.Source.Debug(), int64(p.Priority), p.Title, p.Content), owned[i]+"\n")
		}
	}
	// Every fixture, restricted to the packets contextd keeps exactly
	// (a tag of its alphabet, no Some("") title), renders as navi renders them.
	files, _ := filepath.Glob(filepath.Join("..", "navi", "testdata", "render", "*.json"))
	require.NotEmpty(t, files)
	for _, f := range files {
		in, err := os.ReadFile(f)
		require.NoError(t, err)
		all, err := navi.ParseList(in)
		require.NoError(t, err)
		var kept []navi.Packet
		for _, p := range all {
			if _, exact := p.Source.ItemSource(); exact && (p.Title == nil || *p.Title != "") {
				kept = append(kept, p)
			}
		}
		want, _ := navi.Render(kept)
		require.Equal(t, want, Text(Render(ctxtype.Navi, naviDoc(t, kept))), f)
	}
}

func TestNaviFormatEmptyAndParts(t *testing.T) {
	t.Parallel()
	require.Empty(t, Render(ctxtype.Navi, &Doc{}), "no entry, no block: navi's None")
	d := naviDoc(t, []navi.Packet{{Source: navi.OtherSource("rag"), Content: " x ", Priority: 1}})
	d.Ranked = append(d.Ranked, Entry{Ref: 1, Source: "tool", Title: "t", Content: "y", Priority: 2})
	d.Task, d.TaskRef, d.ObjectiveRef = &Task{TaskID: "T-1", Objective: "Do it.\nWell."}, 2, 3
	d.Criteria, d.CriteriaRef = []Criterion{{ID: "AC1", Description: "works", VerificationKind: "gate", Required: true}}, 4
	d.Contradictions = []Contradiction{{Ref: 5, StateKey: "s", Kept: Entry{Key: "a", Version: 1}, Dropped: Entry{Key: "b", Version: 2}, KeptAuthority: "policy", DroppedAuthority: "evidence"}}
	d.AgentContext, d.AgentContextRef = map[string]any{"branch": "main"}, 6
	want := "Task: T-1\n\nObjective:\nDo it.\nWell.\n\nAcceptance Criteria:\n- [ ] **AC1** (gate, required): works\n\n" +
		"Agent Context:\nbranch: main\n\n" +
		"Active Contradictions:\n- ⚠️ state \"s\": kept `a` v1 (policy) over `b` v2 (evidence)\n\n" +
		"=== External Context Packets ===\n" +
		"- source: Other(\"tool\"); priority: 2; title: t\ny\n\n" +
		"- source: Other(\"rag\"); priority: 1; title: untitled\nx\n\n"
	pieces := Render(ctxtype.Navi, d)
	require.Equal(t, want, Text(pieces))
	refs := map[int]string{}
	for _, p := range pieces {
		if p.Ref != Scaffold {
			refs[p.Ref] = p.Text
		}
	}
	require.Equal(t, "Task: T-1\n", refs[2])
	require.Equal(t, "Do it.\nWell.\n", refs[3])
	require.True(t, strings.HasPrefix(refs[5], "- ⚠️ state"))
	require.Equal(t, "- source: Other(\"rag\"); priority: 1; title: untitled\nx\n", refs[0])
	require.Equal(t, navi.Header, FirstEntryCost(ctxtype.Navi))
	require.Empty(t, FirstEntryCost(ctxtype.Blocks))
}
