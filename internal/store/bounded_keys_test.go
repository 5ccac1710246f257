package store_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
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
	a, admin := withAcme(t, st)
	var err error
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

// A narrow row is read from the item row alone (00037): it must be the
// item's current version without its text, field for field, for every
// trigger, roles, window, template and stem match, after a new version and
// a deletion, and after a redaction of the current version (whose zeroed
// content hash keys the packet sources' text cache).
func TestNarrowRowsAreTheCurrentVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	a, admin := withAcme(t, st)
	var err error
	s := func(v string) *string { return &v }
	p := func(v int32) *int32 { return &v }
	yes := true
	tool := "deploy"
	sk := "region"
	in := []item.Input{
		{Key: "always", Content: "always on", Trigger: &ctxtype.Trigger{Always: true}, Priority: p(7), Authority: s("policy"),
			Confidence: s("verified"), Kind: s("instruction"), Source: s("human"), Slot: s("system")},
		{Key: "words", Content: "refund words", Trigger: &ctxtype.Trigger{Keywords: []string{"refund", "money back"}},
			Roles: &ctxtype.Roles{VisibleTo: []string{"support"}, HiddenFrom: []string{"intern"}}},
		{Key: "stems", Content: "stemmed", Trigger: &ctxtype.Trigger{Keywords: []string{"shipping"}, Match: "stem"},
			ValidFrom: s("2026-01-01T00:00:00Z"), ValidUntil: s("2036-01-01T00:00:00Z")},
		{Key: "tool", Content: "the deploy tool", Trigger: &ctxtype.Trigger{Tool: &tool}, StateKey: &sk, Template: &yes},
		{Key: "pinned", Content: "pinned only", Trigger: &ctxtype.Trigger{PinnedOnly: true}, Confidence: s("uncertain")},
		{Key: "relevant", Content: "relevance item about invoices", Trigger: &ctxtype.Trigger{Relevance: true}, StateKey: &sk,
			Authority: s("hypothesis"), Slot: s("messages")},
		{Key: "gone", Content: "deleted soon", Trigger: &ctxtype.Trigger{Always: true}},
	}
	_, err = a.Items.Batch(ctx, admin, "acme", in)
	require.NoError(t, err)
	in[0].Content, in[0].Priority = "always on, second version", p(-3)
	_, err = a.Items.Batch(ctx, admin, "acme", in[:1])
	require.NoError(t, err)
	_, err = a.Items.Delete(ctx, admin, "acme", "gone", item.PutOpts{})
	require.NoError(t, err)
	_, err = a.Evidence.Redact(ctx, admin, "acme", "words", 1, "a secret")
	require.NoError(t, err)

	keys := []string{"always", "words", "stems", "tool", "pinned", "relevant", "gone"}
	full, err := st.ItemVersionCurrentMany(ctx, "acme", keys)
	require.NoError(t, err)
	want := map[string]*ctxtype.Version{}
	for k, cv := range full {
		v := cv.Version
		if v.Deleted {
			continue
		}
		f := v.Fields
		want[k] = &ctxtype.Version{Project: v.Project, Key: v.Key, Version: v.Version,
			Fields: ctxtype.Fields{Kind: f.Kind, Source: f.Source, Priority: f.Priority, Authority: f.Authority,
				Confidence: f.Confidence, StateKey: f.StateKey, ValidFrom: f.ValidFrom, ValidUntil: f.ValidUntil, Slot: f.Slot,
				Trigger: f.Trigger, Roles: f.Roles, Template: f.Template},
			ContentSHA256: v.ContentSHA256, BlockTokens: v.BlockTokens, CreatedAt: v.CreatedAt}
	}
	require.Len(t, want, 6)
	require.Equal(t, 2, want["always"].Version)
	require.Equal(t, strings.Repeat("0", 64), want["words"].ContentSHA256, "the redaction zeroed the version's hash")
	byKey := func(vs []*ctxtype.Version) map[string]*ctxtype.Version {
		out := map[string]*ctxtype.Version{}
		for _, v := range vs {
			out[v.Key] = v
		}
		return out
	}
	// Read in the snapshot, asserted after it (a failed assertion inside
	// would leave its transaction open).
	var byKeys, small, groups, always, tools []*ctxtype.Version
	first := ctxtype.RankPos{Authority: math.MinInt16, Priority: math.MinInt64, Confidence: math.MinInt16, Time: math.MinInt64}
	require.NoError(t, st.Snapshot(ctx, func(tx *store.Tx) error {
		var err error
		if byKeys, err = tx.BoundedByKeys(ctx, "acme", keys); err != nil {
			return err
		}
		if small, err = tx.BoundedSmall(ctx, []string{"acme"}, keys); err != nil {
			return err
		}
		if groups, err = tx.BoundedStateGroups(ctx, []string{"acme"}, []string{sk}); err != nil {
			return err
		}
		if always, err = tx.BoundedLane(ctx, "acme", "", first, 10); err != nil {
			return err
		}
		tools, err = tx.BoundedLane(ctx, "acme", tool, first, 10)
		return err
	}))
	require.Equal(t, want, byKey(byKeys))
	require.Equal(t, want, byKey(small))
	require.Equal(t, map[string]*ctxtype.Version{"tool": want["tool"], "relevant": want["relevant"]}, byKey(groups))
	require.Equal(t, map[string]*ctxtype.Version{"always": want["always"]}, byKey(always))
	require.Equal(t, map[string]*ctxtype.Version{"tool": want["tool"]}, byKey(tools))
}

// The item row's content hash keys the packet sources' text cache, so the
// server's login may not write it: the write path (run here as a login of
// contextd_app, as serve's) leaves it, with the other narrow columns, to a
// trigger that copies them from the version, and a login that tries to set
// a redacted version's old hash back is refused, or, moving the row to its
// own version, gets the redacted hash again. A row written without them
// (by the release before 00037, during a rolling upgrade) gets them too.
func TestItemContentHashIsTheVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner, appURL, st := asServerLogin(t)
	a, admin := withAcme(t, st)
	_, err := a.Items.Batch(ctx, admin, "acme", []item.Input{{Key: "card", Content: "card 4111 1111 1111 1111"}})
	require.NoError(t, err)
	_, err = a.Items.Batch(ctx, admin, "acme", []item.Input{{Key: "card", Content: "card on file"}})
	require.NoError(t, err)
	hashes := func() (row, version string) {
		require.NoError(t, owner.QueryRow(ctx, `SELECT encode(i.content_sha256, 'hex'), encode(v.content_sha256, 'hex')
			FROM items i JOIN item_versions v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
			WHERE i.project = 'acme' AND i.key = 'card'`).Scan(&row, &version))
		return row, version
	}
	row, version := hashes()
	require.Len(t, row, 64)
	require.Equal(t, version, row, "the write path's row has its version's hash")
	old := row

	_, err = a.Evidence.Redact(ctx, admin, "acme", "card", 2, "not for prompts")
	require.NoError(t, err)
	row, version = hashes()
	require.Equal(t, strings.Repeat("0", 64), version)
	require.Equal(t, version, row, "the redaction zeroed the row's copy")

	login, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(login.Close)
	_, err = login.Exec(ctx, `UPDATE items SET content_sha256 = decode($1, 'hex') WHERE project = 'acme' AND key = 'card'`, old)
	require.ErrorContains(t, err, "permission denied")
	_, err = login.Exec(ctx, `UPDATE items SET block_tokens_o200k = 1 WHERE project = 'acme' AND key = 'card'`)
	require.ErrorContains(t, err, "permission denied", "no narrow column is the login's to write")
	_, err = login.Exec(ctx, `UPDATE items SET current_version = 1 WHERE project = 'acme' AND key = 'card'`)
	require.NoError(t, err)
	_, err = login.Exec(ctx, `UPDATE items SET current_version = 2 WHERE project = 'acme' AND key = 'card'`)
	require.NoError(t, err)
	row, version = hashes()
	require.Equal(t, strings.Repeat("0", 64), row, "moved back to the redacted version, the row has its zeroed hash")
	require.Equal(t, version, row)

	// The write of the release before 00037: the row's own columns, none
	// of the narrow ones.
	_, err = login.Exec(ctx, `INSERT INTO item_versions (project, key, version, kind, source, content, priority, authority, confidence,
			slot, trigger, fields_sha256, content_sha256, tokens_o200k, tokens_cl100k, block_tokens_o200k, created_by)
		SELECT project, key, 3, 'decision', source, 'a third', 7, authority, confidence, slot, trigger, fields_sha256,
			sha256('a third'), 2, 2, 42, created_by FROM item_versions WHERE project = 'acme' AND key = 'card' AND version = 2;
		UPDATE items SET current_version = 3 WHERE project = 'acme' AND key = 'card'`)
	require.NoError(t, err)
	var kind string
	var priority, block int
	require.NoError(t, owner.QueryRow(ctx, `SELECT kind, priority, block_tokens_o200k FROM items WHERE project = 'acme' AND key = 'card'`).
		Scan(&kind, &priority, &block))
	require.Equal(t, []any{"decision", 7, 42}, []any{kind, priority, block})
	row, version = hashes()
	require.Equal(t, version, row)
}

// asServerLogin is a new database, its owner's pool, and a store on a login
// that is a member of contextd_app only, as serve's, with that login's URL.
func asServerLogin(t *testing.T) (*pgxpool.Pool, string, *store.Store) {
	t.Helper()
	return asServerLoginOn(t, pgtest.NewURL(t))
}

// asServerLoginOn is asServerLogin on the database at url (the owner's).
func asServerLoginOn(t *testing.T, url string) (*pgxpool.Pool, string, *store.Store) {
	t.Helper()
	owner := ownerPool(t, url)
	_, appURL := definerLogin(t, t.Context(), owner, url)
	st, err := store.Open(t.Context(), store.Config{URL: appURL, AcquireTimeout: pgtest.AcquireTimeout})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return owner, appURL, st
}

// withAcme is the services on st, with the first admin and project acme.
func withAcme(t *testing.T, st *store.Store) (*app.App, *auth.Agent) {
	t.Helper()
	return withProject(t, st, "acme")
}

// withProject is withAcme with the project named proj.
func withProject(t *testing.T, st *store.Store, proj string) (*app.App, *auth.Agent) {
	t.Helper()
	a := app.New(st)
	admin, _, err := a.Agents.Bootstrap(t.Context())
	require.NoError(t, err)
	_, _, err = a.Projects.Put(t.Context(), admin, proj, "")
	require.NoError(t, err)
	return a, admin
}
