package packet_test

// Formats, tokenizers and replay of bounded (pipeline 2) packets, and the
// replay of packets a pipeline 1 made.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/token"
)

// TestFormatsAndTokenizersUnderTheCutoff: every format under both
// tokenizers, with and without a cutoff: used is the exact count of the
// text under the packet's tokenizer, spans hold, the json format stays
// valid JSON, and each packet replays byte for byte.
func TestFormatsAndTokenizersUnderTheCutoff(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("fmt")
	var items []spec
	var keys []ikey
	kinds := []string{"knowledge", "state", "skill", "decision", "instruction", "episode", "evidence"}
	for i := range 90 {
		k := fmt.Sprintf("f.%03d", i)
		items = append(items, spec{Key: k, Title: fmt.Sprintf("Título %d", i), Kind: kinds[i%len(kinds)],
			Content: fmt.Sprintf("Fact %d — ünïcødé ✓ \"quoted\" <tag> & %s", i, strings.Repeat("mot ", i%11)), Priority: int32(500 - i)})
		keys = append(keys, ikey{k, "project"})
	}
	items = append(items, spec{Key: "tool.x", Title: "lookup_x", Kind: "tool", Slot: "tools", Content: "Look up X.", Trigger: tool("lookup_x"), Priority: -1})
	keys = append(keys, pk("tool.x")...)
	w.batch("fmt", items)
	w.batch(ctxtype.SharedProject, []spec{{Key: "sh.1", Content: "Shared ✓ default", Priority: 450}})
	keys = append(keys, sk("sh.1")...)
	sup := w.reader("support", "fmt")
	texts := map[string]string{}
	for _, tk := range []token.Tokenizer{"o200k_base", "cl100k_base"} {
		for _, f := range []ctxtype.Format{"markdown", "blocks", "json"} {
			for _, budget := range []int{300, 50000} { // 250 and 260 trip TestTriesCountFromTheFirstExclusion
				p := w.assemble("fmt", sup, ctxtype.Request{TargetRole: "support", TokenBudget: budget, Format: f, Tokenizer: tk,
					Task:         &ctxtype.Task{Objective: "Answer in one sentence ✓."},
					ToolResults:  []ctxtype.ToolResult{{Tool: "lookup_x", Status: "ok", Content: "{}"}},
					AgentContext: map[string]any{"channel": "email"}})
				require.Equal(t, string(f), p.Format)
				require.Equal(t, string(tk), p.Tokenizer)
				if budget == 300 {
					require.NotNil(t, p.Cutoff, "%s/%s", tk, f)
				} else {
					require.Nil(t, p.Cutoff, "%s/%s", tk, f)
				}
				if f == "json" {
					require.True(t, json.Valid([]byte(p.Rendered)), "%s/%d: the json format is JSON:\n%s", tk, budget, p.Rendered)
				}
				texts[fmt.Sprint(f, "/", tk, "/", budget)] = p.Rendered
				recs := w.check(p)
				if budget == 300 && (f == "json") == (tk == "cl100k_base") && f != "markdown" {
					w.whyAll(p, recs, keys, noneHidden)
				}
			}
		}
	}
	for _, f := range []string{"markdown", "blocks", "json"} {
		require.Equal(t, texts[f+"/o200k_base/50000"], texts[f+"/cl100k_base/50000"], "%s: the tokenizer counts, it does not change a text that fits whole", f)
		require.NotEqual(t, texts[f+"/o200k_base/300"], texts[f+"/o200k_base/50000"], f)
	}
	require.NotEqual(t, texts["markdown/o200k_base/300"], texts["blocks/o200k_base/300"])
	require.NotEqual(t, texts["json/o200k_base/300"], texts["blocks/o200k_base/300"])
}

// TestPipelineOneCopyReplaysWithPipelineOne: new packets store pipeline 2
// (checked for every packet of these scenarios); a copy of one stored as
// pipeline 1 (as a packet made before the migration would be) replays with
// pipeline 1's code — every candidate tried — so where the pipelines differ
// the replay says so, and where they agree it is identical.
func TestPipelineOneCopyReplaysWithPipelineOne(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("pipe")
	items := []spec{{Key: "l.huge", Content: strings.Repeat("word ", 400), Priority: 10000}}
	for i := range 45 {
		items = append(items, spec{Key: fmt.Sprintf("l.%03d", i), Content: "tiny", Priority: int32(5000 - i)})
	}
	w.batch("pipe", items)
	// copyAsV1 stores the packet again under another id as pipeline 1:
	// no cutoff, no gaps beyond the listed ones, the same records.
	copyAsV1 := func(p assembled) string {
		forged := *p.Packet
		forged.ID = p.ID + "p1"
		forged.Pipeline, forged.Cutoff, forged.GapsMore = assemble.Pipeline1, nil, 0
		require.NoError(t, w.svc.Packets.StoreForTest(t.Context(), &forged))
		return forged.ID
	}
	// With a cutoff, pipeline 1 would have tried (and fitted) the small
	// items after the 32 tries.
	cut := w.assemble("pipe", w.admin, ctxtype.Request{TargetRole: "support", TokenBudget: 200})
	require.NotNil(t, cut.Cutoff)
	w.check(cut)
	v1 := copyAsV1(cut)
	rp := w.replay("pipe", w.admin, v1)
	require.False(t, rp.Identical, "a pipeline-1 packet replays with pipeline 1: %+v", rp)
	require.Equal(t, cut.RenderedSHA256, rp.SHA256Then)
	require.NotEmpty(t, rp.Differences)
	var subjects []string
	for _, d := range rp.Differences {
		subjects = append(subjects, d.Subject)
	}
	require.Contains(t, subjects, "item:pipe/l.032", "pipeline 1 tries past the 32")
	require.NotEqual(t, rp.SHA256Then, rp.SHA256Now, "pipeline 1 fits the small items past the cutoff")
	// The pipeline-2 packet itself still replays identically.
	rp = w.replay("pipe", w.admin, cut.ID)
	require.True(t, rp.Identical, "%+v", rp)

	// Without a cutoff and without relevance both pipelines agree.
	all := w.assemble("pipe", w.admin, ctxtype.Request{TargetRole: "support", TokenBudget: 100000})
	require.Nil(t, all.Cutoff)
	v1 = copyAsV1(all)
	rp = w.replay("pipe", w.admin, v1)
	require.True(t, rp.Identical, "%+v", rp)
	require.Empty(t, rp.Differences)
	g := w.get("pipe", w.admin, v1)
	require.Equal(t, assemble.Pipeline1, g.Pipeline)
	require.Nil(t, g.Cutoff)
}

// TestBoundedPacketsReplayOnRandomWorlds: packets assembled by the
// database source replay identically from the stored snapshot (the
// in-memory source), records included, over projects with every trigger,
// both layers, overrides, contradictions, roles, windows, templates and
// relevance, under budgets that cut and budgets that do not.
func TestBoundedPacketsReplayOnRandomWorlds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"refund", "ledger", "deploy", "alpha", "beta", "gamma", "delta", "policy", "money", "invoice"}
	text := func(k int) string {
		var out []string
		for range k {
			out = append(out, words[rng.IntN(len(words))])
		}
		return strings.Join(out, " ")
	}
	cut := 0
	for world := range 6 {
		proj := fmt.Sprintf("w%d", world)
		w.project(proj)
		for _, layer := range []string{proj, ctxtype.SharedProject} {
			var items []spec
			for i := range 60 + rng.IntN(60) {
				it := spec{Key: fmt.Sprintf("%s.k%03d", proj, i), Kind: []string{"knowledge", "state", "skill", "decision"}[rng.IntN(4)],
					Content: text(3+rng.IntN(40)) + fmt.Sprintf(" marker%d", i), Priority: int32(rng.IntN(4)), Source: "human",
					Authority:  []string{"policy", "instruction", "evidence", "hypothesis"}[rng.IntN(4)],
					Confidence: []string{"verified", "probable", "uncertain"}[rng.IntN(3)]}
				if layer == ctxtype.SharedProject && rng.IntN(3) == 0 {
					it.Key = fmt.Sprintf("%s.k%03d", proj, rng.IntN(60)) // overrides
				}
				switch rng.IntN(8) {
				case 0:
					it.Trigger = keywords(words[rng.IntN(len(words))])
				case 1:
					it.Trigger = tool("lookup")
				case 2, 3:
					it.Trigger = relevance()
				}
				if rng.IntN(8) == 0 {
					it.Roles = hiddenFrom("support")
				}
				if rng.IntN(5) == 0 {
					it.StateKey = fmt.Sprintf("%s.s%d", proj, rng.IntN(3))
				}
				if rng.IntN(12) == 0 {
					it.Template = true
					it.Content = "For {{customer}}: " + text(4)
				}
				if rng.IntN(15) == 0 {
					it.ValidUntil = past
				}
				items = append(items, it)
			}
			// Keys repeat in _shared across worlds: last write wins. A batch
			// holds a key once: its first item.
			seen := map[string]bool{}
			var list []spec
			for _, it := range items {
				if !seen[it.Key] {
					seen[it.Key] = true
					list = append(list, it)
				}
			}
			w.batch(layer, list)
		}
		for _, budget := range []int{150, 400, 2000, 16000} {
			p := w.assemble(proj, w.admin, ctxtype.Request{TargetRole: "support", TokenBudget: budget, Query: text(4),
				Format:      []ctxtype.Format{"markdown", "blocks", "json"}[rng.IntN(3)],
				History:     []ctxtype.Message{{Role: "user", Author: "person", Content: text(6)}},
				ToolResults: []ctxtype.ToolResult{{Tool: "lookup", Status: "ok", Content: "{}"}},
				Variables:   map[string]any{"customer": "Ada"}})
			if p.Cutoff != nil {
				cut++
			}
			rep := w.replay(proj, w.admin, p.ID)
			require.True(t, rep.Identical, "world %d budget %d: %+v", world, budget, rep.Differences)
			require.Empty(t, rep.Differences, "world %d budget %d", world, budget)
		}
	}
	require.Greater(t, cut, 2, "some budgets cut")
}
