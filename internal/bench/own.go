package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// What bench makes on a server is told from what its users make by name
// and description: every project it makes is named bench-… and described
// "contextd bench …" (the corpus's marker, or the mode's), every agent is
// named bench-<run>-… and scoped to bench projects alone. Bench writes
// only in projects of its own (claim), never in _shared unless the server
// is its own (Config.Dedicated), and Clean removes what it made.
const (
	benchNamePrefix = "bench-"
	benchDescPrefix = "contextd bench"
)

// projectInfo is a project as the API answers it.
type projectInfo struct {
	Project     string  `json:"project"`
	Description string  `json:"description"`
	ArchivedAt  *string `json:"archived_at"`
}

// benchMade reports whether bench made the project.
func (p projectInfo) benchMade() bool {
	return strings.HasPrefix(p.Project, benchNamePrefix) && strings.HasPrefix(p.Description, benchDescPrefix)
}

// claim makes sure bench may write in the projects named: each is missing
// (bench creates it) or one that bench made, brought back if it was
// archived (contextd bench --clean archives them). A project of such a
// name that bench did not make is an error before anything is written.
func (r *runner) claim(ctx context.Context, names ...string) error {
	// Every name is checked before any is restored or written: a refusal
	// leaves the server as it was, and the run reports nothing as its own.
	var archived []string
	for _, name := range names {
		var p projectInfo
		err := r.c.call(ctx, http.MethodGet, "/v1/projects/"+url.PathEscape(name), r.cfg.AdminKey, nil, &p)
		var he *httpError
		if errors.As(err, &he) && he.Status == http.StatusNotFound {
			continue
		}
		if err != nil {
			return fmt.Errorf("look up project %s: %w", name, err)
		}
		if !p.benchMade() {
			return fmt.Errorf("project %s exists and bench did not make it (its description does not begin with %q): bench writes only in projects of its own", name, benchDescPrefix)
		}
		if p.ArchivedAt != nil {
			archived = append(archived, name)
		}
	}
	for _, name := range archived {
		if err := r.c.call(ctx, http.MethodPost, "/v1/projects/"+url.PathEscape(name)+"/restore", r.cfg.AdminKey, nil, nil); err != nil {
			return fmt.Errorf("restore bench project %s: %w", name, err)
		}
		r.logf("restored %s, a bench project archived by bench --clean", name)
	}
	r.claimed = append(r.claimed, names...)
	return nil
}

// reportMade says, at the end of a run, what the run made on the server
// and how to remove it: the record a user reads, beside the names.
func (r *runner) reportMade() {
	if len(r.claimed) == 0 && r.agentsMade == 0 {
		return
	}
	names := strings.Join(r.claimed, ", ")
	if len(r.claimed) > 4 {
		names = fmt.Sprintf("%s ... (%d in all)", strings.Join(r.claimed[:3], ", "), len(r.claimed))
	}
	r.logf("this run wrote in projects %s and made %d agents (bench-%s-*); `contextd bench --clean` archives bench projects and revokes bench agents",
		names, r.agentsMade, r.runID)
}
