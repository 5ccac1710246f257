package obs

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// TraceSettings is the OpenTelemetry exporter as the standard environment
// variables configure it.
type TraceSettings struct {
	// Endpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT; empty: no traces.
	Endpoint string
	// Protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default) or grpc.
	Protocol string
}

// TraceSettingsFromEnv reads the settings with getenv (os.Getenv).
func TraceSettingsFromEnv(getenv func(string) string) TraceSettings {
	first := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	s := TraceSettings{
		Endpoint: first("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
		Protocol: first("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
	}
	if s.Protocol == "" {
		s.Protocol = "http/protobuf"
	}
	return s
}

// Validate refuses a protocol contextd does not speak.
func (s TraceSettings) Validate() error {
	switch s.Protocol {
	case "http/protobuf", "http", "grpc":
		return nil
	}
	return fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is neither http/protobuf nor grpc", s.Protocol)
}

// Tracing is the process's tracer provider and how to flush it.
type Tracing struct {
	// Provider is nil when traces are off.
	Provider *sdktrace.TracerProvider
}

// TracerProvider is the provider, or nil when traces are off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil || t.Provider == nil {
		return nil
	}
	return t.Provider
}

// Shutdown sends what is still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.Provider == nil {
		return nil
	}
	return t.Provider.Shutdown(ctx)
}

// StartTracing starts the OTLP exporter the settings name, batching spans
// to it; with no endpoint it returns a Tracing that traces nothing. The
// exporter reads the rest of its configuration (headers, timeouts, TLS)
// from the standard OTEL_EXPORTER_OTLP_* variables itself.
func StartTracing(ctx context.Context, s TraceSettings, version string) (*Tracing, error) {
	if s.Endpoint == "" {
		return &Tracing{}, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	if s.Protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(serviceName()), semconv.ServiceVersion(version)))
	if err != nil {
		res = resource.Default()
	}
	return &Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// serviceName is OTEL_SERVICE_NAME, else contextd.
func serviceName() string {
	if n := os.Getenv("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return "contextd"
}
