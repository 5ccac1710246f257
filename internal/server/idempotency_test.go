package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/server"
)

func TestIdempotentRetries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	key := e.agent("implementer", auth.Edit, "acme")
	path := "/v1/projects/acme/items/k"

	first := e.do("PUT", path, key, map[string]any{"content": "one"}, "Idempotency-Key", "req-1")
	require.Equal(t, 201, first.status, first.text)
	// Someone else writes in between; the retry must still replay, not write.
	require.Equal(t, 201, e.do("PUT", path, e.admin, map[string]any{"content": "two"}).status)
	again := e.do("PUT", path, key, map[string]any{"content": "one"}, "Idempotency-Key", "req-1")
	require.Equal(t, 201, again.status)
	require.Equal(t, first.text, again.text)
	require.Equal(t, `"1"`, again.header.Get("ETag"))
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	r := e.do("GET", path+"/versions", key, nil)
	require.Len(t, r.list(), 2, "the retry wrote nothing")

	// Same key, other body: 422.
	r = e.do("PUT", path, key, map[string]any{"content": "three"}, "Idempotency-Key", "req-1")
	require.Equal(t, 422, r.status)
	require.Equal(t, "validation_failed", r.json["code"])

	// Keys are per agent: another agent's req-1 is a new request.
	r = e.do("PUT", path, e.admin, map[string]any{"content": "one"}, "Idempotency-Key", "req-1")
	require.Equal(t, 201, r.status, r.text)
	require.Equal(t, 3, r.num("version"))

	// Errors below 500 are answers too, and replay as such.
	bad := e.do("POST", "/v1/projects/acme/items", key, map[string]any{"items": []any{map[string]any{"key": "x", "content": "c", "kind": "nope"}}}, "Idempotency-Key", "req-2")
	require.Equal(t, 422, bad.status)
	badAgain := e.do("POST", "/v1/projects/acme/items", key, map[string]any{"items": []any{map[string]any{"key": "x", "content": "c", "kind": "nope"}}}, "Idempotency-Key", "req-2")
	require.Equal(t, 422, badAgain.status)
	require.Equal(t, "true", badAgain.header.Get("Idempotent-Replayed"))
	// The same answer, naming the request it answers (as every problem does).
	require.Equal(t, badAgain.header.Get("X-Request-Id"), badAgain.json["request_id"])
	delete(bad.json, "request_id")
	delete(badAgain.json, "request_id")
	require.Equal(t, bad.json, badAgain.json)

	// A batch retried replays its counts and writes nothing more.
	batch := map[string]any{"items": []any{map[string]any{"key": "b1", "content": "c"}, map[string]any{"key": "b2", "content": "c"}}}
	b1 := e.do("POST", "/v1/projects/acme/items", key, batch, "Idempotency-Key", "req-3")
	require.Equal(t, 200, b1.status)
	require.Equal(t, 2, b1.num("created"))
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/b1", key, api.PutItemJSONRequestBody{Content: "changed"}).status)
	b2 := e.do("POST", "/v1/projects/acme/items", key, batch, "Idempotency-Key", "req-3")
	require.Equal(t, b1.text, b2.text)
	r = e.do("GET", "/v1/projects/acme/items/b1", key, nil)
	require.Equal(t, "changed", r.json["content"], "the replay did not write the batch again")
}

func TestIdempotencyKeyStillRunningIs409(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	ctx := context.Background()
	// Stand in for a first attempt that is still running: hold its lock.
	a, err := e.agents.Authenticate(ctx, e.admin)
	require.NoError(t, err)
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", a.ID+"/req-9")
	require.NoError(t, err)

	r := e.do("PUT", "/v1/projects/acme/items/k", e.admin, api.PutItemJSONRequestBody{Content: "c"}, "Idempotency-Key", "req-9")
	require.Equal(t, 409, r.status, r.text)
	require.Equal(t, "conflict", r.json["code"])
	require.NotEmpty(t, r.header.Get("Retry-After"), "a client is told when to try again")
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/k", e.admin, nil).status)

	require.NoError(t, tx.Rollback(ctx))
	r = e.do("PUT", "/v1/projects/acme/items/k", e.admin, api.PutItemJSONRequestBody{Content: "c"}, "Idempotency-Key", "req-9")
	require.Equal(t, 201, r.status, r.text)
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	e := setupWith(t, server.Config{BodyLimit: 1024})
	e.project("acme")
	big := map[string]any{"content": strings.Repeat("x", 2000)}
	r := e.do("PUT", "/v1/projects/acme/items/k", e.admin, big)
	require.Equal(t, 413, r.status, r.text)
	require.Equal(t, "payload_too_large", r.json["code"])
	r = e.do("PUT", "/v1/projects/acme/items/k", e.admin, big, "Idempotency-Key", "x")
	require.Equal(t, 413, r.status, r.text)
	require.Equal(t, 404, e.do("GET", "/v1/projects/acme/items/k", e.admin, nil).status)
}
