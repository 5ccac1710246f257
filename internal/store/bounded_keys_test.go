package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// The by-key reads probe once per key (queries/bounded.sql); they answer
// each live item once however often its key, pin, layer or state key is
// asked, as "= ANY" did, and nothing for keys no live item has.
func TestBoundedByKeyReadsAnswerEachItemOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	a := app.New(st)
	admin, _, err := a.Agents.Bootstrap(ctx)
	require.NoError(t, err)
	_, _, err = a.Projects.Put(ctx, admin, "acme", "")
	require.NoError(t, err)
	sk := "deploy-target"
	_, err = a.Items.Batch(ctx, admin, "acme", []item.Input{
		{Key: "a", Content: "first", StateKey: &sk}, {Key: "b", Content: "second", StateKey: &sk}, {Key: "c", Content: "third"}})
	require.NoError(t, err)
	keys := func(vs []*ctxtype.Version) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Project+"/"+v.Key)
		}
		return out
	}
	layers := []string{"acme", ctxtype.SharedProject, "acme"}
	require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) error {
		vs, err := tx.BoundedByKeys(ctx, "acme", []string{"a", "c", "a", "nope"})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"acme/a", "acme/c"}, keys(vs))
		vs, err = tx.BoundedSmall(ctx, layers, []string{"b", "b", "c"})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"acme/b", "acme/c"}, keys(vs))
		vs, err = tx.BoundedStateGroups(ctx, layers, []string{sk, sk, "other"})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"acme/a", "acme/b"}, keys(vs))
		return nil
	}))
}
