package store

import (
	"context"
	"github.com/contextd/contextd/internal/audit"
	"time"

	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// Project is a stored project.
type Project struct {
	Name        string
	Description string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func projectOf(r dbsqlc.Project) Project {
	return Project{Name: r.Project, Description: r.Description, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// ProjectGet is a project by name.
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
	Max      int
}

// ProjectList is a page of projects by name.
func (db DB) ProjectList(ctx context.Context, p ProjectListParams) ([]Project, error) {
	rows, err := q.ProjectList(ctx, db.ex, dbsqlc.ProjectListParams{After: p.After, AllProjects: p.All, Projects: p.Projects, Max: int32(p.Max)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]Project, len(rows))
	for i, r := range rows {
		out[i] = projectOf(r)
	}
	return out, nil
}

// ProjectUpsert creates or changes a project and reports whether it was
// created, with the project's audit entry.
func (tx *Tx) ProjectUpsert(ctx context.Context, name, description string) (Project, bool, error) {
	r, err := q.ProjectUpsert(ctx, tx.ex, dbsqlc.ProjectUpsertParams{Project: name, Description: description})
	if err != nil {
		return Project{}, false, interpret(err)
	}
	row := dbsqlc.Project{Project: r.Project, Description: r.Description, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	body, err := audit.ProjectBody(projectRow(row))
	if err := tx.entry(name, audit.KindProject, name, body, err); err != nil {
		return Project{}, false, err
	}
	return projectOf(row), r.Inserted, nil
}
