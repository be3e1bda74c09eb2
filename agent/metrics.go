package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reconcile results, the values of the result label of
// setpoint_agent_reconciles_total.
const (
	resultSuccess            = "success"
	resultError              = "error"
	resultServiceUnavailable = "service_unavailable"
	resultInvalid            = "invalid"
	resultPaused             = "paused"
	resultDeleted            = "deleted"
)

// Metrics are the agent's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	reconciles *prometheus.CounterVec
	recommend  *prometheus.HistogramVec
	rescales   *prometheus.CounterVec
}

// NewMetrics creates the agent's metrics and registers them with reg:
//
//   - setpoint_agent_reconciles_total{result}: reconciles by result
//     (success, error, service_unavailable, invalid, paused, deleted);
//   - setpoint_agent_recommend_duration_seconds{code}: Recommend latency by
//     gRPC status code;
//   - setpoint_agent_rescales_total{result}: Scale updates by result
//     (applied, failed, dry_run).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "reconciles_total",
			Help: "Reconciles of Autoscalers by result.",
		}, []string{"result"}),
		recommend: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "recommend_duration_seconds",
			Help:    "Latency of Recommend calls to the Setpoint service by gRPC status code.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"code"}),
		rescales: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "rescales_total",
			Help: "Scale updates of targets by result.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.reconciles, m.recommend, m.rescales)
	return m
}

func (m *Metrics) reconciled(result string) {
	if m != nil {
		m.reconciles.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) recommended(code string, d time.Duration) {
	if m != nil {
		m.recommend.WithLabelValues(code).Observe(d.Seconds())
	}
}

func (m *Metrics) rescaled(result string) {
	if m != nil {
		m.rescales.WithLabelValues(result).Inc()
	}
}
