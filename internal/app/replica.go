package app

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// OpenReplica opens the read replica cfg names (--read-database-url) with
// the primary's pool settings; nil when none is configured. A replica
// that does not answer at start does not stop the start: its reads go to
// the primary until it answers (store.OpenReplica). Close it after the
// store.
func OpenReplica(ctx context.Context, cfg Config) (*store.Replica, error) {
	if cfg.ReadDatabaseURL == "" {
		return nil, nil
	}
	rc := cfg.Store
	rc.URL = cfg.ReadDatabaseURL
	wait := cfg.ReadWait
	if wait == 0 {
		wait = -1 // --read-wait 0: never wait (store's zero is its default)
	}
	return store.OpenReplica(ctx, store.ReplicaConfig{Store: rc, Wait: wait})
}

// WithReplica makes the store read history from r (nil: from the primary
// alone) and the metrics report how far behind it is.
func WithReplica(r *store.Replica) Option { return func(a *App) { a.Replica = r } }
