package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// A batch larger than one chunk of the write path (item.chunkSize, 1000)
// is written a chunk at a time in key order; none of that shows. Its
// answer is in the request's order, its versions share one created_at,
// its search vectors are the function's, and a refusal in its last chunk
// leaves nothing of the chunks written before it.
func TestBatchAcrossChunks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	implementer := e.agent("implementer", auth.Edit, "acme")
	const n = 2500
	items := func(content func(i int) string) []any {
		out := make([]any, 0, n)
		for i := n - 1; i >= 0; i-- { // the reverse of key order
			out = append(out, map[string]any{"key": fmt.Sprintf("k%04d", i), "content": content(i)})
		}
		return out
	}
	first := items(func(i int) string { return fmt.Sprintf("refund rule %d", i) })[:1200] // k2499 .. k1300
	r := e.do("POST", "/v1/projects/acme/items", implementer, map[string]any{"items": first})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, 1200, r.num("created"))

	// Keys k1300.. exist; those divisible by 3 change.
	second := items(func(i int) string {
		if i >= 1300 && i%3 != 0 {
			return fmt.Sprintf("refund rule %d", i)
		}
		return fmt.Sprintf("refund rule %d, revised", i)
	})
	r = e.do("POST", "/v1/projects/acme/items", implementer, map[string]any{"items": second})
	require.Equal(t, 200, r.status, r.text)
	wantUpdated := 0
	for i := 1300; i < n; i++ {
		if i%3 == 0 {
			wantUpdated++
		}
	}
	require.Equal(t, []int{1300, wantUpdated, 1200 - wantUpdated}, []int{r.num("created"), r.num("updated"), r.num("unchanged")})
	entries := r.json["items"].([]any)
	require.Len(t, entries, n)
	for j, raw := range entries {
		i := n - 1 - j
		en := raw.(map[string]any)
		require.Equal(t, fmt.Sprintf("k%04d", i), en["key"], "entry %d is the request's item %d", j, j)
		switch {
		case i < 1300:
			require.Equal(t, "created", en["status"], en)
			require.Equal(t, 1.0, en["version"], en)
		case i%3 == 0:
			require.Equal(t, "updated", en["status"], en)
			require.Equal(t, 2.0, en["version"], en)
		default:
			require.Equal(t, "unchanged", en["status"], en)
			require.Equal(t, 1.0, en["version"], en)
		}
	}

	ctx := context.Background()
	var moments int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(DISTINCT created_at) FROM item_versions
		WHERE project = 'acme' AND (version = 2 OR key < 'k1300')`).Scan(&moments))
	require.Equal(t, 1, moments, "the second batch's versions are one moment")
	var wrong int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM items i
		JOIN item_versions v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
		WHERE i.project = 'acme' AND i.search IS DISTINCT FROM contextd_search_vector(v.title, v.summary, v.content)`).Scan(&wrong))
	require.Zero(t, wrong, "every item's search vector is its current version's")

	// An item hidden from the implementer, last in key order: the batch
	// that would overwrite it is refused when its last chunk is written,
	// and the items of the chunks before are not written either.
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/zz-hidden", e.admin, map[string]any{
		"content": "not for implementers", "roles": map[string]any{"hidden_from": []string{"implementer"}},
	}).status)
	third := items(func(i int) string { return fmt.Sprintf("refund rule %d, third", i) })
	third = append(third, map[string]any{"key": "zz-hidden", "content": "overwritten"})
	r = e.do("POST", "/v1/projects/acme/items", implementer, map[string]any{"items": third})
	require.Equal(t, 404, r.status, r.text)
	var third3 int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM item_versions WHERE project = 'acme' AND content LIKE '%, third'`).Scan(&third3))
	require.Zero(t, third3, "nothing of the refused batch was written")
	r = e.do("GET", "/v1/projects/acme/items/k0000", implementer, nil)
	require.Equal(t, "refund rule 0, revised", r.json["content"])
}
