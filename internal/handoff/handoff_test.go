package handoff_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// world is the services on a database of their own, with project acme and
// its agents.
type world struct {
	t   *testing.T
	svc *handoff.Service
	// implementer and planner are edit agents of the same project;
	// admin is an admin of acme only, outsider an admin of another project.
	implementer, planner, admin, outsider *auth.Agent
}

func setup(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	a := app.New(pgtest.NewStore(t))
	root, _, err := a.Agents.Bootstrap(ctx)
	require.NoError(t, err)
	for _, p := range []string{"acme", "other"} {
		_, _, err = a.Projects.Put(ctx, root, p, "test")
		require.NoError(t, err)
	}
	agent := func(role string, perm auth.Permission, project string) *auth.Agent {
		ag, _, err := a.Agents.CreateLocal(ctx, auth.CreateParams{Name: role + "-" + project, Role: role, Permission: perm, Projects: []string{project}})
		require.NoError(t, err)
		return ag
	}
	return &world{t: t, svc: a.Handoffs, implementer: agent("implementer", auth.Edit, "acme"), planner: agent("planner", auth.Edit, "acme"),
		admin: agent("lead", auth.Admin, "acme"), outsider: agent("lead", auth.Admin, "other")}
}

func manifest(task, target string) handoff.Manifest {
	return handoff.Manifest{TaskID: task, Intent: "request_review", Target: handoff.Target{Role: target}, Summary: "patch for " + task}
}

func (w *world) create(agent *auth.Agent, m handoff.Manifest) *handoff.Handoff {
	w.t.Helper()
	h, err := w.svc.Create(context.Background(), agent, "acme", m)
	require.NoError(w.t, err)
	return h
}

func (w *world) status(id string) string {
	w.t.Helper()
	d, err := w.svc.Get(context.Background(), w.admin, "acme", id)
	require.NoError(w.t, err)
	return d.Status
}

// An edit agent that may not withdraw another's pending handoff may not
// supersede it by creating its own either: 409 conflict naming it, and
// nothing is written.
func TestCreateRefusesToSupersedeAnotherSourcesHandoff(t *testing.T) {
	t.Parallel()
	w := setup(t)
	pending := w.create(w.implementer, manifest("T-1", "critic"))

	_, err := w.svc.Create(context.Background(), w.planner, "acme", manifest("T-1", "critic"))
	require.ErrorIs(t, err, fault.ErrConflict)
	require.False(t, errors.Is(err, fault.ErrStateConflict), "a conflict, not an invalid transition")
	require.ErrorContains(t, err, pending.ID)
	require.Equal(t, handoff.Pending, w.status(pending.ID))
	all, _, err := w.svc.List(context.Background(), w.admin, "acme", handoff.ListParams{TaskID: "T-1", Limit: 10})
	require.NoError(t, err)
	require.Len(t, all, 1, "no new handoff stored")
	d, err := w.svc.Get(context.Background(), w.admin, "acme", pending.ID)
	require.NoError(t, err)
	require.Len(t, d.Events, 1, "only its creation")

	// An admin of another project is no admin here (it cannot even see acme).
	_, err = w.svc.Create(context.Background(), w.outsider, "acme", manifest("T-1", "critic"))
	require.ErrorIs(t, err, fault.ErrNotFound)
	require.Equal(t, handoff.Pending, w.status(pending.ID))
}

// The source itself supersedes its pending handoff, as before.
func TestCreateBySourceSupersedes(t *testing.T) {
	t.Parallel()
	w := setup(t)
	first := w.create(w.implementer, manifest("T-1", "critic"))
	second := w.create(w.implementer, manifest("T-1", "critic"))
	d, err := w.svc.Get(context.Background(), w.admin, "acme", first.ID)
	require.NoError(t, err)
	require.Equal(t, handoff.Superseded, d.Status)
	require.Equal(t, second.ID, d.SupersededBy)
	require.Equal(t, handoff.Pending, w.status(second.ID))
}

// An admin of the project supersedes anyone's pending handoff.
func TestCreateByAdminSupersedes(t *testing.T) {
	t.Parallel()
	w := setup(t)
	first := w.create(w.implementer, manifest("T-1", "critic"))
	second := w.create(w.admin, manifest("T-1", "critic"))
	d, err := w.svc.Get(context.Background(), w.admin, "acme", first.ID)
	require.NoError(t, err)
	require.Equal(t, handoff.Superseded, d.Status)
	require.Equal(t, second.ID, d.SupersededBy)
	require.Equal(t, w.admin.ID, d.Events[len(d.Events)-1].Actor)
}

// Another target role, or another task, is another handoff: no conflict,
// and the pending one stays pending.
func TestCreateForAnotherTargetDoesNotConflict(t *testing.T) {
	t.Parallel()
	w := setup(t)
	pending := w.create(w.implementer, manifest("T-1", "critic"))
	w.create(w.planner, manifest("T-1", "verifier"))
	w.create(w.planner, manifest("T-2", "critic"))
	require.Equal(t, handoff.Pending, w.status(pending.ID))
}

// A handoff that left pending (withdrawn by its source) is no conflict:
// only pending ones are checked, so another agent takes the task over.
func TestCreateAfterWithdrawDoesNotConflict(t *testing.T) {
	t.Parallel()
	w := setup(t)
	first := w.create(w.implementer, manifest("T-1", "critic"))
	_, err := w.svc.Transition(context.Background(), w.implementer, "acme", first.ID, handoff.Withdraw, "planner takes over")
	require.NoError(t, err)
	second := w.create(w.planner, manifest("T-1", "critic"))
	require.Equal(t, handoff.Pending, w.status(second.ID))
}

// A withdrawal is withdrawn, in the handoff and its event, and a second
// move of it is a state conflict naming withdrawn.
func TestWithdrawIsWithdrawn(t *testing.T) {
	t.Parallel()
	w := setup(t)
	h := w.create(w.implementer, manifest("T-1", "critic"))
	out, err := w.svc.Transition(context.Background(), w.implementer, "acme", h.ID, handoff.Withdraw, "wrong branch")
	require.NoError(t, err)
	require.Equal(t, handoff.Withdrawn, out.Status)
	d, err := w.svc.Get(context.Background(), w.admin, "acme", h.ID)
	require.NoError(t, err)
	ev := d.Events[len(d.Events)-1]
	require.Equal(t, []string{"withdrawn", handoff.Pending, handoff.Withdrawn}, []string{ev.Event, ev.FromStatus, ev.ToStatus})
	_, err = w.svc.Transition(context.Background(), w.implementer, "acme", h.ID, handoff.Withdraw, "again")
	var te *handoff.TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, handoff.Withdrawn, te.CurrentStatus)
	require.True(t, handoff.WasWithdrawn(handoff.Withdrawn, ""))
	require.True(t, handoff.WasWithdrawn(handoff.Superseded, ""), "stored before withdrawn had a status of its own")
	require.False(t, handoff.WasWithdrawn(handoff.Superseded, "hnd_newer"))
}
