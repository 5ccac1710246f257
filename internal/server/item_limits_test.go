package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestContentWhoseVectorIsTooLong writes contents within the content limit
// whose whole-text search vector would pass PostgreSQL's 1 MB bound (1 MB
// of distinct ids made 1.8 MB, and the write answered 500): a PUT and a
// batch both write them, their early words are found by search, and an
// item just under the plain path's threshold keeps its whole vector.
func TestContentWhoseVectorIsTooLong(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	key := e.agent("implementer", auth.Edit, "acme")
	// uuid-shaped, as in logs: each part is a lexeme of its own, ~1.9
	// bytes of vector per byte of text. word is the first, unique part.
	word := func(prefix string, i int) string { return fmt.Sprintf("%s%06d", prefix, i) }
	id := func(prefix string, i int) string {
		h := uint64(uint32(i)*2654435761) * 0x9e3779b97f4a7c15
		return fmt.Sprintf("%s-%04x-%04x-%04x-%012x", word(prefix, i), h>>48, (h>>32)&0xffff, (h>>16)&0xffff, h&0xffffffffffff)
	}
	ids := func(prefix string, n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString("id=" + id(prefix, i) + "\n")
		}
		return b.String()
	}
	long := ids("qa", 25000) // ~1 MB, under the content limit
	require.Less(t, len(long), 1<<20)

	r := e.do("PUT", "/v1/projects/acme/items/log.one", key, map[string]any{"content": long})
	require.Equal(t, 201, r.status, r.text)
	r = e.do("POST", "/v1/projects/acme/items", key, map[string]any{"items": []any{
		map[string]any{"key": "log.two", "content": ids("qb", 25000)},
		map[string]any{"key": "small", "content": "a small item"},
	}})
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, 2, r.num("created"))

	for k, word := range map[string]string{"log.one": word("qa", 1), "log.two": word("qb", 2)} {
		r = e.do("GET", "/v1/projects/acme/items?q="+word, key, nil)
		require.Equal(t, 200, r.status, r.text)
		data := r.json["data"].([]any)
		require.Len(t, data, 1, "search for %s", word)
		require.Equal(t, k, data[0].(map[string]any)["key"])
	}

	// Under the threshold nothing changed: the last id is found too.
	short := ids("qc", 6000) // ~240 KB
	require.Less(t, len(short), 256<<10)
	r = e.do("PUT", "/v1/projects/acme/items/log.three", key, map[string]any{"content": short})
	require.Equal(t, 201, r.status, r.text)
	r = e.do("GET", "/v1/projects/acme/items?q="+word("qc", 5999), key, nil)
	require.Equal(t, 200, r.status, r.text)
	require.Len(t, r.json["data"].([]any), 1)
}

// TestMetadataDepth: item metadata nests at most as deep as agent_context
// (the depth limit, 16): one level more is 422 too_deep at /metadata.
func TestMetadataDepth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	key := e.agent("implementer", auth.Edit, "acme")
	nest := func(levels int) string { // levels objects, one inside the other
		return strings.Repeat(`{"a":`, levels-1) + `{"leaf":1}` + strings.Repeat(`}`, levels-1)
	}
	put := func(levels int) resp {
		body := `{"content":"x","metadata":` + nest(levels) + `}`
		return e.do("PUT", "/v1/projects/acme/items/deep", key, body)
	}
	r := put(16)
	require.Equal(t, 201, r.status, r.text)
	r = put(17)
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, []string{"/metadata"}, r.pointers())
	require.Equal(t, "too_deep", r.json["errors"].([]any)[0].(map[string]any)["code"])
	r = put(5000)
	require.Equal(t, 422, r.status, r.text)
}
