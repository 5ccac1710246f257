package server

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/obs"
)

// metricsPath is where the Prometheus metrics are served.
const metricsPath = "/metrics"

// routeOf is the route template a request matched ("/v1/projects/:project/packets"),
// never its path, so the metrics' series stay as few as the routes;
// "unmatched" for a path no route has.
func routeOf(c echo.Context) string {
	r := strings.ReplaceAll(c.Path(), `\`, "") // the escaped colons of custom methods (EchoPath)
	if r == "" {
		return "unmatched"
	}
	return r
}

// observe is the outermost middleware after the request id: each request
// is a span (the child of an incoming W3C traceparent), an observation of
// contextd_http_request_duration_seconds by route and status, and one log
// line at Info; its context carries the request id, which every log line
// written with it shows.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	tracer := s.obs.Tracer.Tracer("github.com/contextd/contextd/internal/server")
	return func(c echo.Context) error {
		start := time.Now()
		r := c.Request()
		route := routeOf(c)
		reqID := c.Response().Header().Get(echo.HeaderXRequestID)
		ctx := s.obs.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("http.route", route),
			attribute.String("url.path", r.URL.Path), attribute.String("contextd.request_id", reqID)))
		ctx = obs.WithRequestID(ctx, reqID)
		c.SetRequest(r.WithContext(ctx))
		if err := next(c); err != nil {
			c.Error(err)
		}
		status := c.Response().Status
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
		span.End()
		took := time.Since(start)
		s.obs.Metrics.ObserveRequest(r.Method, route, status, took)
		s.log.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("method", r.Method), slog.String("route", route),
			slog.String("path", r.URL.Path), slog.Int("status", status), slog.Duration("took", took),
			slog.String("request_id", reqID))
		return nil
	}
}

// adminMetrics serves /metrics on the main listener to admin keys only:
// the metrics say what the deployment does, which is an admin's to know.
func (s *Server) adminMetrics(c echo.Context) error {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	scheme, key, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		return problem(401, "unauthenticated", "an Authorization: Bearer <key> header of an admin is required for %s", metricsPath)
	}
	agent, err := s.agents.Authenticate(c.Request().Context(), strings.TrimSpace(key))
	if err != nil {
		return err
	}
	if !agent.IsAdmin() {
		return fmt.Errorf("%w: %s is served to admin keys only (or on --metrics-listen)", fault.ErrForbidden, metricsPath)
	}
	s.obs.Metrics.Handler().ServeHTTP(c.Response(), c.Request())
	return nil
}
