package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// Project is a stored project.
type Project struct {
	Name        string
	Description string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// ArchivedAt and ArchivedBy are set while the project is archived.
	ArchivedAt *time.Time
	ArchivedBy *string
	// OnExcessAuthority is what an item write claiming more authority than
	// its writer's grant or its source's ceiling allow becomes: refused
	// (refuse, the default) or a proposal (propose); migration 00036.
	OnExcessAuthority string
}

// Archived reports whether the project is archived.
func (p Project) Archived() bool { return p.ArchivedAt != nil }

func projectOf(r dbsqlc.Project) Project {
	return Project{Name: r.Project, Description: r.Description, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ArchivedAt: r.ArchivedAt, ArchivedBy: r.ArchivedBy, OnExcessAuthority: r.OnExcessAuthority}
}

// ProjectGet is a project by name, archived or not.
func (db DB) ProjectGet(ctx context.Context, name string) (Project, error) {
	r, err := q.ProjectGet(ctx, db.ex, name)
	if err != nil {
		return Project{}, interpret(err)
	}
	return projectOf(r), nil
}

// ProjectListParams pages through projects by name.
type ProjectListParams struct {
	After    string
	All      bool     // every project
	Projects []string // else only these
	Archived bool     // the archived projects only, else the live ones
	Max      int
}

// ProjectList is a page of projects by name.
func (db DB) ProjectList(ctx context.Context, p ProjectListParams) ([]Project, error) {
	rows, err := q.ProjectList(ctx, db.ex, dbsqlc.ProjectListParams{After: p.After, AllProjects: p.All, Projects: p.Projects,
		Archived: p.Archived, Max: int32(p.Max)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]Project, len(rows))
	for i, r := range rows {
		out[i] = projectOf(r)
	}
	return out, nil
}

// archived is an archived project's refusal of a write, worded as
// contextd_project_writable words it.
func archived(name string) error {
	return fmt.Errorf("%w: project %s is archived", fault.ErrGone, name)
}

// ProjectUpsert creates or changes a project and reports whether it was
// created, with the project's audit entry. An archived project is not
// changed: fault.ErrGone. A nil onExcessAuthority keeps the project's
// (refuse for a new one).
func (tx *Tx) ProjectUpsert(ctx context.Context, name, description string, onExcessAuthority *string) (Project, bool, error) {
	r, err := q.ProjectUpsert(ctx, tx.ex, dbsqlc.ProjectUpsertParams{Project: name, Description: description,
		OnExcessAuthority: onExcessAuthority})
	if errors.Is(err, pgx.ErrNoRows) { // the row exists, and the update's WHERE refused it
		return Project{}, false, archived(name)
	}
	if err != nil {
		return Project{}, false, interpret(err)
	}
	row := dbsqlc.Project{Project: r.Project, Description: r.Description, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ArchivedAt: r.ArchivedAt, ArchivedBy: r.ArchivedBy, RestoredAt: r.RestoredAt, RestoredBy: r.RestoredBy,
		OnExcessAuthority: r.OnExcessAuthority}
	if err := tx.auditProject(row); err != nil {
		return Project{}, false, err
	}
	return projectOf(row), r.Inserted, nil
}

// ProjectArchive archives a live project as agent, with the project's
// audit entry (its row, which names agent). It waits for the writes in
// flight in the project (each holds its row, ProjectWritable) and is
// fault.ErrGone when the project is archived already, fault.ErrNotFound
// when there is none.
func (tx *Tx) ProjectArchive(ctx context.Context, name, agent string) (Project, error) {
	r, err := q.ProjectArchive(ctx, tx.ex, dbsqlc.ProjectArchiveParams{Project: name, Agent: &agent})
	if errors.Is(err, pgx.ErrNoRows) {
		return Project{}, tx.projectMissingOr(ctx, name, archived(name))
	}
	if err != nil {
		return Project{}, interpret(err)
	}
	if err := tx.auditProject(r); err != nil {
		return Project{}, err
	}
	return projectOf(r), nil
}

// ErrProjectNotArchived is a restore of a project that is not archived.
var ErrProjectNotArchived = fmt.Errorf("%w: the project is not archived", fault.ErrConflict)

// ProjectRestore brings an archived project back as agent, with the
// project's audit entry; ErrProjectNotArchived when it is not archived.
func (tx *Tx) ProjectRestore(ctx context.Context, name, agent string) (Project, error) {
	r, err := q.ProjectRestore(ctx, tx.ex, dbsqlc.ProjectRestoreParams{Project: name, Agent: &agent})
	if errors.Is(err, pgx.ErrNoRows) {
		return Project{}, tx.projectMissingOr(ctx, name, fmt.Errorf("%w: %s", ErrProjectNotArchived, name))
	}
	if err != nil {
		return Project{}, interpret(err)
	}
	if err := tx.auditProject(r); err != nil {
		return Project{}, err
	}
	return projectOf(r), nil
}

// projectMissingOr is the error of a conditional update of a project that
// found no row: fault.ErrNotFound when there is no project, else other.
func (tx *Tx) projectMissingOr(ctx context.Context, name string, other error) error {
	if _, err := q.ProjectGet(ctx, tx.ex, name); err != nil {
		return interpret(err)
	}
	return fmt.Errorf("%w: %s", other, name)
}

func (tx *Tx) auditProject(r dbsqlc.Project) error {
	body, err := audit.ProjectBody(projectRow(r))
	return tx.entry(r.Project, audit.KindProject, r.Project, body, err)
}

// ProjectWritable makes sure project takes writes until tx ends: it holds
// the project's row (FOR SHARE, so an archive waits for tx, and tx, when
// an archive came first, waits for it and sees it) and fails the
// transaction with fault.ErrGone when the project is archived. It
// sends nothing on its own: the check goes with tx's next statement (its
// COMMIT at the latest), which reports its error, so a write pays no round
// trip for it. A project that does not exist is left to the write's own
// checks.
func (tx *Tx) ProjectWritable(ctx context.Context, project string) error {
	return interpret(tx.waitForNext(ctx, func() error { return q.ProjectWritable(ctx, tx.ex, project) }))
}
