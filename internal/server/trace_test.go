package server_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/obs"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// collector is an in-process OTLP/HTTP trace receiver: it decodes each
// ExportTraceServiceRequest and keeps its spans.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// The trace of one assembly reaches an OTLP collector, configured by
// OTEL_EXPORTER_OTLP_ENDPOINT as serve is: the request's span is the
// child of the client's traceparent, the assembly's stages are spans
// under it, and the SQL statements are spans under the stages.
func TestTraceOfAssemblyReachesCollector(t *testing.T) {
	col := &collector{}
	cs := httptest.NewServer(col)
	defer cs.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", cs.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	ctx := context.Background()
	settings := obs.TraceSettingsFromEnv(os.Getenv)
	require.Equal(t, cs.URL, settings.Endpoint)
	tracing, err := obs.StartTracing(ctx, settings, "test")
	require.NoError(t, err)
	st, err := store.Open(ctx, store.Config{URL: pgtest.NewURL(t), AcquireTimeout: pgtest.AcquireTimeout, Tracer: tracing.TracerProvider()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	a := app.New(st, app.WithKeys(testKeys), app.WithObs(obs.New(st.Stats, tracing.TracerProvider())))
	adoptChains(t, st)
	ts := httptest.NewServer(server.New(server.Config{App: a}))
	t.Cleanup(ts.Close)
	_, admin, err := a.Agents.Bootstrap(ctx)
	require.NoError(t, err)
	e := &env{t: t, url: ts.URL, agents: a.Agents, admin: admin, app: a}
	e.project("acme")
	r := e.do("POST", "/v1/projects/acme/items", e.admin, map[string]any{"items": []any{
		map[string]any{"key": "always.rule", "content": "Always cite the ticket."},
		map[string]any{"key": "search.ledger", "content": "The ledger reconciles nightly.", "trigger": map[string]any{"relevance": true}},
	}})
	require.Equal(t, 200, r.status, r.text)
	implementer := e.agent("implementer", auth.ReadOnly, "acme")

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r = e.do("POST", "/v1/projects/acme/packets", implementer, map[string]any{"target_role": "implementer", "query": "ledger"},
		"traceparent", "00-"+traceID+"-"+parentID+"-01")
	require.Equal(t, 201, r.status, r.text)
	require.NoError(t, tracing.Shutdown(ctx)) // flushes the batch to the collector

	col.mu.Lock()
	defer col.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	var request *tracepb.Span
	for _, s := range col.spans {
		if hex.EncodeToString(s.TraceId) != traceID {
			continue
		}
		byID[hex.EncodeToString(s.SpanId)] = s
		if s.Name == "POST /v1/projects/:project/packets" {
			request = s
		}
	}
	require.NotNil(t, request, "the request's span, in the client's trace")
	require.Equal(t, parentID, hex.EncodeToString(request.ParentSpanId), "the client's traceparent is the parent")
	require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, request.Kind)
	under := func(s *tracepb.Span, ancestor *tracepb.Span) bool {
		for p := byID[hex.EncodeToString(s.ParentSpanId)]; p != nil; p = byID[hex.EncodeToString(p.ParentSpanId)] {
			if p == ancestor {
				return true
			}
		}
		return false
	}
	stages := map[string]*tracepb.Span{}
	for _, s := range byID {
		if len(s.Name) > len("assemble ") && s.Name[:len("assemble ")] == "assemble " {
			require.True(t, under(s, request), "stage %s is under the request", s.Name)
			stages[s.Name[len("assemble "):]] = s
		}
	}
	for _, name := range []string{"predecessors", "plan", "small", "select", "cutoff", "records", "store"} {
		require.Contains(t, stages, name)
	}
	sqlUnder := map[string]int{}
	for _, s := range byID {
		if len(s.Name) < 4 || s.Name[:4] != "sql " {
			continue
		}
		require.True(t, under(s, request), "SQL span %s is under the request", s.Name)
		for name, st := range stages {
			if under(s, st) {
				sqlUnder[name]++
			}
		}
	}
	require.Positive(t, sqlUnder["small"], "the pins and relevance reads are SQL spans of the small stage")
	require.Positive(t, sqlUnder["store"], "the packet's insert is a SQL span of the store stage")
	var sawInsert bool
	for _, s := range byID {
		sawInsert = sawInsert || s.Name == "sql PacketInsert"
	}
	require.True(t, sawInsert, "statements are named by their sqlc query")
}
