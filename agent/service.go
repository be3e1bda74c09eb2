package agent

import (
	"context"
	"time"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/hpa"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Service is the Setpoint service as the agent uses it. Implementations
// return gRPC status errors (status.Code gives Unavailable,
// DeadlineExceeded, InvalidArgument, …) so the controller can tell a
// retryable failure from a terminal one. NewGRPCService adapts the
// generated gRPC client; tests use hand-written fakes.
type Service interface {
	// Recommend asks for a decision about one target given everything the
	// agent read. It has no side effect on the target; the service records
	// the decision in the target's history.
	Recommend(ctx context.Context, req *Request) (*Recommendation, error)
	// Observe tells the service what became of the target's replica count:
	// a rescale applied or failed, or a change made by someone else.
	Observe(ctx context.Context, obs *Observation) error
	// DeleteTarget forgets the target's history. Deleting an unknown target
	// succeeds.
	DeleteTarget(ctx context.Context, t Target) error
}

// Target identifies an Autoscaler to the service.
type Target struct {
	// Cluster is the agent's cluster name.
	Cluster string
	// Namespace is the Autoscaler's namespace.
	Namespace string
	// Name is the Autoscaler's name.
	Name string
}

// Settings are the controller-wide HPA settings the agent sends in each
// request; a nil field lets the service apply its default.
type Settings = hpa.Settings

// Scale is what the agent read of the target's Scale subresource.
type Scale = hpa.Scale

// Request is everything one decision depends on, as raw values: the
// service converts and decides.
type Request struct {
	// Target identifies the Autoscaler.
	Target Target
	// Generation is the Autoscaler's metadata.generation.
	Generation int64
	// Spec is the Autoscaler's spec.
	Spec v1alpha1.AutoscalerSpec
	// Settings are the controller settings.
	Settings Settings
	// Scale is the target's Scale subresource.
	Scale Scale
	// Pods are the pods matching Scale.Selector.
	Pods []*corev1.Pod
	// ResourceMetrics is the resource metrics API's answer for the
	// selector; fetched once and shared by every Resource and
	// ContainerResource metric.
	ResourceMetrics ResourceMetrics
	// Metrics holds, index-aligned with Spec.Metrics, what the custom or
	// external metrics API answered for that metric. Entries of Resource
	// and ContainerResource metrics are empty.
	Metrics []MetricValues
	// Now is when the agent read the inputs.
	Now time.Time
	// PodStartup is the workload's start-up and readiness time measured
	// from Pods, the lead time a forecast needs: sent as the request's
	// pod_startup when measured (Pods > 0).
	PodStartup PodStartup
}

// ResourceMetrics is the answer of the resource metrics API
// (metrics.k8s.io PodMetrics) for the target's selector.
type ResourceMetrics = hpa.ResourceMetrics

// MetricValues is what the custom or external metrics API answered for
// one metric of the spec.
type MetricValues = hpa.MetricValues

// Recommendation is the service's decision for one target.
type Recommendation struct {
	// DecisionID identifies the decision; observations refer to it.
	DecisionID string
	// DesiredReplicas is the decided replica count.
	DesiredReplicas int32
	// Rescale is true when the target's Scale should be set to
	// DesiredReplicas.
	Rescale bool
	// Error is the decision's error as the Kubernetes HPA would report it
	// (some or all metrics could not be computed); empty when none. A
	// decision may rescale and carry an error.
	Error string
	// Reason is the rescale reason for the SuccessfulRescale Event, e.g.
	// "cpu resource utilization (percentage of request) above target".
	Reason string
	// Conditions are the HPA conditions after the decision.
	Conditions []autoscalingv2.HorizontalPodAutoscalerCondition
	// CurrentMetrics are the metrics' current values.
	CurrentMetrics []autoscalingv2.MetricStatus
	// LastScaleTime is when the target was last rescaled, assuming this
	// decision's rescale (if any) succeeds; nil when never.
	LastScaleTime *metav1.Time
	// Explanation says how the decision was reached.
	Explanation v1alpha1.Explanation
	// Metrics are what each spec metric proposed, index-aligned with the
	// spec's metrics (empty when the metrics were not used).
	Metrics []MetricProposal
}

// MetricProposal is what one metric proposed for a decision.
type MetricProposal struct {
	// Proposal is the replica count the metric proposed.
	Proposal int32
	// Failed is true when the metric could not be computed.
	Failed bool
	// Err is why it failed, as the HPA controller's FailedGet*Metric Event
	// says it.
	Err string
}

// ObservationKind says what became of a target's replica count.
type ObservationKind string

// The observation kinds.
const (
	// ObservedApplied: the agent set the replica count From → To.
	ObservedApplied ObservationKind = "Applied"
	// ObservedFailed: the agent's update From → To failed with Err.
	ObservedFailed ObservationKind = "Failed"
	// ObservedExternal: someone else changed the replica count From → To.
	ObservedExternal ObservationKind = "External"
)

// Observation reports a change, or a failed change, of a target's replica
// count.
type Observation struct {
	// Target identifies the Autoscaler.
	Target Target
	// DecisionID is the decision the observation refers to (Applied and
	// Failed).
	DecisionID string
	// Kind says what happened.
	Kind ObservationKind
	// From and To are the replica counts before and after (intended, for
	// ObservedFailed).
	From, To int32
	// Err is the update error (ObservedFailed only).
	Err string
	// At is when it happened (or was noticed).
	At time.Time
}
