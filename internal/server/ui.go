package server

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/ui"
)

// mountUI serves the provenance explorer at /ui (package ui): a transport
// over the same services, not an operation of the contract. authenticate
// and requirePermission act on /v1 paths and the contract's operations, so
// they leave it alone; it signs its own requests in with a session, and
// the URL, parameter and body limits above apply to it as to every route.
// The explorer's requests count against the session agent's rate limit.
func (s *Server) mountUI(e *echo.Echo, a *app.App) {
	if a.Store == nil {
		return // routes only: no services to show
	}
	ui.Mount(e, ui.Config{App: a, Logger: s.log, Limit: s.uiRateLimit})
	e.GET("/", redirectToUI)
	e.HEAD("/", redirectToUI)
}

// redirectToUI sends a browser that opens the server's address to the
// explorer. 302 Found: the temporary redirect every browser follows for a
// GET, which it does not cache, so the root may answer otherwise one day.
func redirectToUI(c echo.Context) error {
	return c.Redirect(http.StatusFound, ui.Prefix)
}

// uiRateLimit spends one of the agent's tokens for an explorer request.
func (s *Server) uiRateLimit(a *auth.Agent) error {
	if s.limiter == nil {
		return nil
	}
	if ok, wait := s.limiter.take(a.ID, time.Now()); !ok {
		return fmt.Errorf("%w: agent %s is over its rate; retry in %d s", fault.ErrRateLimited, a.ID, max(1, int(math.Ceil(wait.Seconds()))))
	}
	return nil
}
