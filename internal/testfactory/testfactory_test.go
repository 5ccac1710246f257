package testfactory_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/testfactory"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDefaultsAreRealRows: what each factory makes with defaults is
// stored, reads back through the services, and holds the documented
// defaults; two defaults never share a name.
func TestDefaultsAreRealRows(t *testing.T) {
	t.Parallel()
	st := testfactory.Store(t)
	ctx := t.Context()
	svc := app.New(st)

	agent, key := testfactory.Agent(t, st, nil)
	got, err := svc.Agents.Authenticate(ctx, key)
	require.NoError(t, err, "the key returned is the agent's")
	require.Equal(t, agent.ID, got.ID)
	require.Equal(t, "implementer", got.Role)
	require.Equal(t, auth.Edit, got.Permission)
	require.True(t, got.AllScope())

	p1, p2 := testfactory.Project(t, st, nil), testfactory.Project(t, st, nil)
	require.NotEqual(t, p1.Name, p2.Name)
	stored, err := st.ProjectGet(ctx, p1.Name)
	require.NoError(t, err)
	require.Equal(t, p1.Name, stored.Name)

	v := testfactory.Item(t, st, p1.Name, nil)
	require.Equal(t, 1, v.Version)
	require.True(t, v.Trigger.Always, "items fire always by default")
	cur, err := svc.Items.Get(ctx, agent, p1.Name, v.Key, nil)
	require.NoError(t, err)
	require.Equal(t, v.Content, cur.Content)

	h := testfactory.Handoff(t, st, p1.Name, nil)
	require.Equal(t, handoff.Pending, h.Status)
	require.Equal(t, "reviewer", h.Target.Role)

	pk := testfactory.Packet(t, st, p1.Name, nil)
	require.Equal(t, "implementer", pk.TargetRole)
	require.Contains(t, pk.Rendered, v.Content, "an always item is in the default packet")
	_, err = svc.Packets.Get(ctx, agent, p1.Name, pk.ID)
	require.NoError(t, err, "the packet is stored")
}

// TestOptsOverride: what an Opts names is what is written, by the agent it
// names.
func TestOptsOverride(t *testing.T) {
	t.Parallel()
	st := testfactory.Store(t)
	p := testfactory.Project(t, st, &testfactory.ProjectOpts{Name: "acme", Description: "the shop"})
	require.Equal(t, "acme", p.Name)
	require.Equal(t, "the shop", p.Description)

	writer, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Role: "planner", Projects: []string{"acme"}})
	require.Equal(t, []string{"acme"}, writer.Projects)
	v := testfactory.Item(t, st, "acme", &testfactory.ItemOpts{By: writer, Input: item.Input{
		Key: "refunds", Content: "Refunds take five days.", Trigger: &ctxtype.Trigger{Keywords: []string{"refund"}}}})
	require.Equal(t, "refunds", v.Key)
	require.Equal(t, writer.ID, v.CreatedBy)
	require.False(t, v.Trigger.Always)

	pk := testfactory.Packet(t, st, "acme", &testfactory.PacketOpts{By: writer,
		Request: ctxtype.Request{TargetRole: "planner",
			History: []ctxtype.Message{{Role: "user", Author: "person", Content: "Where is my refund?"}}}})
	require.Equal(t, writer.ID, pk.CreatedBy)
	require.Contains(t, pk.Rendered, "Refunds take five days.", "the keyword fired")
}
