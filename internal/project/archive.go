package project

import (
	"context"
	"fmt"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// A project is retired by archiving it, never by deleting it: its items,
// packets, handoffs and audit chain are evidence that other chains and
// packets may point to. An archived project leaves the project lists and
// refuses every write and packet (fault.ErrGone: 410 gone), while its
// history stays readable; a restore brings it back. Each archive and
// restore is an entry of the project's chain: its row after the change,
// which names who made it.

// Get is a project the agent may read, archived or not.
func (s *Service) Get(ctx context.Context, agent *auth.Agent, name string) (store.Project, error) {
	if err := s.Authorize(ctx, agent, name, auth.ReadOnly); err != nil {
		return store.Project{}, err
	}
	p, err := s.store.ProjectGet(ctx, name)
	if err != nil {
		return store.Project{}, fmt.Errorf("get project %s: %w", name, err)
	}
	return p, nil
}

// Archive archives a project (admin of it) in a transaction of its own.
func (s *Service) Archive(ctx context.Context, agent *auth.Agent, name string) (p store.Project, err error) {
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		p, err = s.ArchiveTx(ctx, tx, agent, name)
		return err
	})
	return p, err
}

// ArchiveTx is Archive inside the caller's transaction. It waits for the
// writes in flight in the project to commit; any that comes later is
// refused. _shared, which every packet reads, cannot be archived; an
// archived project is fault.ErrGone.
func (s *Service) ArchiveTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, name string) (store.Project, error) {
	if err := s.AuthorizeIn(ctx, tx.DB, agent, name, auth.Admin); err != nil {
		return store.Project{}, err
	}
	if name == auth.SharedProject {
		return store.Project{}, validation.One("project", "reserved", "%s holds the shared defaults every packet reads; it cannot be archived", auth.SharedProject)
	}
	p, err := tx.ProjectArchive(ctx, name, agent.ID)
	if err != nil {
		return store.Project{}, fmt.Errorf("archive project: %w", err)
	}
	return p, nil
}

// Restore brings an archived project back (admin of it) in a transaction
// of its own.
func (s *Service) Restore(ctx context.Context, agent *auth.Agent, name string) (p store.Project, err error) {
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		p, err = s.RestoreTx(ctx, tx, agent, name)
		return err
	})
	return p, err
}

// RestoreTx is Restore inside the caller's transaction; a project that is
// not archived is fault.ErrConflict.
func (s *Service) RestoreTx(ctx context.Context, tx *store.Tx, agent *auth.Agent, name string) (store.Project, error) {
	if err := s.AuthorizeIn(ctx, tx.DB, agent, name, auth.Admin); err != nil {
		return store.Project{}, err
	}
	p, err := tx.ProjectRestore(ctx, name, agent.ID)
	if err != nil {
		return store.Project{}, fmt.Errorf("restore project: %w", err)
	}
	return p, nil
}

// Writable is the check every write in a project makes inside its
// transaction: the project takes writes, and keeps taking them until the
// transaction ends, so a write racing an archive either commits before it
// or is refused with fault.ErrGone. The check goes with the transaction's
// next statement and costs no round trip; its error is reported by that
// statement's call, or by COMMIT.
func (s *Service) Writable(ctx context.Context, tx *store.Tx, name string) error {
	return tx.ProjectWritable(ctx, name)
}
