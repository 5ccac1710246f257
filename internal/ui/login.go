package ui

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/fault"
)

// loginView is the sign-in form.
type loginView struct {
	Token   string // the form's anti-forgery token
	Next    string
	Message string
}

// loginTTL bounds how long a sign-in form stays usable.
const loginTTL = time.Hour

// safeNext is where to go after signing in: a path of the explorer only,
// never another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") && next != Prefix || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix
	}
	return next
}

func (h *handler) loginForm(c echo.Context) error {
	return h.showLogin(c, http.StatusOK, c.QueryParam("next"), "")
}

// showLogin renders the form with a fresh anti-forgery token, also set as
// a cookie: the POST must carry both, equal.
func (h *handler) showLogin(c echo.Context, status int, next, msg string) error {
	tok := newToken()
	setCookie(c, LoginCookie, tok, loginTTL)
	return h.render(c, status, "login", "Sign in", "", loginView{Token: tok, Next: safeNext(next), Message: msg})
}

// login signs in with the agent key of the form and sets the session
// cookie. The key is checked by the agents service exactly as a bearer key
// is; only the session's hash is stored.
func (h *handler) login(c echo.Context) error {
	next := c.FormValue("next")
	ck, err := c.Cookie(LoginCookie)
	form := c.FormValue("csrf")
	if err != nil || form == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(form)) != 1 || !sameOrigin(c) {
		return h.showLogin(c, http.StatusForbidden, next, "The sign-in form expired or did not come from this server; please try again.")
	}
	if h.sessions == nil {
		return h.fail(c, errors.New("the explorer has no services"))
	}
	token, _, err := h.sessions.Begin(c.Request().Context(), strings.TrimSpace(c.FormValue("key")))
	if errors.Is(err, fault.ErrUnauthenticated) {
		return h.showLogin(c, http.StatusUnauthorized, next, "That key was not accepted: it is unknown, malformed or revoked.")
	}
	if err != nil {
		return h.fail(c, err)
	}
	clearCookie(c, LoginCookie)
	setCookie(c, SessionCookie, token, MaxAge)
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

// logoutLink is the sign-out link of every page: a GET that carries the
// session's anti-forgery token in its query (a page offers no form but
// sign-in, search and replay), checked as a POST's form is; without it,
// nothing ends.
func (h *handler) logoutLink(c echo.Context) error {
	ck, err := c.Cookie(SessionCookie)
	if err != nil || !CheckCSRF(ck.Value, c.QueryParam("csrf")) {
		return h.fail(c, errCSRF)
	}
	return h.logout(c)
}

// logout ends the session (the POST passed signedIn's token check).
func (h *handler) logout(c echo.Context) error {
	if ck, err := c.Cookie(SessionCookie); err == nil {
		if err := h.sessions.End(c.Request().Context(), ck.Value); err != nil {
			return h.fail(c, err)
		}
	}
	clearCookie(c, SessionCookie)
	return c.Redirect(http.StatusSeeOther, Prefix+"/login")
}
