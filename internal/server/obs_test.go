package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/obs"
	"github.com/contextd/contextd/internal/server"
)

// scrape reads /metrics with key and returns its text.
func (e *env) scrape(key string) string {
	e.t.Helper()
	r := e.do("GET", "/metrics", key, nil)
	require.Equal(e.t, 200, r.status, r.text)
	require.Contains(e.t, r.header.Get("Content-Type"), "text/plain")
	return r.text
}

// metricValue is the value of the series named exactly series (name and
// labels as exposed), or -1 when there is none.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			require.NoError(t, err, line)
			return v
		}
	}
	return -1
}

// After a packet is assembled, /metrics has its request's latency by
// route template and status, the assembly's stage timings and the write
// counters; no series names a project.
func TestMetricsAfterAssembly(t *testing.T) {
	t.Parallel()
	e := packetWorld(t)
	implementer := e.agent("implementer", auth.ReadOnly, "acme")
	r := e.do("POST", "/v1/projects/acme/packets", implementer, packetRequest("implementer"))
	require.Equal(t, 201, r.status, r.text)
	text := e.scrape(e.admin)

	require.Equal(t, 1.0, metricValue(t, text, `contextd_http_request_duration_seconds_count{method="POST",route="/v1/projects/:project/packets",status="201"}`), text)
	require.Equal(t, 1.0, metricValue(t, text, `contextd_http_request_duration_seconds_count{method="DELETE",route="/v1/projects/:project/items/:key",status="200"}`))
	require.Positive(t, metricValue(t, text, `contextd_http_request_duration_seconds_bucket{method="POST",route="/v1/projects/:project/packets",status="201",le="+Inf"}`))
	for _, stage := range []string{"predecessors", "plan", "small", "select", "cutoff", "records", "store"} {
		require.Equal(t, 1.0, metricValue(t, text, `contextd_assembly_stage_duration_seconds_count{stage="`+stage+`"}`), stage)
	}
	require.Equal(t, 1.0, metricValue(t, text, "contextd_packets_written_total"))
	require.Positive(t, metricValue(t, text, "contextd_packet_records_written_total"))
	require.GreaterOrEqual(t, metricValue(t, text, "contextd_item_versions_written_total"), 17.0, "13 + 2 items, a PUT and a delete")
	require.Equal(t, 1.0, metricValue(t, text, `contextd_chain_appends_total{kind="packet"}`))
	require.GreaterOrEqual(t, metricValue(t, text, `contextd_chain_appends_total{kind="item_version"}`), 17.0)
	require.GreaterOrEqual(t, metricValue(t, text, "contextd_db_round_trips_total"), 1.0)
	require.GreaterOrEqual(t, metricValue(t, text, "contextd_db_pool_acquires_total"), 1.0)
	require.Equal(t, 0.0, metricValue(t, text, "contextd_tx_retries_total"))
	require.Equal(t, 0.0, metricValue(t, text, "contextd_rate_limit_refusals_total"))
	require.NotContains(t, text, "acme", "no series names a project")
	require.NotContains(t, text, `route="/v1/projects/acme`, "routes are templates")

	// A handoff and its acceptance are transitions, by the status moved to.
	critic := e.agent("critic", auth.Edit, "acme")
	id := e.handoff(e.admin, manifest("T-9", "critic"))
	require.Equal(t, 200, e.do("POST", "/v1/projects/acme/handoffs/"+id+"/accept", critic, nil).status)
	text = e.scrape(e.admin)
	require.Equal(t, 1.0, metricValue(t, text, `contextd_handoff_transitions_total{to="pending"}`), text)
	require.Equal(t, 1.0, metricValue(t, text, `contextd_handoff_transitions_total{to="accepted"}`), text)
	require.Equal(t, 1.0, metricValue(t, text, `contextd_http_request_duration_seconds_count{method="POST",route="/v1/projects/:project/handoffs/:id/accept",status="200"}`), text)
}

// /metrics on the main listener is an admin's: 401 without a key, 403
// problem+json for another, and absent when served elsewhere.
func TestMetricsAdminOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	reader := e.agent("reader", auth.ReadOnly, "acme")
	r := e.do("GET", "/metrics", "", nil)
	require.Equal(t, 401, r.status)
	require.Equal(t, "unauthenticated", r.json["code"])
	r = e.do("GET", "/metrics", reader, nil)
	require.Equal(t, 403, r.status)
	require.Equal(t, "forbidden", r.json["code"])
	require.Equal(t, r.header.Get("X-Request-Id"), r.json["request_id"])
	require.Equal(t, 401, e.do("GET", "/metrics", "ctxd_notakey", nil).status)

	elsewhere := setupWith(t, server.Config{MetricsElsewhere: true})
	require.Equal(t, 404, elsewhere.do("GET", "/metrics", elsewhere.admin, nil).status)
}

// Refusals of the rate limit are counted.
func TestMetricsRateLimitRefusals(t *testing.T) {
	t.Parallel()
	e := setupWith(t, server.Config{RateLimit: 0.001, RateBurst: 1})
	reader := e.agent("reader", auth.ReadOnly, "acme")
	require.Equal(t, 200, e.do("GET", "/v1/projects", reader, nil).status)
	require.Equal(t, 429, e.do("GET", "/v1/projects", reader, nil).status)
	require.Equal(t, 1.0, metricValue(t, e.scrape(e.admin), "contextd_rate_limit_refusals_total"))
}

// syncBuffer is a bytes.Buffer written by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Every problem carries the request id of its X-Request-Id header, and the
// request's one log line at Info carries it too.
func TestRequestIDInProblemAndLog(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	log, err := obs.NewLogger(&buf, "json", slog.LevelInfo)
	require.NoError(t, err)
	e := setupWith(t, server.Config{Logger: log})
	r := e.do("GET", "/v1/projects/nowhere/items/x", e.admin, nil)
	require.Equal(t, 404, r.status)
	id := r.header.Get("X-Request-Id")
	require.NotEmpty(t, id)
	require.Equal(t, id, r.json["request_id"])
	r = e.do("PUT", "/v1/projects/acme", e.admin, "{not json")
	require.Equal(t, 400, r.status)
	require.Equal(t, r.header.Get("X-Request-Id"), r.json["request_id"])

	var lines []map[string]any
	for _, m := range requestLines(t, buf.String()) {
		if m["request_id"] == id {
			lines = append(lines, m)
		}
	}
	require.Len(t, lines, 1, buf.String())
	require.Equal(t, "INFO", lines[0]["level"])
	require.Equal(t, "/v1/projects/:project/items/:key", lines[0]["route"])
	require.Equal(t, 404.0, lines[0]["status"])
	require.Equal(t, 1, strings.Count(buf.String(), `"request_id":"`+id+`"`), "one line for one request")
}

// A line logged with a request's context gets its request id.
func TestLogLinesCarryRequestID(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	log, err := obs.NewLogger(&buf, "text", slog.LevelInfo)
	require.NoError(t, err)
	log.InfoContext(obs.WithRequestID(context.Background(), "req-42"), "something")
	require.Regexp(t, regexp.MustCompile(`msg=something request_id=req-42`), buf.String())
	_, err = obs.NewLogger(io.Discard, "xml", slog.LevelInfo)
	require.Error(t, err)
}

// A write under an Idempotency-Key is logged with the status it answered
// (its answer is buffered until its key is stored), and a problem it
// answers names its request like every other; a replay keeps that body.
func TestIdempotentAnswersAreLoggedAndNamed(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	log, err := obs.NewLogger(&buf, "json", slog.LevelInfo)
	require.NoError(t, err)
	e := setupWith(t, server.Config{Logger: log})
	e.project("acme")
	created := e.do("PUT", "/v1/projects/acme/items/k", e.admin, api.PutItemJSONRequestBody{Content: "x"}, "Idempotency-Key", "ik-1")
	require.Equal(t, 201, created.status, created.text)
	stale := e.do("PUT", "/v1/projects/acme/items/k", e.admin, api.PutItemJSONRequestBody{Content: "y"}, "Idempotency-Key", "ik-2", "If-Match", `"7"`)
	require.Equal(t, 412, stale.status, stale.text)
	id := stale.header.Get("X-Request-Id")
	require.NotEmpty(t, id)
	require.Equal(t, id, stale.json["request_id"], "the problem names its request")
	again := e.do("PUT", "/v1/projects/acme/items/k", e.admin, api.PutItemJSONRequestBody{Content: "y"}, "Idempotency-Key", "ik-2", "If-Match", `"7"`)
	require.Equal(t, 412, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, again.header.Get("X-Request-Id"), again.json["request_id"], "a replayed problem names the request it answers")
	require.NotEqual(t, id, again.json["request_id"])
	delete(stale.json, "request_id")
	delete(again.json, "request_id")
	require.Equal(t, stale.json, again.json, "the rest is the stored answer")

	status := map[string]float64{}
	for _, m := range requestLines(t, buf.String()) {
		if rid, ok := m["request_id"].(string); ok {
			status[rid], _ = m["status"].(float64)
		}
	}
	require.Equal(t, 201.0, status[created.header.Get("X-Request-Id")], buf.String())
	require.Equal(t, 412.0, status[id])
	require.Equal(t, 412.0, status[again.header.Get("X-Request-Id")])
}

// requestLines are the request log lines (msg "request") of a JSON log.
func requestLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}
