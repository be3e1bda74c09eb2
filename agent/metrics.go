package agent

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/setpointhq/setpoint/hpa/metriclabel"
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
	resultStoodDown          = "stood_down"
)

// Metrics are the agent's Prometheus metrics. A nil *Metrics records
// nothing. Besides the agent's own, they are the metrics the Kubernetes HPA
// controller exports (pkg/controller/podautoscaler/monitor), with its
// label names and values, under setpoint_agent_ instead of
// horizontal_pod_autoscaler_controller_, and what its users asked for:
// each metric's proposal and the limits that held a decision back. The
// per-target series (labels namespace and hpa_name) are the agent's: it
// sees only its own cluster; they are removed when the Autoscaler is.
// docs/metrics.md lists them all.
type Metrics struct {
	reconciles *prometheus.CounterVec
	recommend  *prometheus.HistogramVec
	rescales   *prometheus.CounterVec

	reconciliations   *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	computations      *prometheus.CounterVec
	computeDuration   *prometheus.HistogramVec
	autoscalers       prometheus.Gauge
	desired           *prometheus.GaugeVec
	proposed          *prometheus.GaugeVec
	limited           *prometheus.GaugeVec
	standing          *prometheus.GaugeVec
	interval          prometheus.Histogram
	kubeRequests      *prometheus.CounterVec
	throttledSeconds  prometheus.Counter

	mu sync.Mutex
	// targets are the Autoscalers reconciled and not deleted, by
	// namespace/name, with the per-target series set for each: a series
	// is deleted by its labels, never by a scan of all series.
	targets map[string]*targetSeries
}

// targetSeries are the label values of the series set for one Autoscaler
// besides desired_replicas.
type targetSeries struct {
	proposed [][]string
	limited  [][]string
}

// intervalBuckets are the buckets of setpoint_agent_reconcile_interval_ratio:
// fine around 1 (on time), coarse where the agent is far behind.
var intervalBuckets = []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 1, 1.02, 1.05, 1.1, 1.15, 1.2, 1.3, 1.5, 2, 3, 5, 10}

// NewMetrics creates the agent's metrics and registers them with reg:
//
//   - setpoint_agent_reconciles_total{result}: reconciles by result
//     (success, error, service_unavailable, invalid, paused, deleted,
//     stood_down);
//   - setpoint_agent_recommend_duration_seconds{code}: Recommend latency by
//     gRPC status code;
//   - setpoint_agent_rescales_total{result}: Scale updates by result
//     (applied, failed, dry_run);
//   - setpoint_agent_reconciliations_total{action,error} and
//     setpoint_agent_reconciliation_duration_seconds{action,error}: the HPA
//     controller's reconciliations (action scale_up, scale_down, none;
//     error none, spec, internal);
//   - setpoint_agent_metric_computation_total{action,error,metric_type} and
//     setpoint_agent_metric_computation_duration_seconds{...}: each
//     metric's fetch and computation, as the HPA controller's;
//   - setpoint_agent_num_horizontal_pod_autoscalers: Autoscalers reconciled
//     and not deleted;
//   - setpoint_agent_desired_replicas{namespace,hpa_name}: each
//     Autoscaler's desired replicas;
//   - setpoint_agent_metric_proposed_replicas{namespace,hpa_name,metric_index,metric_type,metric}:
//     what each metric of an Autoscaler proposed at its last decision;
//   - setpoint_agent_decision_limited{namespace,hpa_name,kind,reason}: 1
//     for each step (stabilization, rate limit, min/max) that moved the
//     last decision of an Autoscaler away from its metrics' proposal;
//   - setpoint_agent_standing_down{namespace,hpa_name}: 1 for each
//     HorizontalPodAutoscaler whose status another controller writes, so
//     the agent stands down for it (ConditionStandingDown);
//   - setpoint_agent_reconcile_interval_ratio: the time between two
//     reconciles of the same Autoscaler over the sync period (1 is on
//     time; above 1, the agent is behind);
//   - setpoint_agent_kube_requests_total{method}: requests to the
//     Kubernetes API by HTTP method;
//   - setpoint_agent_kube_client_throttled_seconds_total: time requests
//     waited for the client-side rate limit (-kube-api-qps).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	target := []string{"namespace", "hpa_name"}
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
		reconciliations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "reconciliations_total",
			Help: "Reconciliations of Autoscalers; action is scale_down, scale_up or none, error is spec, internal or none (as the HPA controller's).",
		}, []string{"action", "error"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "reconciliation_duration_seconds",
			Help:    "Time to reconcile an Autoscaler once, by action and error (as the HPA controller's).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"action", "error"}),
		computations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "metric_computation_total",
			Help: "Metric computations; action is what the metric proposed (scale_down, scale_up, none), error spec, internal or none, metric_type the spec's (as the HPA controller's).",
		}, []string{"action", "error", "metric_type"}),
		computeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "metric_computation_duration_seconds",
			Help:    "Time to fetch one metric from the metrics APIs (the computation is the service's), by action, error and metric_type (as the HPA controller's).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"action", "error", "metric_type"}),
		autoscalers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "num_horizontal_pod_autoscalers",
			Help: "Autoscalers this agent reconciles (as the HPA controller's num_horizontal_pod_autoscalers).",
		}),
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "desired_replicas",
			Help: "Desired replicas of each Autoscaler (as the HPA controller's desired_replicas).",
		}, target),
		proposed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "metric_proposed_replicas",
			Help: "Replica count each metric of an Autoscaler proposed at its last decision (absent for a metric that failed).",
		}, append(target, "metric_index", "metric_type", "metric")),
		limited: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "decision_limited",
			Help: "1 for each step (kind: Stabilized, Limited, ...; reason: ScaleUpStabilized, ScaleDownLimit, TooManyReplicas, ...) that moved an Autoscaler's last decision away from its metrics' proposal.",
		}, append(target, "kind", "reason")),
		standing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "standing_down",
			Help: "1 for each HorizontalPodAutoscaler whose status another controller writes: the agent stands down for it.",
		}, target),
		interval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "reconcile_interval_ratio",
			Help:    "Time between two reconciles of the same Autoscaler over the sync period: 1 is on time, above 1 the agent is behind.",
			Buckets: intervalBuckets,
		}),
		kubeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "kube_requests_total",
			Help: "Requests to the Kubernetes API (watches, metrics APIs and Events included) by HTTP method.",
		}, []string{"method"}),
		throttledSeconds: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "agent", Name: "kube_client_throttled_seconds_total",
			Help: "Time requests to the Kubernetes API waited for the client-side rate limit (-kube-api-qps, -kube-api-burst).",
		}),
		targets: map[string]*targetSeries{},
	}
	reg.MustRegister(m.reconciles, m.recommend, m.rescales, m.reconciliations, m.reconcileDuration,
		m.computations, m.computeDuration, m.autoscalers, m.desired, m.proposed, m.limited,
		m.standing, m.interval, m.kubeRequests, m.throttledSeconds)
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

// reconciliation records one reconcile of an existing Autoscaler.
func (m *Metrics) reconciliation(action, errLabel string, took time.Duration) {
	if m != nil {
		m.reconciliations.WithLabelValues(action, errLabel).Inc()
		m.reconcileDuration.WithLabelValues(action, errLabel).Observe(took.Seconds())
	}
}

func (m *Metrics) kubeRequest(method string) {
	if m != nil {
		m.kubeRequests.WithLabelValues(method).Inc()
	}
}

func (m *Metrics) throttled(d time.Duration) {
	if m != nil {
		m.throttledSeconds.Add(d.Seconds())
	}
}

// intervalRatio records the time between two reconciles of one key over
// the sync period.
func (m *Metrics) intervalRatio(r float64) {
	if m != nil {
		m.interval.Observe(r)
	}
}

// present counts the Autoscaler namespace/name as reconciled.
func (m *Metrics) present(namespace, name string) {
	if m == nil {
		return
	}
	key := namespace + "/" + name
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.targets[key]; !ok {
		m.targets[key] = &targetSeries{}
		m.autoscalers.Set(float64(len(m.targets)))
	}
}

// standingDown sets whether the agent stands down for the HPA
// namespace/name; the series exists only while it does.
func (m *Metrics) standingDown(namespace, name string, on bool) {
	if m == nil {
		return
	}
	if on {
		m.standing.WithLabelValues(namespace, name).Set(1)
		return
	}
	m.standing.DeleteLabelValues(namespace, name)
}

// gone removes a deleted Autoscaler and its series.
func (m *Metrics) gone(namespace, name string) {
	if m == nil {
		return
	}
	key := namespace + "/" + name
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.targets[key]
	delete(m.targets, key)
	m.autoscalers.Set(float64(len(m.targets)))
	m.desired.DeleteLabelValues(namespace, name)
	m.standing.DeleteLabelValues(namespace, name)
	if ts == nil {
		return
	}
	for _, lv := range ts.proposed {
		m.proposed.DeleteLabelValues(lv...)
	}
	for _, lv := range ts.limited {
		m.limited.DeleteLabelValues(lv...)
	}
}

// decided records the decision rec made for the Autoscaler namespace/name
// with spec metrics specs at current replicas; took are the metrics' fetch
// times, index-aligned with specs. The series of the previous decision
// that this one does not set again are deleted.
func (m *Metrics) decided(namespace, name string, specs []autoscalingv2.MetricSpec, current int32, rec *Recommendation, took []time.Duration) {
	if m == nil {
		return
	}
	m.desired.WithLabelValues(namespace, name).Set(float64(rec.DesiredReplicas))
	var next targetSeries
	for i := range specs {
		typ := string(specs[i].Type)
		action, errLabel := metriclabel.ActionNone, metriclabel.ErrorInternal
		if i < len(rec.Metrics) && !rec.Metrics[i].Failed {
			p := rec.Metrics[i].Proposal
			action, errLabel = metriclabel.ActionOf(true, p, current), metriclabel.ErrorNone
			lv := []string{namespace, name, strconv.Itoa(i), typ, metricName(&specs[i])}
			m.proposed.WithLabelValues(lv...).Set(float64(p))
			next.proposed = append(next.proposed, lv)
		}
		m.computations.WithLabelValues(action, errLabel, typ).Inc()
		if i < len(took) {
			m.computeDuration.WithLabelValues(action, errLabel, typ).Observe(took[i].Seconds())
		}
	}
	for _, s := range rec.Explanation.Steps {
		lv := []string{namespace, name, s.Kind, s.Reason}
		m.limited.WithLabelValues(lv...).Set(1)
		next.limited = append(next.limited, lv)
	}
	key := namespace + "/" + name
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.targets[key]
	if prev == nil {
		// Deleted meanwhile: gone has run, so nothing may stay behind.
		for _, lv := range next.proposed {
			m.proposed.DeleteLabelValues(lv...)
		}
		for _, lv := range next.limited {
			m.limited.DeleteLabelValues(lv...)
		}
		m.desired.DeleteLabelValues(namespace, name)
		return
	}
	deleteStale(m.proposed, prev.proposed, next.proposed)
	deleteStale(m.limited, prev.limited, next.limited)
	*prev = next
}

// deleteStale deletes from vec the series of prev that are not in next.
func deleteStale(vec *prometheus.GaugeVec, prev, next [][]string) {
	for _, lv := range prev {
		if !slices.ContainsFunc(next, func(n []string) bool { return slices.Equal(n, lv) }) {
			vec.DeleteLabelValues(lv...)
		}
	}
}

// metricName is a short name of a metric for a label: the resource
// ("cpu"), container/resource, or the metric's name.
func metricName(m *autoscalingv2.MetricSpec) string {
	switch m.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if m.Resource != nil {
			return string(m.Resource.Name)
		}
	case autoscalingv2.ContainerResourceMetricSourceType:
		if m.ContainerResource != nil {
			return m.ContainerResource.Container + "/" + string(m.ContainerResource.Name)
		}
	case autoscalingv2.PodsMetricSourceType:
		if m.Pods != nil {
			return m.Pods.Metric.Name
		}
	case autoscalingv2.ObjectMetricSourceType:
		if m.Object != nil {
			return m.Object.Metric.Name
		}
	case autoscalingv2.ExternalMetricSourceType:
		if m.External != nil {
			return m.External.Metric.Name
		}
	}
	return ""
}
