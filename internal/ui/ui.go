// Package ui is the provenance explorer: server-rendered pages at /ui,
// embedded in the binary (html/template, a stylesheet and a little plain
// JavaScript; no front-end build), where a person signed in with an agent
// key sees what that agent may see: a packet's text with every record's
// span, why each candidate is in or out, the budget, a replay, its
// outcomes, suspects and ablations; an item's versions, their diffs and
// the packets that used them and its ledger; a task's timeline of
// handoffs; a project's items, packets, ledger and audit chain.
//
// Like the REST API it is a transport over the services of package app,
// never a second implementation: every page calls the same service methods
// with the session's agent, so scope, permission and role visibility (a
// hidden item stays hidden) are decided where they are for every other
// caller. It is a viewer: the only forms are sign-in (and sign-out),
// search and replay, and the promote and reject forms of an item's pending
// proposals, rendered only for an agent that may decide them
// (proposals.go); no other page renders a control that writes.
package ui

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
)

//go:embed templates/*.html static/*
var files embed.FS

// Prefix is where the explorer is mounted.
const Prefix = "/ui"

// The cookies: the session token, and the sign-in form's own anti-forgery
// token (double-submitted: the form carries it too), which protects the
// sign-in POST before any session exists.
const (
	SessionCookie = "contextd_session"
	LoginCookie   = "contextd_login"
)

// Config wires the explorer.
type Config struct {
	App    *app.App
	Logger *slog.Logger
	// Limit, when set, is asked before each signed-in request is served,
	// with the session's agent: the server's per-agent rate limit, which
	// then binds the explorer as it binds the API.
	Limit func(*auth.Agent) error
	// Now is the sessions' clock (nil: time.Now).
	Now func() time.Time
}

type handler struct {
	app      *app.App
	log      *slog.Logger
	limit    func(*auth.Agent) error
	sessions *Sessions
	pages    map[string]*template.Template
}

// Mount registers the explorer's routes on e under Prefix. The server's
// authentication and permission middleware act on /v1 paths and on the
// contract's operations only, so these routes authenticate themselves
// (a session cookie); its limits on URLs, parameters and bodies, and the
// HTTP server's timeouts, apply here as everywhere.
func Mount(e *echo.Echo, cfg Config) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &handler{app: cfg.App, log: cfg.Logger, limit: cfg.Limit, pages: parsePages()}
	if cfg.App != nil {
		h.sessions = NewSessions(cfg.App.Store, cfg.App.Agents, cfg.Now)
	}
	g := e.Group(Prefix, secureHeaders)
	static, _ := fs.Sub(files, "static")
	g.GET("/static/*", echo.WrapHandler(http.StripPrefix(Prefix+"/static/", http.FileServer(http.FS(static)))))
	g.GET("/login", h.loginForm)
	g.POST("/login", h.login)
	in := g.Group("", h.signedIn)
	in.POST("/logout", h.logout)
	in.GET("/logout", h.logoutLink)
	in.GET("", h.index)
	in.GET("/", h.index)
	in.GET("/projects/:project", h.project)
	in.GET("/projects/:project/packets/:id", h.packet)
	in.GET("/projects/:project/packets/:id/record", h.record)
	in.POST("/projects/:project/packets/:id/replay", h.replay)
	in.GET("/projects/:project/items/:key", h.item)
	in.POST("/projects/:project/items/:key/proposals/:n/promote", h.promoteProposal)
	in.POST("/projects/:project/items/:key/proposals/:n/reject", h.rejectProposal)
	in.GET("/projects/:project/ledger", h.projectLedger)
	in.GET("/projects/:project/tasks/:task", h.task)
}

// csp allows the explorer's own stylesheet and script and nothing else:
// no inline script or style (the charts are SVG attributes), no frames.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		hd := c.Response().Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		if !strings.HasPrefix(c.Request().URL.Path, Prefix+"/static/") {
			hd.Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}

// session is what a signed-in request carries: its agent and the
// session's anti-forgery token.
type session struct {
	Agent *auth.Agent
	CSRF  string
}

const sessionKey = "ui.session"

func sessionOf(c echo.Context) *session {
	s, _ := c.Get(sessionKey).(*session)
	return s
}

// signedIn resolves the session cookie to its agent on every request (so an
// expired session or a revoked key ends at once), checks the anti-forgery
// token of every POST and the rate limit, or sends the browser to sign in.
func (h *handler) signedIn(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h.sessions == nil {
			return h.fail(c, errors.New("the explorer has no services"))
		}
		ck, err := c.Cookie(SessionCookie)
		var agent *auth.Agent
		if err != nil {
			err = ErrNoSession
		} else {
			agent, err = h.sessions.Resolve(c.Request().Context(), ck.Value)
		}
		if err != nil {
			if !errors.Is(err, fault.ErrUnauthenticated) {
				return h.fail(c, err)
			}
			clearCookie(c, SessionCookie)
			if c.Request().Method != http.MethodGet {
				return h.fail(c, err)
			}
			return c.Redirect(http.StatusSeeOther, Prefix+"/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
		}
		s := &session{Agent: agent, CSRF: CSRFToken(ck.Value)}
		if c.Request().Method == http.MethodPost && (!sameOrigin(c) || !CheckCSRF(ck.Value, c.FormValue("csrf"))) {
			return h.fail(c, errCSRF)
		}
		if h.limit != nil {
			if err := h.limit(agent); err != nil {
				return h.fail(c, err)
			}
		}
		c.Set(sessionKey, s)
		return next(c)
	}
}

// errCSRF refuses a POST without its form's anti-forgery token.
var errCSRF = fmt.Errorf("%w: the form's anti-forgery token is missing or wrong; reload the page and try again", fault.ErrForbidden)

// sameOrigin refuses a POST whose Origin header names another site (a
// second line behind the token and SameSite=Strict). Browsers send it
// with every form POST; without it the token alone decides.
func sameOrigin(c echo.Context) bool {
	o := c.Request().Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == c.Request().Host
}

// setCookie sets one of the explorer's cookies: HttpOnly, SameSite=Strict,
// scoped to the explorer, Secure when the request came over TLS (directly
// or through a proxy that says so).
func setCookie(c echo.Context, name, value string, maxAge time.Duration) {
	c.SetCookie(&http.Cookie{
		Name: name, Value: value, Path: Prefix, MaxAge: int(maxAge.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Scheme() == "https",
	})
}

func clearCookie(c echo.Context, name string) {
	c.SetCookie(&http.Cookie{Name: name, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.Scheme() == "https"})
}

// param is a path parameter, unescaped: Echo leaves it escaped when the
// request's path was (RawPath set).
func param(c echo.Context, name string) string {
	v := c.Param(name)
	if c.Request().URL.RawPath != "" {
		if u, err := url.PathUnescape(v); err == nil {
			return u
		}
	}
	return v
}
