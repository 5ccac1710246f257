package project_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/testfactory"
)

// Archive and restore: who may, what each refuses, what the lists show,
// and that each is an entry of the project's chain naming who made it.
func TestArchiveAndRestore(t *testing.T) {
	t.Parallel()
	st, svc, admin := fixture(t)
	ctx := t.Context()
	testfactory.Project(t, st, &testfactory.ProjectOpts{Name: "acme", By: admin, Description: "shop"})
	testfactory.Project(t, st, &testfactory.ProjectOpts{Name: "beta", By: admin})
	editor, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.Edit, Projects: []string{"acme"}})
	betaAdmin, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.Admin, Projects: []string{"beta"}})
	acmeAdmin, _ := testfactory.Agent(t, st, &testfactory.AgentOpts{Permission: auth.Admin, Projects: []string{"acme"}})

	_, err := svc.Archive(ctx, editor, "acme")
	require.ErrorIs(t, err, fault.ErrForbidden, "an editor may not archive")
	_, err = svc.Archive(ctx, betaAdmin, "acme")
	require.ErrorIs(t, err, project.ErrNotFound, "an admin of another project learns nothing")
	_, err = svc.Archive(ctx, admin, "nope")
	require.ErrorIs(t, err, project.ErrNotFound)
	_, err = svc.Archive(ctx, admin, ctxtype.SharedProject)
	require.Equal(t, "reserved", invalidCode(t, err), "_shared is never archived")

	p, err := svc.Archive(ctx, acmeAdmin, "acme")
	require.NoError(t, err)
	require.True(t, p.Archived())
	require.Equal(t, acmeAdmin.ID, *p.ArchivedBy)
	require.Equal(t, "shop", p.Description, "archiving changes nothing else")
	_, err = svc.Archive(ctx, admin, "acme")
	require.ErrorIs(t, err, fault.ErrGone, "archived already")
	_, _, err = svc.Put(ctx, admin, "acme", "changed")
	require.ErrorIs(t, err, fault.ErrGone, "an archived project is not changed")

	live, err := svc.List(ctx, admin, "", 100)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{ctxtype.SharedProject, "beta"}, names(live))
	gone, err := svc.ListArchived(ctx, admin, "", 100)
	require.NoError(t, err)
	require.Equal(t, []string{"acme"}, names(gone))
	gone, err = svc.ListArchived(ctx, betaAdmin, "", 100)
	require.NoError(t, err)
	require.Empty(t, gone, "the archived list keeps to the caller's scope")
	got, err := svc.Get(ctx, editor, "acme")
	require.NoError(t, err, "an archived project stays readable")
	require.True(t, got.Archived())

	_, err = svc.Restore(ctx, editor, "acme")
	require.ErrorIs(t, err, fault.ErrForbidden)
	_, err = svc.Restore(ctx, admin, "beta")
	require.ErrorIs(t, err, fault.ErrConflict, "beta is not archived")
	p, err = svc.Restore(ctx, admin, "acme")
	require.NoError(t, err)
	require.False(t, p.Archived())
	_, err = svc.Restore(ctx, admin, "acme")
	require.ErrorIs(t, err, fault.ErrConflict, "restored already")
	live, err = svc.List(ctx, admin, "", 100)
	require.NoError(t, err)
	require.Contains(t, names(live), "acme")

	// The chain: created, archived by acmeAdmin, restored by admin.
	es, err := st.AuditEntries(ctx, "acme", 0, 100)
	require.NoError(t, err)
	var bodies []map[string]any
	for _, e := range es {
		if e.Kind == audit.KindProject {
			var b map[string]any
			require.NoError(t, json.Unmarshal(e.Body, &b))
			bodies = append(bodies, b)
		}
	}
	require.Len(t, bodies, 3, "an entry each: create, archive, restore (the refused writes made none)")
	require.NotContains(t, bodies[0], "archived_by", "a project never archived has the body it always had")
	require.Equal(t, acmeAdmin.ID, bodies[1]["archived_by"])
	require.NotNil(t, bodies[1]["archived_at"])
	require.NotContains(t, bodies[2], "archived_by")
	require.Equal(t, admin.ID, bodies[2]["restored_by"])
}

func names(ps []store.Project) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// A write racing an archive never lands after it: an archive waits for the
// writes in flight in the project, and a write that comes while an archive
// is in flight waits for it and is refused.
func TestArchiveRacesWrites(t *testing.T) {
	t.Parallel()
	st := testfactory.Store(t)
	a := app.New(st)
	admin := testfactory.Admin(t, st)
	ctx := t.Context()
	testfactory.Project(t, st, &testfactory.ProjectOpts{Name: "acme", By: admin})
	const settle = 300 * time.Millisecond

	// A write in flight: the archive waits for it, and it commits.
	tx, err := st.Begin(ctx, store.TxOpts{})
	require.NoError(t, err)
	t.Cleanup(func() { tx.Rollback(context.Background()) }) // a failed test does not hold its connection
	_, err = a.Items.PutTx(ctx, tx, admin, "acme", item.Input{Key: "first", Content: "written before the archive"}, item.PutOpts{})
	require.NoError(t, err)
	archived := make(chan error, 1)
	go func() {
		_, err := a.Projects.Archive(ctx, admin, "acme")
		archived <- err
	}()
	select {
	case err := <-archived:
		t.Fatalf("the archive did not wait for the write in flight: %v", err)
	case <-time.After(settle):
	}
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-archived)
	v, err := a.Items.Get(ctx, admin, "acme", "first", nil)
	require.NoError(t, err)
	require.Equal(t, 1, v.Version)

	// An archive in flight: the writes wait for it, then are refused.
	_, err = a.Projects.Restore(ctx, admin, "acme")
	require.NoError(t, err)
	tx2, err := st.Begin(ctx, store.TxOpts{})
	require.NoError(t, err)
	t.Cleanup(func() { tx2.Rollback(context.Background()) })
	_, err = a.Projects.ArchiveTx(ctx, tx2, admin, "acme")
	require.NoError(t, err)
	put := make(chan error, 1)
	go func() {
		_, err := a.Items.Put(ctx, admin, "acme", item.Input{Key: "second", Content: "too late"}, item.PutOpts{})
		put <- err
	}()
	pkt := make(chan error, 1)
	go func() {
		_, err := a.Packets.Assemble(ctx, admin, "acme", &ctxtype.Request{TargetRole: "planner"})
		pkt <- err
	}()
	select {
	case err := <-put:
		t.Fatalf("the write did not wait for the archive in flight: %v", err)
	case err := <-pkt:
		t.Fatalf("the packet did not wait for the archive in flight: %v", err)
	case <-time.After(settle):
	}
	require.NoError(t, tx2.Commit(ctx))
	require.ErrorIs(t, <-put, fault.ErrGone)
	require.ErrorIs(t, <-pkt, fault.ErrGone)
	_, err = a.Items.Get(ctx, admin, "acme", "second", nil)
	require.ErrorIs(t, err, fault.ErrNotFound, "the refused write left nothing")
	ps, err := st.PacketIDs(ctx, "acme", "", 10)
	require.NoError(t, err)
	require.Empty(t, ps, "nor did the refused packet")
}
