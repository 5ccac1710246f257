// Package obs is contextd's observability: Prometheus metrics (metrics.go),
// OpenTelemetry traces (trace.go) and structured logs carrying each
// request's id (log.go). The composition root (package app) builds one Obs
// per process; the HTTP layer, the packet service and the store report to
// it. Nothing here is labelled by project: the number of series must not
// grow with the projects, nor name them.
package obs

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/store"
)

// instrumentation is the name of contextd's tracers.
const instrumentation = "github.com/contextd/contextd"

// Obs is one process's metrics and tracer.
type Obs struct {
	Metrics *Metrics
	// Tracer makes the spans; a no-op one when no exporter is configured.
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
}

// New returns the metrics over stats (the store's, nil: none) and traces to
// tp (nil: none).
func New(stats func() store.Stats, tp trace.TracerProvider) *Obs {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Obs{Metrics: NewMetrics(stats), Tracer: tp, Propagator: propagation.TraceContext{}}
}

// Stages is the assembly's stage hook: each stage is a span, a child of
// the request's, and an observation of
// contextd_assembly_stage_duration_seconds.
func (o *Obs) Stages() assemble.StageHook {
	return stages{t: o.Tracer.Tracer(instrumentation + "/assemble"), m: o.Metrics}
}

type stages struct {
	t trace.Tracer
	m *Metrics
}

func (s stages) Begin(ctx context.Context, stage string) (context.Context, func()) {
	start := time.Now()
	ctx, span := s.t.Start(ctx, "assemble "+stage)
	return ctx, func() {
		s.m.stages.WithLabelValues(stage).Observe(time.Since(start).Seconds())
		span.End()
	}
}
