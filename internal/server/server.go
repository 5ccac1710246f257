// Package server is contextd's HTTP layer: it implements the strict server
// interface generated from api/openapi.yaml. Handlers only translate HTTP to
// a service call and back; errors become problem+json in one place
// (errorHandler), and authentication and idempotency are middleware.
package server

import (
	"context"
	"github.com/contextd/contextd/internal/evidence"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/ledger"
	"github.com/contextd/contextd/internal/mcp"
	"github.com/contextd/contextd/internal/obs"
	"github.com/contextd/contextd/internal/outcome"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/rolepolicy"
	"github.com/contextd/contextd/internal/store"
)

// DefaultBodyLimit is the largest request body accepted unless configured.
const DefaultBodyLimit = 8 << 20

// Config wires a server.
type Config struct {
	// App is the process's services (see package app).
	App       *app.App
	Logger    *slog.Logger
	BodyLimit int64 // bytes; 0 means DefaultBodyLimit
	// BatchBodyLimit bounds the body of a batch of items; 0 means
	// app.DefaultBatchBodyLimit (at least BodyLimit).
	BatchBodyLimit int64
	// Ready reports whether the schema is current; /readyz calls it.
	Ready func(ctx context.Context) error
	// Stopping, when closed, ends the live event streams, so that a
	// graceful shutdown does not wait for clients that never go idle.
	Stopping <-chan struct{}
	// RateLimit is each agent's sustained requests per second (0: no
	// limit); RateBurst how many it may send at once (0: one second's
	// worth, at least 1). Past it: 429 rate_limited with Retry-After.
	RateLimit float64
	RateBurst int
	// KeepAlive is how often an idle event stream gets a comment line (0:
	// DefaultKeepAlive), so proxies and clients can tell a quiet stream
	// from a dead one. StreamWriteTimeout bounds each write of a stream
	// (0: DefaultStreamWriteTimeout): streams are exempt from the server's
	// write timeout, which would end every stream after it.
	KeepAlive          time.Duration
	StreamWriteTimeout time.Duration
	// MetricsElsewhere: /metrics is served on a listener of its own
	// (--metrics-listen, MetricsHandler), not here; otherwise it is served
	// here to admin keys only.
	MetricsElsewhere bool
	// MCPAllowedOrigins are the browser origins that may call /mcp
	// (--mcp-allowed-origins); any other Origin is refused, before
	// authentication. Requests without Origin are not refused.
	MCPAllowedOrigins mcp.Origins
}

// Defaults of an event stream's Config.
const (
	DefaultKeepAlive          = 15 * time.Second
	DefaultStreamWriteTimeout = 10 * time.Second
)

// Server holds the services behind the API.
type Server struct {
	store     *store.Store
	log       *slog.Logger
	bodyLimit int64
	// batchLimit is the body limit of the batch endpoint.
	batchLimit int64
	ready      func(ctx context.Context) error
	stopping   <-chan struct{}
	limiter    *limiter // nil: no rate limit
	agents     *auth.Service
	projects   *project.Service
	items      *item.Service
	packets    *packet.Service
	handoffs   *handoff.Service
	evidence   *evidence.Service
	outcomes   *outcome.Service
	ledger     *ledger.Service
	// rolePolicies are the policies per role (roles.go).
	rolePolicies *rolepolicy.Service
	keys         *evidence.Keys // nil: answers are stored without an HMAC
	// keepAlive and streamWrite are an event stream's comment interval
	// and per-write deadline.
	keepAlive, streamWrite time.Duration
	obs                    *obs.Obs // metrics and tracer (observe.go)
	mcpOrigins             mcp.Origins
}

// New builds the Echo instance serving the whole API.
func New(cfg Config) *echo.Echo {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = DefaultBodyLimit
	}
	if cfg.BatchBodyLimit <= 0 {
		cfg.BatchBodyLimit = max(app.DefaultBatchBodyLimit, cfg.BodyLimit)
	}
	a := cfg.App
	if a == nil {
		a = &app.App{} // routes only: for tests that inspect the router
	}
	s := &Server{
		store: a.Store, log: cfg.Logger, bodyLimit: cfg.BodyLimit, batchLimit: cfg.BatchBodyLimit, ready: cfg.Ready, stopping: cfg.Stopping,
		agents: a.Agents, projects: a.Projects, items: a.Items, packets: a.Packets, handoffs: a.Handoffs, evidence: a.Evidence, keys: a.Keys,
		outcomes: a.Outcomes, ledger: a.Ledger, rolePolicies: a.RolePolicies, limiter: newLimiter(cfg.RateLimit, cfg.RateBurst), keepAlive: orDefault(cfg.KeepAlive, DefaultKeepAlive),
		streamWrite: orDefault(cfg.StreamWriteTimeout, DefaultStreamWriteTimeout), obs: a.Obs, mcpOrigins: cfg.MCPAllowedOrigins,
	}
	if s.obs == nil {
		s.obs = obs.New(nil, nil)
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.Binder = strictBinder{}
	e.HTTPErrorHandler = s.errorHandler
	e.Use(saneRequestID)
	e.Use(middleware.RequestID())
	e.Use(s.observe) // outside Recover: a panic's 500 is measured and logged too
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true}))
	e.Use(s.checkMCPOrigin)
	e.Use(checkURL)
	e.Use(limitParams)
	e.Use(s.limitBody)
	e.Use(s.authenticate)
	e.Use(s.rateLimit)
	e.Use(s.requirePermission(api.Spec))
	e.Use(s.idempotency)

	strict := api.NewStrictHandler(s, nil)
	api.RegisterHandlers(Router(e), strict)
	e.GET("/openapi.yaml", func(c echo.Context) error {
		return c.Blob(http.StatusOK, "application/yaml", api.Spec)
	})
	if !cfg.MetricsElsewhere {
		e.GET(metricsPath, s.adminMetrics)
	}
	mountMCP(e, cfg.Logger)
	s.mountUI(e, a)
	return e
}

// mountMCP serves the Model Context Protocol at /mcp: a transport over
// the API's own operations, each tool call dispatched through e with the
// caller's key (see package mcp). It is not an operation of the contract,
// so requirePermission lets it through; authenticate guards it.
func mountMCP(e *echo.Echo, log *slog.Logger) {
	h, err := mcp.New(mcp.Config{Spec: api.Spec, API: e, Logger: log})
	if err != nil {
		panic(err) // the contract is part of the binary: a build mistake
	}
	wrapped := echo.WrapHandler(h)
	e.Any(mcpPath, func(c echo.Context) error {
		// The request id of the /mcp request goes with every operation a
		// tool call makes, so its problem's request_id and log lines are
		// this request's.
		c.Request().Header.Set(echo.HeaderXRequestID, c.Response().Header().Get(echo.HeaderXRequestID))
		return wrapped(c)
	})
}

// requestIDRE is what a client's own X-Request-Id may be: it is echoed in
// headers, answers, logs and traces.
var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// saneRequestID drops a client's X-Request-Id that is too long or holds
// other characters; the server then makes one of its own.
func saneRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if id := c.Request().Header.Get(echo.HeaderXRequestID); id != "" && !requestIDRE.MatchString(id) {
			c.Request().Header.Del(echo.HeaderXRequestID)
		}
		return next(c)
	}
}

// mcpPath is where the MCP endpoint is served.
const mcpPath = "/mcp"

// checkMCPOrigin refuses a request to /mcp whose Origin is not allowed
// (package mcp, Origins), whatever its method, before anything else is
// looked at: a foreign page a browser was tricked into loading learns
// nothing, not even whether the key it guessed is valid.
func (s *Server) checkMCPOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().URL.Path == mcpPath && !s.mcpOrigins.Allows(c.Request()) {
			return problem(403, "origin_not_allowed", "requests from origin %q may not call %s; allow it with --mcp-allowed-origins",
				c.Request().Header.Get("Origin"), mcpPath)
		}
		return next(c)
	}
}

var _ api.StrictServerInterface = (*Server)(nil)

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// limitBody refuses bodies over the limit: at once when Content-Length says
// so, otherwise when reading passes it.
// A batch of items has a limit of its own: 10,000 items of 2 KB are
// larger than any other request has reason to be.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		limit := s.bodyLimit
		if r.Method == http.MethodPost && (c.Path() == "/v1/projects/:project/items" || c.Path() == EchoPath("/v1/projects/{project}/items:import")) {
			limit = s.batchLimit
		}
		if r.ContentLength > limit {
			return problem(413, "payload_too_large", "request body of %d bytes is over the %d-byte limit", r.ContentLength, limit)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		return next(c)
	}
}

// checkURL refuses paths and query values that are not text: NUL
// characters or invalid UTF-8 can name nothing, and the database would
// refuse them later anyway.
func checkURL(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		bad := func(s string) bool { return !utf8.ValidString(s) || strings.ContainsRune(s, 0) }
		if bad(u.Path) {
			return problem(400, "malformed", "the path must be UTF-8 text without NUL characters")
		}
		for name, vals := range u.Query() {
			for _, v := range vals {
				if bad(name) || bad(v) {
					return problem(400, "malformed", "query parameter %q must be UTF-8 text without NUL characters", name)
				}
			}
		}
		return next(c)
	}
}

type agentKey struct{}

// agentFrom returns the authenticated agent of a /v1 request.
func agentFrom(ctx context.Context) *auth.Agent {
	a, _ := ctx.Value(agentKey{}).(*auth.Agent)
	return a
}

// authenticate requires a valid bearer key on every /v1 route and on the
// MCP endpoint.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p := c.Request().URL.Path; !strings.HasPrefix(p, "/v1/") && p != mcpPath {
			return next(c)
		}
		if n := len(c.Request().Header.Values(echo.HeaderAuthorization)); n > 1 {
			// Which credential would be the request's is not for the server
			// to guess (RFC 9110: Authorization is not a list).
			return problem(400, "malformed", "send one Authorization header, not %d", n)
		}
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		scheme, key, ok := strings.Cut(h, " ")
		if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
			return problem(401, "unauthenticated", "an Authorization: Bearer <key> header is required")
		}
		agent, err := s.agents.Authenticate(c.Request().Context(), strings.TrimSpace(key))
		if err != nil {
			return err
		}
		c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), agentKey{}, agent)))
		return next(c)
	}
}
