// Package demo loads a small, realistic project into a running contextd,
// so that the explorer (/ui) and `why` have something real to show from
// the first minute: the support desk of Larkspur, a made-up app, with
// three agents of different roles (support, billing, a team lead), ~40
// items of every kind and trigger (always-on, keywords word and stem,
// tools, relevance, pins, templates, role-hidden, an expired one, two
// contradictions), one task (T-1042, a customer charged twice) told as
// four packets and four handoffs (rejected, reworked and accepted,
// withdrawn, pending), and a redaction of a card number pasted into a
// ticket note.
//
// It is a client of the API (api/client), like any agent: every item,
// packet and handoff goes through the same checks, records and audit chain
// as a real one, and nothing reaches the database another way. The data
// is support.json, the API's own request bodies; the ids the server gives
// are the only thing that differs from one load to the next.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	apiclient "github.com/contextd/contextd/api/client"
)

// DefaultProject is the project the demo loads into when none is named.
const DefaultProject = "demo-support"

// ErrProjectExists is a refusal: the demo only ever makes a project of its
// own, and writes nothing when the name is taken.
var ErrProjectExists = errors.New("the project already exists")

// ErrUnreachable is no server answering at the client's URL.
var ErrUnreachable = errors.New("no contextd answers")

// Config says where to load the demo.
type Config struct {
	// Admin is a client of the server with an admin's key whose scope
	// covers Project (it makes the project and the agents).
	Admin *apiclient.Client
	// Options are given to the clients the demo makes for its agents'
	// keys (an http.Client with a timeout, say).
	Options []apiclient.ClientOption
	// Project is the project to make (DefaultProject when empty).
	Project string
	// Progress, when not nil, gets a line as each stage begins.
	Progress io.Writer
}

// Result is what a load made, with the server's ids.
type Result struct {
	Project string
	Task    string
	// Items is how many keys were written, Versions how many versions.
	Items, Versions int
	// Kinds counts the items by kind, Triggers by trigger (always,
	// keywords, stem keywords, tool, relevance, pinned_only), Hidden the
	// items restricted to some roles.
	Kinds, Triggers map[string]int
	Hidden          int
	Agents          []Agent
	Packets         []Packet
	Handoffs        []Handoff
	Redactions      []Redaction
	// Try names a packet, a key it included and a key it excluded.
	Try Try
}

// Agent is an agent the demo made, with its key (shown once).
type Agent struct {
	ID, Name, Role, Permission, Key string
}

// Packet is a packet the demo assembled: its name in the data (P1),
// its id, the role and the task's step it was for.
type Packet struct {
	Name, ID, Role, Step string
}

// Handoff is a handoff the demo made, with its status at the end.
type Handoff struct {
	Name, ID, SourceRole, TargetRole, Intent, Status, ReworkOf string
}

// Redaction is a redaction the demo asked for.
type Redaction struct {
	ID, Key, Status string
	Version         int32
}

// Try is what to look at first.
type Try struct {
	Packet, Included, Excluded string
}

// Load loads the demo into a new project. It refuses (ErrProjectExists)
// and writes nothing when the project exists; it writes nothing either
// when no server answers (ErrUnreachable) or the key may not make
// projects. A failure after the project was made leaves what was loaded
// so far, and says so.
func Load(ctx context.Context, cfg Config) (*Result, error) {
	s, err := parseScript(supportJSON)
	if err != nil {
		return nil, err
	}
	if cfg.Project == "" {
		cfg.Project = DefaultProject
	}
	l := &loader{cfg: cfg, s: s, admin: cfg.Admin,
		as: map[string]*apiclient.Client{admin: cfg.Admin}, packets: map[string]*apiclient.Packet{}, handoffs: map[string]string{}}
	if err := l.reach(ctx); err != nil {
		return nil, err
	}
	if err := l.create(ctx); err != nil {
		return nil, err
	}
	if err := l.load(ctx); err != nil {
		return nil, fmt.Errorf("project %s is partly loaded: %w", cfg.Project, err)
	}
	return l.result(ctx)
}

// reach asks the server's /healthz, so that a wrong URL is said as such.
func (l *loader) reach(ctx context.Context) error {
	res, err := l.admin.Raw().GetHealthz(ctx)
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrUnreachable, l.admin.BaseURL(), err)
	}
	return l.admin.ReadAnswer(res, nil, nil)
}

// create makes the project, after making sure it does not exist: a
// project the caller may see in the listing is refused before anything
// is written. A create that finds the project anyway (made meanwhile by
// someone else) is refused too.
func (l *loader) create(ctx context.Context) error {
	limit, cursor := apiclient.Limit(1000), ""
	for {
		var page apiclient.ProjectList
		res, err := l.admin.Raw().ListProjects(ctx, &apiclient.ListProjectsParams{Limit: &limit, Cursor: &cursor})
		if err := l.admin.ReadAnswer(res, err, &page); err != nil {
			return err
		}
		for _, p := range page.Data {
			if p.Project == l.cfg.Project {
				return fmt.Errorf("%w: %s (the demo loads only into a new project; name another with --project)", ErrProjectExists, l.cfg.Project)
			}
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	l.progress("project %s", l.cfg.Project)
	res, err := l.admin.Raw().PutProject(ctx, l.cfg.Project, &apiclient.PutProjectParams{}, apiclient.ProjectWrite{Description: &l.s.Description})
	if err := l.admin.ReadAnswer(res, err, nil); err != nil {
		var p *apiclient.Problem
		if errors.As(err, &p) && p.Status == http.StatusGone {
			// Archived projects are left out of the listing, and an
			// archived project takes no write.
			return fmt.Errorf("%w: %s is archived (restore it, or name another project with --project)", ErrProjectExists, l.cfg.Project)
		}
		return err
	}
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("%w: %s was made by someone else while the demo started (its description is now the demo's; nothing else was written)", ErrProjectExists, l.cfg.Project)
	}
	return nil
}

func (l *loader) progress(format string, args ...any) {
	if l.cfg.Progress != nil {
		fmt.Fprintf(l.cfg.Progress, "demo: "+format+"\n", args...)
	}
}
