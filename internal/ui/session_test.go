package ui_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/ui"
)

// clock is a time tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestSessionsEndAfterTwelveHoursIdle: a session used within 12 hours lives
// on; one left 12 hours ends, and stays ended.
func TestSessionsEndAfterTwelveHoursIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, key := e.agent("planner", auth.ReadOnly, "*")
	clk := &clock{t: time.Now()}
	s := ui.NewSessions(e.st, e.app.Agents, clk.now)
	ctx := context.Background()
	tok, _, err := s.Begin(ctx, key)
	require.NoError(t, err)
	for range 3 { // 33 hours in all, never 12 idle
		clk.add(11 * time.Hour)
		a, err := s.Resolve(ctx, tok)
		require.NoError(t, err)
		require.Equal(t, "planner", a.Role)
	}
	clk.add(ui.IdleTimeout)
	_, err = s.Resolve(ctx, tok)
	require.ErrorIs(t, err, ui.ErrNoSession)
	require.ErrorIs(t, err, fault.ErrUnauthenticated)
	require.ErrorContains(t, err, "expired")
	clk.add(-ui.IdleTimeout) // the row is gone, not only late
	_, err = s.Resolve(ctx, tok)
	require.ErrorIs(t, err, ui.ErrNoSession)
}

// TestSessionEndsAtSevenDaysEvenWhenUsed checks the age bound alone: used
// every 11 hours, the session works until 7 days and not after.
func TestSessionEndsAtSevenDaysEvenWhenUsed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, key := e.agent("planner", auth.ReadOnly, "*")
	start := time.Now()
	clk := &clock{t: start}
	s := ui.NewSessions(e.st, e.app.Agents, clk.now)
	ctx := context.Background()
	tok, _, err := s.Begin(ctx, key)
	require.NoError(t, err)
	for clk.now().Add(11 * time.Hour).Before(start.Add(ui.MaxAge)) {
		clk.add(11 * time.Hour)
		_, err := s.Resolve(ctx, tok)
		require.NoError(t, err, "at %s", clk.now().Sub(start))
	}
	clk.t = start.Add(ui.MaxAge)
	_, err = s.Resolve(ctx, tok)
	require.ErrorIs(t, err, ui.ErrNoSession)
	require.ErrorContains(t, err, "expired")
}

// TestSessionsAreStoredHashedAndWorkAcrossProcesses: the database holds
// the token's SHA-256 only, and a second server over the same database
// (another process) accepts the session the first one made.
func TestSessionsAreStoredHashedAndWorkAcrossProcesses(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	one := newEnvOn(t, pool, false)
	two := newEnvOn(t, pool, false)
	_, key := one.agent("planner", auth.ReadOnly, "*")
	c := one.browser()
	res := one.signIn(c, key)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	var token string
	for _, ck := range res.Cookies() {
		if ck.Name == ui.SessionCookie {
			token = ck.Value
		}
	}
	require.NotEmpty(t, token)
	raw, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err)
	want := sha256.Sum256(raw)
	var stored []byte
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT token_sha256, (SELECT count(*) FROM ui_sessions) FROM ui_sessions").Scan(&stored, &n))
	require.Equal(t, 1, n)
	require.Equal(t, want[:], stored)
	require.NotContains(t, string(stored), token)

	// The same cookie on the other server.
	req, _ := http.NewRequest("GET", two.url+"/ui", nil)
	req.AddCookie(&http.Cookie{Name: ui.SessionCookie, Value: token})
	res, err = two.srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
}

// TestRevokingTheKeyEndsTheSessionAtOnce: the next request after a
// revocation (made through the API) is sent to sign in, and the session's
// row is gone.
func TestRevokingTheKeyEndsTheSessionAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	c := e.browser()
	require.Equal(t, http.StatusSeeOther, e.signIn(c, w.planner).StatusCode)
	status, _, _ := e.page(c, "/ui/projects/acme/packets/"+w.packet)
	require.Equal(t, 200, status)
	e.must(200, "DELETE", "/v1/agents/"+w.plannerID, e.admin, nil)
	status, loc, _ := e.page(c, "/ui/projects/acme/packets/"+w.packet)
	require.Equal(t, http.StatusSeeOther, status)
	require.True(t, strings.HasPrefix(loc, "/ui/login?next="), loc)
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM ui_sessions").Scan(&n))
	require.Zero(t, n, "the revoked agent's sessions are deleted")
	// Its key no longer signs in.
	require.Equal(t, http.StatusUnauthorized, e.signIn(e.browser(), w.planner).StatusCode)
}

// TestFormsRefuseAPostWithoutTheirToken: every POST of a signed-in
// session needs the session's anti-forgery token (replay, sign-out), and
// the sign-in form its own, double-submitted.
func TestFormsRefuseAPostWithoutTheirToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	c := e.browser()
	require.Equal(t, http.StatusSeeOther, e.signIn(c, w.planner).StatusCode)
	pktPath := "/ui/projects/acme/packets/" + w.packet
	_, _, body := e.page(c, pktPath)
	tok := csrfOf(t, body)
	// A token one character off: its first character replaced by one it
	// is not, so the wrong token is never the right one by chance.
	wrong := "x" + tok[1:]
	if tok[0] == 'x' {
		wrong = "y" + tok[1:]
	}
	require.NotEqual(t, tok, wrong)

	for name, form := range map[string]url.Values{
		"no token":    {},
		"wrong token": {"csrf": {wrong}},
		"login token": {"csrf": {"AAAA"}},
	} {
		status, _, body := e.post(c, pktPath+"/replay", form)
		require.Equal(t, http.StatusForbidden, status, name)
		require.Contains(t, body, "anti-forgery", name)
		status, _, _ = e.post(c, "/ui/logout", form)
		require.Equal(t, http.StatusForbidden, status, name)
	}
	// Another session's token does not fit this one.
	other := e.browser()
	require.Equal(t, http.StatusSeeOther, e.signIn(other, w.planner).StatusCode)
	_, _, otherBody := e.page(other, pktPath)
	require.NotEqual(t, tok, csrfOf(t, otherBody))
	status, _, _ := e.post(c, pktPath+"/replay", url.Values{"csrf": {csrfOf(t, otherBody)}})
	require.Equal(t, http.StatusForbidden, status)
	// A POST from another origin is refused even with the token.
	req, _ := http.NewRequest("POST", e.url+pktPath+"/replay", strings.NewReader(url.Values{"csrf": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	res, err := c.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	// With the token the replay runs.
	status, _, body = e.post(c, pktPath+"/replay", url.Values{"csrf": {tok}})
	require.Equal(t, 200, status, body)
	require.Contains(t, body, `id="replay-result" class="ok"`)
	require.Contains(t, body, "Identical.")

	// Sign-in without the form's token, or with one that is not the cookie's.
	fresh := e.browser()
	status, _, _ = e.post(fresh, "/ui/login", url.Values{"key": {w.planner}})
	require.Equal(t, http.StatusForbidden, status)
	_, _, loginBody := e.page(fresh, "/ui/login")
	status, _, _ = e.post(fresh, "/ui/login", url.Values{"key": {w.planner}, "csrf": {csrfOf(t, loginBody) + "x"}})
	require.Equal(t, http.StatusForbidden, status)

	// The sign-out link without its token ends nothing.
	status, _, _ = e.page(c, "/ui/logout")
	require.Equal(t, http.StatusForbidden, status)
	status, _, _ = e.page(c, "/ui/logout?csrf="+tok+"x")
	require.Equal(t, http.StatusForbidden, status)
	status, _, _ = e.page(c, pktPath)
	require.Equal(t, http.StatusOK, status, "still signed in")

	// Sign-out with the token ends the session.
	status, loc, _ := e.post(c, "/ui/logout", url.Values{"csrf": {tok}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/ui/login", loc)
	status, _, _ = e.page(c, pktPath)
	require.Equal(t, http.StatusSeeOther, status)
}

// TestSignOutLink: the page's sign-out link, with the session's token,
// ends the session.
func TestSignOutLink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	c := e.browser()
	require.Equal(t, http.StatusSeeOther, e.signIn(c, w.planner).StatusCode)
	_, _, body := e.page(c, "/ui/projects/acme")
	link := regexp.MustCompile(`href="(/ui/logout\?csrf=[^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, link, body)
	status, loc, _ := e.page(c, html.UnescapeString(link[1]))
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/ui/login", loc)
	status, _, _ = e.page(c, "/ui/projects/acme")
	require.Equal(t, http.StatusSeeOther, status, "signed out")
}

// TestSessionCookie: HttpOnly, SameSite=Strict, scoped to /ui; Secure
// over TLS only.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	for _, tls := range []bool{false, true} {
		e := newEnvOn(t, pgtest.New(t), tls)
		_, key := e.agent("planner", auth.ReadOnly, "*")
		res := e.signIn(e.browser(), key)
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, "/ui", res.Header.Get("Location"))
		var ck *http.Cookie
		for _, c := range res.Cookies() {
			if c.Name == ui.SessionCookie {
				ck = c
			}
		}
		require.NotNil(t, ck)
		require.True(t, ck.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
		require.Equal(t, "/ui", ck.Path)
		require.Equal(t, tls, ck.Secure)
		require.Equal(t, int(ui.MaxAge.Seconds()), ck.MaxAge)
	}
}

// TestSignInRefusesBadKeysAndForeignRedirects: a wrong key is refused on
// the form; next= never leaves the explorer.
func TestSignInRefusesBadKeysAndForeignRedirects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, key := e.agent("planner", auth.ReadOnly, "*")
	c := e.browser()
	require.Equal(t, http.StatusUnauthorized, e.signIn(c, "ctxd_nope").StatusCode)
	for next, want := range map[string]string{"https://evil.example/": "/ui", "//evil.example": "/ui", "/v1/agents": "/ui", "/ui/projects/acme": "/ui/projects/acme"} {
		_, _, body := e.page(c, "/ui/login")
		status, loc, _ := e.post(c, "/ui/login", url.Values{"key": {key}, "csrf": {csrfOf(t, body)}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, status)
		require.Equal(t, want, loc, next)
	}
	// A page without a session sends the browser to sign in, and back.
	status, loc, _ := e.page(e.browser(), "/ui/projects/acme?q=x")
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/ui/login?next="+url.QueryEscape("/ui/projects/acme?q=x"), loc)
}

// TestSessionsWorkAsContextdApp: the server's own login (a member of
// contextd_app, 00013) may make, touch, sweep and end sessions (00021's
// grants).
func TestSessionsWorkAsContextdApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ownerURL := pgtest.NewURL(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	appURL, err := store.EnsureLogin(ctx, ownerURL, "contextd_ui_test_"+hex.EncodeToString(b))
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := newEnvOn(t, pool, false)
	id, key := e.agent("planner", auth.ReadOnly, "*")
	clk := &clock{t: time.Now()}
	s := ui.NewSessions(e.st, e.app.Agents, clk.now)
	tok, _, err := s.Begin(ctx, key)
	require.NoError(t, err)
	clk.add(2 * time.Minute) // past touchEvery: the use is written
	_, err = s.Resolve(ctx, tok)
	require.NoError(t, err)
	require.NoError(t, s.End(ctx, tok))
	_, err = s.Resolve(ctx, tok)
	require.ErrorIs(t, err, ui.ErrNoSession)
	tok, _, err = s.Begin(ctx, key)
	require.NoError(t, err)
	_, err = e.app.Agents.Revoke(ctx, mustAdmin(t, e), id)
	require.NoError(t, err)
	_, err = s.Resolve(ctx, tok)
	require.ErrorIs(t, err, ui.ErrNoSession)
	require.ErrorContains(t, err, "revoked")
}

func mustAdmin(t *testing.T, e *env) *auth.Agent {
	t.Helper()
	a, err := e.app.Agents.Authenticate(context.Background(), e.admin)
	require.NoError(t, err)
	return a
}
