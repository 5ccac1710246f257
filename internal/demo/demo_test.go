package demo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	apiclient "github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/demo"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/testhttp"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// start is a server on a database of its own, and a client of it with
// the admin's key.
func start(t *testing.T) (*testhttp.Server, *apiclient.Client) {
	t.Helper()
	srv := testhttp.Start(t, pgtest.NewStore(t), testhttp.Options{})
	c, err := apiclient.New(srv.URL, srv.Admin, apiclient.WithHTTPClient(srv.HTTP))
	require.NoError(t, err)
	return srv, c
}

func load(t *testing.T, srv *testhttp.Server, c *apiclient.Client, project string) (*demo.Result, error) {
	t.Helper()
	return demo.Load(t.Context(), demo.Config{Admin: c, Options: []apiclient.ClientOption{apiclient.WithHTTPClient(srv.HTTP)}, Project: project})
}

// every pages through a listing and returns all its rows.
func every[T any](t *testing.T, c *apiclient.Client, page func(cursor *string) (*[]T, *string, error)) []T {
	t.Helper()
	var out []T
	var cursor *string
	for {
		data, next, err := page(cursor)
		require.NoError(t, err)
		out = append(out, *data...)
		if next == nil {
			return out
		}
		cursor = next
	}
}

func items(t *testing.T, c *apiclient.Client, project string) []apiclient.Item {
	return every(t, c, func(cursor *string) (*[]apiclient.Item, *string, error) {
		var p apiclient.ItemList
		res, err := c.Raw().ListItems(t.Context(), project, &apiclient.ListItemsParams{Cursor: cursor})
		err = c.ReadAnswer(res, err, &p)
		return &p.Data, p.NextCursor, err
	})
}

func packets(t *testing.T, c *apiclient.Client, project string) []apiclient.PacketSummary {
	return every(t, c, func(cursor *string) (*[]apiclient.PacketSummary, *string, error) {
		var p apiclient.PacketList
		res, err := c.Raw().ListPackets(t.Context(), project, &apiclient.ListPacketsParams{Cursor: cursor})
		err = c.ReadAnswer(res, err, &p)
		return &p.Data, p.NextCursor, err
	})
}

func agents(t *testing.T, c *apiclient.Client) []apiclient.Agent {
	return every(t, c, func(cursor *string) (*[]apiclient.Agent, *string, error) {
		var p apiclient.AgentList
		res, err := c.Raw().ListAgents(t.Context(), &apiclient.ListAgentsParams{Cursor: cursor})
		err = c.ReadAnswer(res, err, &p)
		return &p.Data, p.NextCursor, err
	})
}

func verify(t *testing.T, c *apiclient.Client, project string) apiclient.AuditVerification {
	t.Helper()
	var v apiclient.AuditVerification
	res, err := c.Raw().VerifyAudit(t.Context(), project)
	require.NoError(t, c.ReadAnswer(res, err, &v))
	return v
}

func globalHead(t *testing.T, c *apiclient.Client) string {
	t.Helper()
	var v apiclient.AuditVerification
	res, err := c.Raw().VerifyGlobalAudit(t.Context())
	require.NoError(t, c.ReadAnswer(res, err, &v))
	require.True(t, v.Ok, "%+v", v)
	return *v.Head
}

// TestDemoLoads loads the demo and checks, through the API, that it made
// what it says and what the explorer and why are to show: ~40 items,
// three agents, four packets, each handoff state, why for an included
// and an excluded item, a role-hidden item, the redaction, a chain that
// verifies.
func TestDemoLoads(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx := t.Context()
	r, err := load(t, srv, c, "")
	require.NoError(t, err)
	require.Equal(t, demo.DefaultProject, r.Project)
	p := r.Project

	// Items: every key the result counts is there, and one per trigger
	// and kind at least.
	its := items(t, c, p)
	require.Len(t, its, r.Items)
	require.GreaterOrEqual(t, r.Items, 40)
	require.Greater(t, r.Versions, r.Items, "some items have a second version")
	for _, k := range []string{"knowledge", "state", "episode", "skill", "decision", "instruction", "evidence", "tool"} {
		require.Positive(t, r.Kinds[k], "kind %s", k)
	}
	for _, tr := range []string{"always", "keywords", "keywords (stem)", "tool", "relevance", "pinned_only"} {
		require.Positive(t, r.Triggers[tr], "trigger %s", tr)
	}
	authorities := map[string]bool{}
	for _, it := range its {
		authorities[it.Authority] = true
	}
	require.Len(t, authorities, 4, "policy, instruction, evidence and hypothesis")

	// Agents: three of the project, of three roles.
	require.Len(t, r.Agents, 3)
	roles := map[string]string{}
	for _, a := range agents(t, c) {
		if len(a.Projects) == 1 && a.Projects[0] == p {
			roles[a.Role] = a.Id
		}
	}
	require.Len(t, roles, 3, "%v", roles)

	// Packets: four, assembled by the agents of their roles.
	pks := packets(t, c, p)
	require.Len(t, pks, 4)
	require.Len(t, r.Packets, 4)
	for _, pk := range pks {
		require.Equal(t, roles[pk.TargetRole], pk.CreatedBy, "packet %s", pk.PacketId)
	}

	checkHandoffs(t, c, r, roles["support"])
	checkWhy(t, srv, c, r)

	// The redaction: done, the card number gone from the packet that
	// included it, the chain still verifying with the redacted entry.
	require.Len(t, r.Redactions, 1)
	var red apiclient.Redaction
	res, err := c.Raw().GetRedaction(ctx, p, r.Redactions[0].ID)
	require.NoError(t, c.ReadAnswer(res, err, &red))
	require.Equal(t, apiclient.RedactionStatus("done"), red.Status)
	require.Positive(t, red.PacketsTotal)
	p1, err := c.Packet(ctx, p, r.Try.Packet)
	require.NoError(t, err)
	require.NotContains(t, p1.Rendered, "4111 1111 1111 1111")
	w, err := c.WhyItem(ctx, p, r.Try.Packet, "ticket.1042.note")
	require.NoError(t, err)
	require.Equal(t, "included", w.Decision)
	require.NotNil(t, w.Redaction, "why names the redaction of the version the packet included")
	v := verify(t, c, p)
	require.True(t, v.Ok, "%+v", v)
	require.NotNil(t, v.Redacted)
	require.Positive(t, *v.Redacted)
}

// checkHandoffs: the task has a handoff in each state, the rejected one
// with its reason and reworked by the accepted one.
func checkHandoffs(t *testing.T, c *apiclient.Client, r *demo.Result, supportID string) {
	t.Helper()
	ctx := t.Context()
	require.Len(t, r.Handoffs, 4)
	byStatus := map[string]demo.Handoff{}
	for _, h := range r.Handoffs {
		got, err := c.Handoff(ctx, r.Project, h.ID)
		require.NoError(t, err)
		require.Equal(t, got.Status, h.Status)
		require.Equal(t, r.Task, got.TaskId)
		byStatus[h.Status] = h
	}
	rejected, err := c.Handoff(ctx, r.Project, byStatus["rejected"].ID)
	require.NoError(t, err)
	require.NotEmpty(t, deref(rejected.StatusReason))
	accepted, err := c.Handoff(ctx, r.Project, byStatus["accepted"].ID)
	require.NoError(t, err)
	require.Equal(t, rejected.Id, deref(accepted.ReworkOf), "the accepted handoff reworks the rejected one")
	require.Contains(t, byStatus, "pending")

	// The withdrawn one (its status's name is not this test's business):
	// its last event takes it out of pending, by its source, with a reason.
	var withdrawn *apiclient.HandoffDetail
	for _, h := range r.Handoffs {
		if h.Status != "rejected" && h.Status != "accepted" && h.Status != "pending" {
			withdrawn, err = c.Handoff(ctx, r.Project, h.ID)
			require.NoError(t, err)
		}
	}
	require.NotNil(t, withdrawn, "%+v", r.Handoffs)
	last := withdrawn.Events[len(withdrawn.Events)-1]
	require.Equal(t, "pending", deref(last.FromStatus))
	require.Equal(t, supportID, last.Actor)
	require.NotEmpty(t, last.Reason)
	require.Nil(t, withdrawn.SupersededBy, "withdrawn, not superseded by another handoff")

	hist, err := c.TaskHistory(ctx, r.Project, r.Task)
	require.NoError(t, err)
	var events, pkts int
	for _, e := range hist.Entries {
		if e.Type == "packet" {
			pkts++
		} else {
			events++
		}
	}
	require.Equal(t, 4, pkts)
	require.Equal(t, 4+3, events, "four creations, a reject, an accept and a withdraw")
}

// checkWhy: the suggested keys answer included and excluded, and an item
// hidden from the packet's role does not exist for that role.
func checkWhy(t *testing.T, srv *testhttp.Server, c *apiclient.Client, r *demo.Result) {
	t.Helper()
	ctx := t.Context()
	in, err := c.WhyItem(ctx, r.Project, r.Try.Packet, r.Try.Included)
	require.NoError(t, err)
	require.Equal(t, "included", in.Decision)
	require.Contains(t, deref(in.Rule), "keyword")
	out, err := c.WhyItem(ctx, r.Project, r.Try.Packet, r.Try.Excluded)
	require.NoError(t, err)
	require.Equal(t, "excluded", out.Decision)
	require.Equal(t, "contradicted", deref(out.Reason))

	hidden, err := c.WhyItem(ctx, r.Project, r.Try.Packet, "billing.fraud-signals")
	require.NoError(t, err)
	require.Equal(t, "hidden", deref(hidden.Reason), "an admin sees the hidden record")
	var support string
	for _, a := range r.Agents {
		if a.Role == "support" {
			support = a.Key
		}
	}
	sc, err := apiclient.New(c.BaseURL(), support, apiclient.WithHTTPClient(srv.HTTP))
	require.NoError(t, err)
	asSupport, err := sc.WhyItem(ctx, r.Project, r.Try.Packet, "billing.fraud-signals")
	require.NoError(t, err)
	require.Equal(t, "did_not_exist", deref(asSupport.Reason))
}

// TestDemoRefusesAnExistingProject: a second load into the same project,
// or into a project made by hand, writes nothing, not even an agent.
func TestDemoRefusesAnExistingProject(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx := t.Context()
	_, err := load(t, srv, c, "desk")
	require.NoError(t, err)
	before, global, nAgents := verify(t, c, "desk"), globalHead(t, c), len(agents(t, c))
	nItems, nPackets := len(items(t, c, "desk")), len(packets(t, c, "desk"))

	_, err = load(t, srv, c, "desk")
	require.ErrorIs(t, err, demo.ErrProjectExists)
	after := verify(t, c, "desk")
	require.Equal(t, before.Head, after.Head, "the project's chain did not move")
	require.Equal(t, global, globalHead(t, c), "no agent was made")
	require.Len(t, agents(t, c), nAgents)
	require.Len(t, items(t, c, "desk"), nItems)
	require.Len(t, packets(t, c, "desk"), nPackets)

	_, err = c.PutProject(ctx, "mine", "someone's own")
	require.NoError(t, err)
	_, err = load(t, srv, c, "mine")
	require.ErrorIs(t, err, demo.ErrProjectExists)
	require.Empty(t, items(t, c, "mine"))
	require.Equal(t, global, globalHead(t, c))

	// An archived project is not in the listing, and is refused all the
	// same, without an agent made.
	res, err := c.Raw().ArchiveProject(ctx, "desk")
	require.NoError(t, c.ReadAnswer(res, err, nil))
	_, err = load(t, srv, c, "desk")
	require.ErrorIs(t, err, demo.ErrProjectExists)
	require.ErrorContains(t, err, "archived")
	require.Equal(t, global, globalHead(t, c))
}

// TestDemoNeedsAServer: no server at the URL is ErrUnreachable.
func TestDemoNeedsAServer(t *testing.T) {
	t.Parallel()
	c, err := apiclient.New("http://127.0.0.1:1", "ctxd_x")
	require.NoError(t, err)
	_, err = demo.Load(context.Background(), demo.Config{Admin: c})
	require.ErrorIs(t, err, demo.ErrUnreachable)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
