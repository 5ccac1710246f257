package packet_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
)

// TestReplayKeepsThePacketsPipeline: a packet made by pipeline 1 (before
// the budget cutoff and the new relevance score) replays byte for byte
// with pipeline 1's code, although the same request now gives pipeline 2's
// packet, with other records.
func TestReplayKeepsThePacketsPipeline(t *testing.T) {
	t.Parallel()
	ctx, items, packets, admin := services(t, "old")
	seed(t, items, admin, "old", 1200)

	req := func() *ctxtype.Request {
		return &ctxtype.Request{TargetRole: "implementer", TokenBudget: 3000, Query: vocab[5] + " " + vocab[9] + " " + vocab[77],
			History: []ctxtype.Message{{Role: "user", Author: "person", Content: vocab[1] + " " + vocab[2]}}}
	}
	old, err := packets.PrepareFirstPipeline(ctx, admin, "old", req())
	require.NoError(t, err)
	require.Equal(t, assemble.Pipeline1, old.Pipeline)
	require.NoError(t, packets.StoreForTest(ctx, old))

	now, err := packets.Assemble(ctx, admin, "old", req())
	require.NoError(t, err)
	require.Equal(t, assemble.Pipeline2, now.Pipeline)
	require.NotNil(t, now.Cutoff, "pipeline 2 stops trying")
	require.Greater(t, len(old.Records), len(now.Records)+100, "pipeline 1 recorded every budget exclusion")

	got, err := packets.Get(ctx, admin, "old", old.ID)
	require.NoError(t, err)
	require.Equal(t, assemble.Pipeline1, got.Pipeline)
	require.Nil(t, got.Cutoff)
	rep, err := packets.Replay(ctx, admin, "old", old.ID)
	require.NoError(t, err)
	require.True(t, rep.Identical, "a pipeline 1 packet replays with pipeline 1: %+v", rep.Differences)
	require.Empty(t, rep.Differences)
	rep, err = packets.Replay(ctx, admin, "old", now.ID)
	require.NoError(t, err)
	require.True(t, rep.Identical, "%+v", rep.Differences)
	require.Empty(t, rep.Differences)
}

// TestReplayKeepsTheRenderVersion: a packet rendered before contradiction
// lines named the facts (render version 1) replays to its own bytes, while
// the same request now renders the facts.
func TestReplayKeepsTheRenderVersion(t *testing.T) {
	t.Parallel()
	ctx, items, packets, admin := services(t, "acme")
	state, instr := "state", "instruction"
	sk := "refund.window"
	_, err := items.Batch(ctx, admin, "acme", []item.Input{
		{Key: "window", Content: "Refunds within 30 days.", Kind: &state, StateKey: &sk, Authority: &instr},
		{Key: "window-old", Content: "Refunds within 14 days.", Kind: &state, StateKey: &sk},
	})
	require.NoError(t, err)
	req := func() *ctxtype.Request { return &ctxtype.Request{TargetRole: "planner"} }
	old, err := packets.PrepareFirstPipeline(ctx, admin, "acme", req())
	require.NoError(t, err)
	require.Equal(t, assemble.Render1, old.RenderVersion)
	require.Contains(t, old.Rendered, "kept `window` v1 (instruction) over `window-old` v1 (evidence)")
	require.NoError(t, packets.StoreForTest(ctx, old))
	now, err := packets.Assemble(ctx, admin, "acme", req())
	require.NoError(t, err)
	require.Equal(t, assemble.CurrentRender, now.RenderVersion)
	require.Contains(t, now.Rendered, `kept: "Refunds within 30 days." (instruction) over "Refunds within 14 days." (evidence)`)
	for _, p := range []*packet.Packet{old, now} {
		got, err := packets.Get(ctx, admin, "acme", p.ID)
		require.NoError(t, err)
		require.Equal(t, p.RenderVersion, got.RenderVersion, "stored")
		rep, err := packets.Replay(ctx, admin, "acme", p.ID)
		require.NoError(t, err)
		require.True(t, rep.Identical, "render version %d replays as it was: %+v", p.RenderVersion, rep.Differences)
	}
}

// services are the item and packet services over a fresh database, with
// an admin and one project.
func services(t *testing.T, proj string) (context.Context, *item.Service, *packet.Service, *auth.Agent) {
	t.Helper()
	pool := pgtest.New(t)
	st := store.New(pool, 0)
	ctx := context.Background()
	projects := project.NewService(st)
	items := item.NewService(st, projects)
	packets := packet.NewService(st, projects, handoff.NewService(st, projects, handoff.NewHub(st)))
	admin := &auth.Agent{ID: "agt_test", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}}
	_, _, err := projects.Put(ctx, admin, proj, "")
	require.NoError(t, err)
	return ctx, items, packets, admin
}
