package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// TestTheServerRunsAsContextdAppAndCannotRewriteHistory: a server whose
// login is only a member of contextd_app does all its work, and that login
// can neither switch the append-only triggers off nor change what they
// guard.
func TestTheServerRunsAsContextdAppAndCannotRewriteHistory(t *testing.T) {
	ownerURL := pgtest.NewURL(t)
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	appURL, err := store.EnsureLogin(ctx, ownerURL, "contextd_test_"+hex.EncodeToString(b))
	require.NoError(t, err)
	user, super, owner, err := store.Standing(ctx, appURL)
	require.NoError(t, err)
	require.False(t, super, user)
	require.False(t, owner, user)
	_, super, owner, err = store.Standing(ctx, ownerURL)
	require.NoError(t, err)
	require.True(t, super || owner, "the owner's login is one")

	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	defer pool.Close()
	a := app.New(store.New(pool, 0), app.WithKeys(testKeys))
	adoptChains(t, a.Store)
	_, key, err := a.Agents.CreateLocal(ctx, auth.CreateParams{Name: "root", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}})
	require.NoError(t, err)
	ts := httptest.NewServer(server.New(server.Config{App: a}))
	defer ts.Close()
	e := &env{t: t, url: ts.URL, pool: pool, agents: a.Agents, admin: key, app: a}

	// The whole service works as contextd_app.
	e.project("acme")
	writer := e.agent("planner", "edit", "acme")
	critic := e.agent("critic", "edit", "acme")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/refunds", writer, map[string]any{"content": "refunds take five days", "trigger": map[string]any{"always": true}}).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/refunds", writer, map[string]any{"content": "refunds take three days", "trigger": map[string]any{"relevance": true}}, "Idempotency-Key", "i-1").status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/refunds", writer, map[string]any{"content": "refunds take three days", "trigger": map[string]any{"relevance": true}}, "Idempotency-Key", "i-1").status)
	require.Equal(t, 200, e.do("DELETE", "/v1/projects/acme/items/refunds", writer, nil).status)
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/items", writer, map[string]any{"items": []map[string]any{{"key": "a", "content": "alpha", "trigger": map[string]any{"tool": "search"}}}}).status)
	require.Equal(t, 201, e.do("POST", "/v1/projects/acme/packets", writer, map[string]any{"target_role": "planner", "query": "alpha"}).status)
	h := e.do("POST", "/v1/projects/acme/handoffs", writer, map[string]any{"task_id": "T-1", "intent": "request_review", "target": map[string]any{"role": "critic"}, "summary": "ready"})
	require.Equal(t, 201, h.status, h.text)
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+h.json["id"].(string)+"/accept", critic, map[string]any{}).status)
	require.Equal(t, true, e.verify().json["ok"])

	// What the owner or a superuser could do, this login cannot.
	for _, sql := range []string{
		"SET session_replication_role = replica",
		"ALTER TABLE item_versions DISABLE TRIGGER item_versions_append_only",
		"DROP TRIGGER item_versions_append_only ON item_versions",
		"CREATE OR REPLACE FUNCTION contextd_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
		"UPDATE item_versions SET content = 'x' WHERE project = 'acme'",
		"DELETE FROM item_versions WHERE project = 'acme'",
		"UPDATE audit_entries SET body = '' WHERE chain = 'acme'",
		"DELETE FROM audit_entries WHERE chain = 'acme'",
		"UPDATE packets SET rendered = '' WHERE project = 'acme'",
		"TRUNCATE handoff_events",
		"UPDATE agents SET key_sha256 = sha256('x')",
		"UPDATE agents SET created_at = now()",
		"UPDATE handoffs SET manifest = '{}'",
	} {
		_, err := pool.Exec(ctx, sql)
		require.Error(t, err, sql)
	}
}
