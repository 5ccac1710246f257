// Package app is contextd's composition root: it builds the store and every
// service once per process, in one place, and hands the result to each
// transport (HTTP today; MCP, the UI and the bench command later), so a new
// transport never rebuilds the graph and every event stream of the process
// shares one LISTEN connection.
package app

import (
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/ledger"
	"github.com/contextd/contextd/internal/obs"
	"github.com/contextd/contextd/internal/outcome"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/rolepolicy"
	"github.com/contextd/contextd/internal/store"
)

// App is the services of one process over one store.
type App struct {
	Store    *store.Store
	Agents   *auth.Service
	Projects *project.Service
	Items    *item.Service
	Packets  *packet.Service
	Handoffs *handoff.Service
	Evidence *evidence.Service
	// Outcomes are how packets' answers went (issue 36).
	Outcomes *outcome.Service
	// Ledger is what each item cost and earned (issue 36).
	Ledger *ledger.Service
	// RolePolicies are the policies per role (issue 37).
	RolePolicies *rolepolicy.Service
	// Keys are the deployment's audit secret (checkpoints, idempotency
	// answers); nil when none is configured.
	Keys *evidence.Keys
	// Obs is the process's metrics and tracer (package obs): the packet
	// service reports its stages to it, the transports their requests.
	Obs *obs.Obs
	// Replica is the read replica the store reads history from; nil: none.
	Replica *store.Replica
}

// Option configures New.
type Option func(*App)

// WithKeys gives the services the deployment's audit secret, and the
// store the sealer of every transaction's entries.
func WithKeys(k *evidence.Keys) Option { return func(a *App) { a.Keys = k } }

// WithObs gives the process's metrics and tracer; without it New makes
// metrics over the store of their own and traces nothing.
func WithObs(o *obs.Obs) Option { return func(a *App) { a.Obs = o } }

// New builds the services over st.
func New(st *store.Store, opts ...Option) *App {
	var o App
	for _, opt := range opts {
		opt(&o)
	}
	if o.Obs == nil {
		var stats func() store.Stats
		if st != nil {
			stats = st.Stats
		}
		o.Obs = obs.New(stats, nil)
	}
	if st != nil && o.Replica != nil {
		st.UseReplica(o.Replica)
		o.Obs.Metrics.ObserveReplica(st.ReplicaStatus)
	}
	if st != nil && o.Keys != nil {
		// Every write of this process seals its entries with the key.
		st.SealWith(o.Keys.Seal)
	}
	projects := project.NewService(st)
	handoffs := handoff.NewService(st, projects, handoff.NewHub(st))
	packets := packet.NewService(st, projects, handoffs)
	packets.ObserveStages(o.Obs.Stages())
	if o.Keys != nil {
		packets.ProveWith(evidence.SealCheck(o.Keys.PublicKey()))
	}
	items := item.NewService(st, projects)
	return &App{
		Obs:      o.Obs,
		Keys:     o.Keys,
		Replica:  o.Replica,
		Store:    st,
		Agents:   auth.NewService(st),
		Projects: projects,
		Items:    items,
		Packets:  packets,
		Handoffs: handoffs,
		Evidence: evidence.NewService(st, projects, o.Keys),
		Outcomes: outcome.NewService(st, projects, packets),
		Ledger:   ledger.NewService(st, projects, items),

		RolePolicies: rolepolicy.NewService(st, projects),
	}
}
