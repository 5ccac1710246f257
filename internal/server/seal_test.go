package server_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// TestEntriesWrittenWithoutTheKeyAreRefused performs the attack of issue
// 32's third row: whoever can write the database but does not hold the
// audit key appends consistent, correctly hashed entries (here the
// easiest way there is: contextd itself, run over the same database
// without the key, or with a key of its own), a handoff rejected with its
// row and event, after a checkpoint. Verify refuses them: the entries have
// no seal of the deployment's key, or one that does not verify with it.
func TestEntriesWrittenWithoutTheKeyAreRefused(t *testing.T) {
	otherKey := make([]byte, 32)
	_, _ = rand.Read(otherKey)
	forger, err := evidence.ParseKey(base64.StdEncoding.EncodeToString(otherKey))
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		keys    *evidence.Keys
		problem string
	}{
		{"no key", nil, "unsealed"},
		{"a key of its own", forger, "unsealed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			e.project("acme")
			writer := e.agent("writer", "edit", "acme")
			critic := e.agent("critic", "edit", "acme")
			h := e.do("POST", "/v1/projects/acme/handoffs", writer, map[string]any{"task_id": "T-1", "intent": "request_review", "target": map[string]any{"role": "critic"}})
			require.Equal(t, 201, h.status, h.text)
			cp := e.do("GET", "/v1/projects/acme/audit/checkpoint", e.admin, nil)
			require.Equal(t, 200, cp.status, cp.text)
			r := e.verify()
			require.Equal(t, true, r.json["ok"], r.text)
			require.Equal(t, true, r.json["sealed"], r.text)

			// The forger's contextd, on the same database.
			var opts []app.Option
			if tc.keys != nil {
				opts = append(opts, app.WithKeys(tc.keys))
			}
			forged := httptest.NewServer(server.New(server.Config{App: app.New(store.New(e.pool, pgtest.AcquireTimeout), opts...)}))
			defer forged.Close()
			f := *e
			f.url = forged.URL
			rej := f.do("POST", "/v1/projects/acme/handoffs/"+h.json["id"].(string)+"/reject", critic, map[string]any{"reason": "forged"})
			require.Equal(t, 200, rej.status, rej.text)
			got := e.do("GET", "/v1/projects/acme/handoffs/"+h.json["id"].(string), e.admin, nil)
			require.Equal(t, "rejected", got.json["status"], "the forgery took: %s", got.text)

			r = e.verify()
			require.Equal(t, false, r.json["ok"], r.text)
			require.Equal(t, tc.problem, r.json["problem"], r.text)
			require.Equal(t, cp.num("seq")+1, r.num("first_bad_seq"), "the first entry after the checkpoint: %s", r.text)

			// A genuine write after the forgery does not launder it: its
			// seal covers its own entries only.
			require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/after", writer, api.PutItemJSONRequestBody{Content: "later"}).status)
			r = e.verify()
			require.Equal(t, false, r.json["ok"], r.text)
			require.Equal(t, cp.num("seq")+1, r.num("first_bad_seq"), r.text)
		})
	}
}
