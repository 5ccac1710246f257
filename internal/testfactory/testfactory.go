// Package testfactory makes the rows a store-backed test starts from — a
// project, an agent, an item, a handoff, a packet — on a pgtest database.
//
// Every row is written through the services the server uses (package
// app), not by SQL: a row made here is validated, authorized, written in
// the service's transaction and chained into the audit log exactly as in
// production, so a test of one package cannot pass on a row the others
// would never write. A test names only what it is about in an Opts; the
// defaults fill the rest with values that pass validation. A nil Opts is
// all defaults. Any failure ends the test (t.Fatal), since a factory that
// cannot write means the test's premise does not hold.
package testfactory

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// seq numbers default names, so two rows made with defaults never collide
// (or silently update one another) in one database.
var seq atomic.Int64

func next(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// Store is a store on a fresh migrated database of the test's own
// (pgtest.New), for tests that need no pool of their own.
func Store(t testing.TB) *store.Store {
	t.Helper()
	return store.New(pgtest.New(t), 0)
}

// services are the process's services over st, built as serve builds
// them. Services hold caches only, so a fresh set per call writes the
// same rows as a long-lived one would.
func services(st *store.Store) *app.App { return app.New(st) }

func check(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("testfactory: %s: %v", what, err)
	}
}

// AgentOpts overrides the defaults of Agent.
type AgentOpts struct {
	Name         string          // default: the role
	Role         string          // default "implementer"
	Permission   auth.Permission // default auth.Edit
	Projects     []string        // default every project ("*")
	MaxAuthority string          // default: the permission's
	// By is the admin that grants the agent (auth.Service.Create, which
	// checks it); nil: the operator's command line (CreateLocal), which
	// needs no caller.
	By *auth.Agent
}

// Agent creates an agent and returns it with its API key, the one time
// the key is known.
func Agent(t testing.TB, st *store.Store, o *AgentOpts) (*auth.Agent, string) {
	t.Helper()
	if o == nil {
		o = &AgentOpts{}
	}
	p := auth.CreateParams{Name: o.Name, Role: o.Role, Permission: o.Permission, Projects: o.Projects, MaxAuthority: o.MaxAuthority}
	if p.Role == "" {
		p.Role = "implementer"
	}
	if p.Name == "" {
		p.Name = p.Role
	}
	if p.Permission == "" {
		p.Permission = auth.Edit
	}
	if p.Projects == nil {
		p.Projects = []string{auth.AllProjects}
	}
	var (
		a   *auth.Agent
		key string
		err error
	)
	if o.By != nil {
		a, key, err = services(st).Agents.Create(t.Context(), o.By, p)
	} else {
		a, key, err = services(st).Agents.CreateLocal(t.Context(), p)
	}
	check(t, "create agent "+p.Name, err)
	return a, key
}

// Admin creates an admin of every project: the default writer of the
// other factories.
func Admin(t testing.TB, st *store.Store) *auth.Agent {
	t.Helper()
	a, _ := Agent(t, st, &AgentOpts{Role: "admin", Permission: auth.Admin})
	return a
}

// orAdmin is by, or a new admin when nil.
func orAdmin(t testing.TB, st *store.Store, by *auth.Agent) *auth.Agent {
	t.Helper()
	if by != nil {
		return by
	}
	return Admin(t, st)
}

// ProjectOpts overrides the defaults of Project.
type ProjectOpts struct {
	Name        string      // default a fresh "project-N"
	Description string      // default ""
	By          *auth.Agent // default a new admin
}

// Project creates (or, for an existing name, updates) a project.
func Project(t testing.TB, st *store.Store, o *ProjectOpts) store.Project {
	t.Helper()
	if o == nil {
		o = &ProjectOpts{}
	}
	name := o.Name
	if name == "" {
		name = next("project")
	}
	p, _, err := services(st).Projects.Put(t.Context(), orAdmin(t, st, o.By), name, o.Description)
	check(t, "put project "+name, err)
	return p
}

// ItemOpts overrides the defaults of Item. Input is the item as a client
// writes it: an empty Key is a fresh "item-N", an empty Content says which
// item it is, a nil Trigger fires always (the service's own default,
// stated so that a reader need not look it up).
type ItemOpts struct {
	item.Input
	By *auth.Agent // default a new admin
}

// Item writes one item to proj and returns the version written.
func Item(t testing.TB, st *store.Store, proj string, o *ItemOpts) *ctxtype.Version {
	t.Helper()
	if o == nil {
		o = &ItemOpts{}
	}
	in := o.Input
	if in.Key == "" {
		in.Key = next("item")
	}
	if in.Content == "" {
		in.Content = "The content of item " + in.Key + "."
	}
	if in.Trigger == nil {
		in.Trigger = &ctxtype.Trigger{Always: true}
	}
	res, err := services(st).Items.Put(t.Context(), orAdmin(t, st, o.By), proj, in, item.PutOpts{})
	check(t, "put item "+proj+"/"+in.Key, err)
	return res.Version
}

// HandoffOpts overrides the defaults of Handoff. Manifest is the handoff
// as its source writes it: an empty TaskID is a fresh "task-N", an empty
// target role "reviewer", an empty intent "request_review".
type HandoffOpts struct {
	handoff.Manifest
	By *auth.Agent // default a new admin
}

// Handoff creates a pending handoff in proj.
func Handoff(t testing.TB, st *store.Store, proj string, o *HandoffOpts) *handoff.Handoff {
	t.Helper()
	if o == nil {
		o = &HandoffOpts{}
	}
	m := o.Manifest
	if m.TaskID == "" {
		m.TaskID = next("task")
	}
	if m.Target.Role == "" {
		m.Target.Role = "reviewer"
	}
	if m.Intent == "" {
		m.Intent = "request_review"
	}
	if m.Summary == "" {
		m.Summary = "Handoff of " + m.TaskID + "."
	}
	h, err := services(st).Handoffs.Create(t.Context(), orAdmin(t, st, o.By), proj, m)
	check(t, "create handoff in "+proj, err)
	return h
}

// PacketOpts overrides the defaults of Packet. Request is the assembly
// request: an empty target role is "implementer", a zero budget the
// service's default.
type PacketOpts struct {
	ctxtype.Request
	By *auth.Agent // default a new admin (which may assemble for any role)
}

// Packet assembles and stores a packet in proj, as POST .../packets does.
func Packet(t testing.TB, st *store.Store, proj string, o *PacketOpts) *packet.Packet {
	t.Helper()
	if o == nil {
		o = &PacketOpts{}
	}
	req := o.Request
	if req.TargetRole == "" {
		req.TargetRole = "implementer"
	}
	p, err := services(st).Packets.Assemble(t.Context(), orAdmin(t, st, o.By), proj, &req)
	check(t, "assemble packet in "+proj, err)
	return p
}
