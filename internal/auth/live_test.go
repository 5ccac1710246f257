package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// Follow's channel stays open while the agent is unchanged, and closes when
// it is revoked, when its authority changes, and when the follow ends.
func TestFollow(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	svc := auth.NewService(store.New(pool, 0))
	ctx := context.Background()
	admin, _, err := svc.Bootstrap(ctx)
	require.NoError(t, err)
	params := auth.CreateParams{Name: "critic", Role: "critic", Permission: auth.ReadOnly, Projects: []string{"acme"}}

	a, _, err := svc.CreateLocal(ctx, params)
	require.NoError(t, err)
	fctx, cancel := context.WithCancel(ctx)
	gone := svc.Follow(fctx, a)
	require.False(t, closedWithin(gone, 1500*time.Millisecond), "an unchanged agent is followed on (three lookups)")
	_, err = svc.Revoke(ctx, admin, a.ID)
	require.NoError(t, err)
	require.True(t, closedWithin(gone, time.Second), "a revoked agent's follow ends")
	cancel()

	b, _, err := svc.CreateLocal(ctx, params)
	require.NoError(t, err)
	gone = svc.Follow(ctx, b)
	_, err = pool.Exec(ctx, "UPDATE agents SET projects = '{acme,other}' WHERE id = $1", b.ID)
	require.NoError(t, err)
	require.True(t, closedWithin(gone, time.Second), "an agent whose scope changed is authorized anew")

	c, _, err := svc.CreateLocal(ctx, params)
	require.NoError(t, err)
	fctx, cancel = context.WithCancel(ctx)
	gone = svc.Follow(fctx, c)
	cancel()
	require.True(t, closedWithin(gone, time.Second), "the follow ends with its context")
}
