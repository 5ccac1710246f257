package obs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contextd/contextd/internal/store"
)

// replicaScrape bounds what a scrape waits for the replica's status (the
// store bounds each statement more tightly still).
const replicaScrape = time.Second

var (
	descReplicaInUse = desc("contextd_db_replica_in_use",
		"1 while reads of history go to the read replica (--read-database-url), 0 while it is set aside and they go to the primary.")
	descReplicaLagBytes = desc("contextd_db_replica_lag_bytes",
		"How far the read replica's replay is behind the primary's WAL, in bytes (absent when either could not be asked).")
	descReplicaLagSeconds = desc("contextd_db_replica_lag_seconds",
		"Time since the read replica replayed its last transaction while it is behind the primary, 0 when it is not (absent when unknown).")
	descReplicaReads     = desc("contextd_db_replica_reads_total", "Reads of history the read replica answered.")
	descReplicaFallbacks = desc("contextd_db_replica_fallbacks_total",
		"Reads of history that went to the primary although a replica is configured, by reason: behind (it had not replayed within --read-wait what the primary had committed when the read began, or the primary did not say how far that is), down (set aside or failed), missing (it had not the row yet).", "reason")
)

// ObserveReplica adds the read replica's metrics, read from status at each
// scrape; call it once, when a replica is configured (without one these
// series are absent, not zero).
func (m *Metrics) ObserveReplica(status func(context.Context) (store.ReplicaStatus, bool)) {
	m.reg.MustRegister(replicaCollector{status})
}

// replicaCollector turns the replica's status into metrics at each scrape.
type replicaCollector struct {
	status func(context.Context) (store.ReplicaStatus, bool)
}

func (c replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReplicaInUse, descReplicaLagBytes, descReplicaLagSeconds, descReplicaReads, descReplicaFallbacks} {
		ch <- d
	}
}

func (c replicaCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), replicaScrape)
	defer cancel()
	st, ok := c.status(ctx)
	if !ok {
		return
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	inUse := 0.0
	if st.InUse {
		inUse = 1
	}
	gauge(descReplicaInUse, inUse)
	if st.LagBytes >= 0 {
		gauge(descReplicaLagBytes, float64(st.LagBytes))
	}
	if st.LagSeconds >= 0 {
		gauge(descReplicaLagSeconds, st.LagSeconds)
	}
	ch <- prometheus.MustNewConstMetric(descReplicaReads, prometheus.CounterValue, float64(st.Reads))
	for _, reason := range store.FallbackReasonNames {
		ch <- prometheus.MustNewConstMetric(descReplicaFallbacks, prometheus.CounterValue, float64(st.Fallbacks[reason]), reason)
	}
}
