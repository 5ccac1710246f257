package server_test

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// TestCursorsBelongToTheirListing: every paged listing gives cursors that
// page it, and refuses, with 422 on the parameter cursor, a cursor another
// listing gave out (another route, project, item or query) or one this
// server never gave out, instead of reading it as a position in its own
// rows and answering a wrong page or an empty one as if it were right.
func TestCursorsBelongToTheirListing(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	e.project("beta")
	e.batch("beta", []api.BatchItem{{Key: "b1", Content: "Refunds take a week."}, {Key: "b2", Content: "Refund the fee."}})
	implementer := e.agent("implementer", auth.Edit, "acme")
	for i := range 2 {
		require.Equal(t, 201, e.do("POST", "/v1/projects/acme/packets", implementer, packetRequest("implementer")).status)
		require.Equal(t, 201, e.do("PUT", "/v1/projects/acme/items/always.rule", e.admin,
			map[string]any{"content": fmt.Sprintf("Always cite the ticket (%d).", i), "title": "Citations"}).status)
	}
	for i := range 3 {
		r := e.do("POST", "/v1/projects/acme/handoffs", implementer, manifest(fmt.Sprintf("T-%d", i), "critic"))
		require.Equal(t, 201, r.status, r.text)
	}
	e.agent("critic", auth.ReadOnly, "acme")
	e.agent("planner", auth.ReadOnly, "beta")

	listings := map[string]string{
		"items":            "/v1/projects/acme/items",
		"items of beta":    "/v1/projects/beta/items",
		"search":           "/v1/projects/acme/items?q=refund",
		"another search":   "/v1/projects/acme/items?q=ticket+OR+refund+OR+cats",
		"versions":         "/v1/projects/acme/items/always.rule/versions",
		"other versions":   "/v1/projects/acme/items/refund.rules/versions",
		"packets":          "/v1/projects/acme/packets",
		"handoffs":         "/v1/projects/acme/handoffs",
		"injections":       "/v1/projects/acme/items/always.rule/injections",
		"agents":           "/v1/agents",
		"projects":         "/v1/projects",
		"other injections": "/v1/projects/_shared/items/house.style/injections?project=acme",
	}
	withCursor := func(path, cursor string) string {
		u, err := url.Parse(path)
		require.NoError(t, err)
		q := u.Query()
		q.Set("limit", "1")
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	cursors := map[string]string{}
	for name, path := range listings {
		r := e.do("GET", withCursor(path, ""), e.admin, nil)
		require.Equal(t, 200, r.status, "%s: %s", name, r.text)
		next, ok := r.json["next_cursor"].(string)
		if !ok {
			continue // one page only: it gives no cursor
		}
		cursors[name] = next
		// Its own cursor pages it.
		r = e.do("GET", withCursor(path, next), e.admin, nil)
		require.Equal(t, 200, r.status, "%s with its own cursor: %s", name, r.text)
		require.NotEmpty(t, r.list(), "%s: the second page", name)
	}
	for _, name := range []string{"items", "items of beta", "search", "versions", "packets", "handoffs", "injections", "agents", "projects"} {
		require.Contains(t, cursors, name, "the fixture gives %s a second page", name)
	}
	// A query that differs only in white space ranks alike: its cursor goes on.
	r := e.do("GET", withCursor("/v1/projects/acme/items?q=+refund++", cursors["search"]), e.admin, nil)
	require.Equal(t, 200, r.status, r.text)
	require.NotEmpty(t, r.list())
	for name, path := range listings {
		for other, cursor := range cursors {
			if other == name {
				continue
			}
			r := e.do("GET", withCursor(path, cursor), e.admin, nil)
			require.Equal(t, 422, r.status, "%s with the cursor of %s: %s", name, other, r.text)
			require.Equal(t, []string{"cursor"}, r.pointers(), "%s with the cursor of %s", name, other)
		}
		// Nor one the server never gave out: not base64, not JSON, a
		// position without its listing, or the old bare forms.
		for _, forged := range []string{"garbage!", b64(`not json`), b64(`{"k":"a"}`), b64(`{"of":"x","at":{"k":"a"}}`), "acme", "agt_x"} {
			r := e.do("GET", withCursor(path, forged), e.admin, nil)
			require.Equal(t, 422, r.status, "%s with the cursor %q: %s", name, forged, r.text)
		}
	}
}

// TestInjectionsVersionFilter: versions are numbered from 1, so a filter
// below that names no version and is refused, not answered with nothing.
func TestInjectionsVersionFilter(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	implementer := e.agent("implementer", auth.Edit, "acme")
	require.Equal(t, 201, e.do("POST", "/v1/projects/acme/packets", implementer, packetRequest("implementer")).status)
	for _, v := range []string{"0", "-1"} {
		r := e.do("GET", "/v1/projects/acme/items/always.rule/injections?version="+v, e.admin, nil)
		require.Equal(t, 422, r.status, r.text)
		require.Equal(t, []string{"version"}, r.pointers())
	}
	r := e.do("GET", "/v1/projects/acme/items/always.rule/injections?version=1", e.admin, nil)
	require.Equal(t, 200, r.status, r.text)
	require.Len(t, r.list(), 1)
	r = e.do("GET", "/v1/projects/acme/items/always.rule/injections?version=2", e.admin, nil)
	require.Equal(t, 200, r.status, r.text)
	require.Empty(t, r.list(), "a version that does not exist (yet) was used by no packet")
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
