package agent

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
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

// The label values of action and error, as the Kubernetes HPA controller
// spells them (pkg/controller/podautoscaler/monitor).
const (
	actionScaleUp   = "scale_up"
	actionScaleDown = "scale_down"
	actionNone      = "none"
	errorNone       = "none"
	errorSpec       = "spec"
	errorInternal   = "internal"
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
	mu                sync.Mutex
	known             map[string]struct{} // namespace/name of the Autoscalers reconciled
}

// NewMetrics creates the agent's metrics and registers them with reg:
//
//   - setpoint_agent_reconciles_total{result}: reconciles by result
//     (success, error, service_unavailable, invalid, paused, deleted);
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
//     last decision of an Autoscaler away from its metrics' proposal.
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
		known: map[string]struct{}{},
	}
	reg.MustRegister(m.reconciles, m.recommend, m.rescales, m.reconciliations, m.reconcileDuration,
		m.computations, m.computeDuration, m.autoscalers, m.desired, m.proposed, m.limited)
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

// present counts the Autoscaler namespace/name as reconciled.
func (m *Metrics) present(namespace, name string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known[namespace+"/"+name] = struct{}{}
	m.autoscalers.Set(float64(len(m.known)))
}

// gone removes a deleted Autoscaler and its series.
func (m *Metrics) gone(namespace, name string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	delete(m.known, namespace+"/"+name)
	m.autoscalers.Set(float64(len(m.known)))
	m.mu.Unlock()
	target := prometheus.Labels{"namespace": namespace, "hpa_name": name}
	m.desired.DeletePartialMatch(target)
	m.proposed.DeletePartialMatch(target)
	m.limited.DeletePartialMatch(target)
}

// decided records the decision rec made for the Autoscaler namespace/name
// with spec metrics specs at current replicas; took are the metrics' fetch
// times, index-aligned with specs.
func (m *Metrics) decided(namespace, name string, specs []autoscalingv2.MetricSpec, current int32, rec *Recommendation, took []time.Duration) {
	if m == nil {
		return
	}
	target := prometheus.Labels{"namespace": namespace, "hpa_name": name}
	m.desired.With(target).Set(float64(rec.DesiredReplicas))
	m.proposed.DeletePartialMatch(target)
	m.limited.DeletePartialMatch(target)
	for i := range specs {
		typ := string(specs[i].Type)
		action, errLabel := actionNone, errorInternal
		if i < len(rec.Metrics) && !rec.Metrics[i].Failed {
			p := rec.Metrics[i].Proposal
			action, errLabel = actionOf(true, p, current), errorNone
			m.proposed.WithLabelValues(namespace, name, strconv.Itoa(i), typ, metricName(&specs[i])).Set(float64(p))
		}
		m.computations.WithLabelValues(action, errLabel, typ).Inc()
		if i < len(took) {
			m.computeDuration.WithLabelValues(action, errLabel, typ).Observe(took[i].Seconds())
		}
	}
	for _, s := range rec.Explanation.Steps {
		m.limited.WithLabelValues(namespace, name, s.Kind, s.Reason).Set(1)
	}
}

// actionOf is the action label of a change from current to desired.
func actionOf(rescale bool, desired, current int32) string {
	switch {
	case !rescale || desired == current:
		return actionNone
	case desired > current:
		return actionScaleUp
	default:
		return actionScaleDown
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
