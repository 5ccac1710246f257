package obs

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/contextd/contextd/internal/store"
)

// Metrics is the process's Prometheus registry and the instruments the
// transports observe directly; the store's counters are read from its
// Stats at each scrape (storeCollector).
type Metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.HistogramVec
	stages      *prometheus.HistogramVec
	rateLimited prometheus.Counter
}

// latencyBuckets span a cached GET (about a millisecond) to a large batch
// import (tens of seconds).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// NewMetrics registers contextd's metrics, the Go runtime's and the
// process's on a registry of their own (so two servers in one test binary
// do not share counters).
func NewMetrics(stats func() store.Stats) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "contextd_http_request_duration_seconds", Buckets: latencyBuckets,
			Help: "HTTP requests by method, route template (never the raw path) and status, in seconds.",
		}, []string{"method", "route", "status"}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "contextd_assembly_stage_duration_seconds", Buckets: latencyBuckets,
			Help: "Time in each stage of packet assembly (predecessors, plan, small, select, cutoff, records, explain, store), in seconds.",
		}, []string{"stage"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "contextd_rate_limit_refusals_total", Help: "Requests refused with 429 rate_limited.",
		}),
	}
	m.reg.MustRegister(m.requests, m.stages, m.rateLimited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if stats != nil {
		m.reg.MustRegister(storeCollector{stats})
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry, for tests and further collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveRequest records one answered request.
func (m *Metrics) ObserveRequest(method, route string, status int, took time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Observe(took.Seconds())
}

// RateLimited counts a 429 rate_limited.
func (m *Metrics) RateLimited() { m.rateLimited.Inc() }

// ObserveStage records the time of an assembly stage measured outside
// the stage hook.
func (m *Metrics) ObserveStage(stage string, took time.Duration) {
	m.stages.WithLabelValues(stage).Observe(took.Seconds())
}

// storeCollector turns the store's Stats into metrics at each scrape.
type storeCollector struct{ stats func() store.Stats }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descRetries    = desc("contextd_tx_retries_total", "Transactions run again after a serialization failure, a deadlock or a connection lost before COMMIT.")
	descTrips      = desc("contextd_db_round_trips_total", "Round trips to PostgreSQL (a pipeline counts one, a COPY two).")
	descAppends    = desc("contextd_chain_appends_total", "Audit chain entries committed, by kind.", "kind")
	descPackets    = desc("contextd_packets_written_total", "Packets committed.")
	descRecords    = desc("contextd_packet_records_written_total", "Decision records of committed packets.")
	descVersions   = desc("contextd_item_versions_written_total", "Item versions committed.")
	descHandoffs   = desc("contextd_handoff_transitions_total", "Handoff events committed, by the status they moved to (pending: created).", "to")
	descPoolMax    = desc("contextd_db_pool_max_connections", "The pool's size.")
	descPoolConns  = desc("contextd_db_pool_connections", "Connections of the pool by state.", "state")
	descAcquires   = desc("contextd_db_pool_acquires_total", "Connections taken from the pool.")
	descEmpty      = desc("contextd_db_pool_empty_acquires_total", "Acquires that waited because no connection was free.")
	descCanceled   = desc("contextd_db_pool_canceled_acquires_total", "Acquires cancelled while waiting (the acquire timeout included).")
	descAcqSecs    = desc("contextd_db_pool_acquire_seconds_total", "Total time spent acquiring connections, in seconds.")
	descNewConns   = desc("contextd_db_pool_new_connections_total", "Connections opened.")
	descDestroyed  = desc("contextd_db_pool_destroyed_connections_total", "Connections closed by the pool, by reason.", "reason")
	storeDescribed = []*prometheus.Desc{descRetries, descTrips, descAppends, descPackets, descRecords, descVersions, descHandoffs,
		descPoolMax, descPoolConns, descAcquires, descEmpty, descCanceled, descAcqSecs, descNewConns, descDestroyed}
)

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range storeDescribed {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(descRetries, float64(st.Retries))
	counter(descTrips, float64(st.RoundTrips))
	for kind, n := range st.ChainAppends {
		counter(descAppends, float64(n), kind)
	}
	counter(descPackets, float64(st.Packets))
	counter(descRecords, float64(st.PacketRecords))
	counter(descVersions, float64(st.ItemVersions))
	for to, n := range st.HandoffTransitions {
		counter(descHandoffs, float64(n), to)
	}
	p := st.Pool
	gauge(descPoolMax, float64(p.MaxConns))
	gauge(descPoolConns, float64(p.IdleConns), "idle")
	gauge(descPoolConns, float64(p.AcquiredConns), "acquired")
	gauge(descPoolConns, float64(p.ConstructingConns), "constructing")
	counter(descAcquires, float64(p.AcquireCount))
	counter(descEmpty, float64(p.EmptyAcquireCount))
	counter(descCanceled, float64(p.CanceledAcquireCount))
	counter(descAcqSecs, p.AcquireDurationSeconds)
	counter(descNewConns, float64(p.NewConns))
	counter(descDestroyed, float64(p.MaxLifetimeDestroys), "max_lifetime")
	counter(descDestroyed, float64(p.MaxIdleDestroys), "max_idle")
}
