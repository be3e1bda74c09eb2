package v1alpha1

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the Autoscaler custom resource.
const Group = "setpoint.dev"

// Version is the served and stored version of the Autoscaler custom resource.
const Version = "v1alpha1"

// Kind is the kind of the Autoscaler custom resource.
const Kind = "Autoscaler"

// AutoscalerResource is the group, version and resource (plural) of the
// Autoscaler custom resource, as the dynamic client addresses it.
var AutoscalerResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "autoscalers"}

// Condition types the agent sets on an Autoscaler besides the HPA's own
// (AbleToScale, ScalingActive, ScalingLimited, ScaledToZero), which come
// from the service's decision.
const (
	// ConditionServiceAvailable says whether the last call to the Setpoint
	// service got an answer. False with reason ReasonServiceUnavailable when
	// the service was unreachable or too slow (gRPC Unavailable or
	// DeadlineExceeded): the agent then leaves the target's Scale alone and
	// retries with back-off. False with ReasonInvalidSpec when the service
	// rejected the request as invalid (gRPC InvalidArgument): the agent
	// retries only at the next sync period or when the spec changes.
	ConditionServiceAvailable autoscalingv2.HorizontalPodAutoscalerConditionType = "ServiceAvailable"
	// ConditionPaused is True while spec.paused is set: the agent neither
	// asks for decisions nor writes the target's Scale.
	ConditionPaused autoscalingv2.HorizontalPodAutoscalerConditionType = "Paused"
	// ConditionFallbackActive comes from the service's decision: True
	// while spec.fallback's count is used because the metrics fail, False
	// once they are healthy again; absent on an autoscaler that never used
	// a fallback. The agent records an Event when it turns True
	// (ReasonFallbackActive) and when it stops (ReasonFallbackEnded).
	ConditionFallbackActive autoscalingv2.HorizontalPodAutoscalerConditionType = "FallbackActive"
	// ConditionFleetShare is set on a fleet member: True when the fleet's
	// last split gave this member a share (the reason is the share's:
	// Weighted, AtMin, AtMax, Standby, Held or Returning; the message
	// the split's sentence for it), False when it has none yet
	// (ReasonNoSplit) or was left out (ReasonExcluded, with the fleet's
	// reason in the message).
	ConditionFleetShare autoscalingv2.HorizontalPodAutoscalerConditionType = "FleetShare"
)

// Condition reasons the agent sets on ConditionServiceAvailable and
// ConditionPaused, and the reasons of its fallback Events.
const (
	// ReasonServiceAvailable: the service answered the last call.
	ReasonServiceAvailable = "ServiceAvailable"
	// ReasonServiceUnavailable: the service was unreachable or did not
	// answer before the Recommend deadline.
	ReasonServiceUnavailable = "ServiceUnavailable"
	// ReasonInvalidSpec: the service rejected the request as invalid; the
	// message holds its field violations.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonServiceError: the service answered with another error.
	ReasonServiceError = "ServiceError"
	// ReasonPaused: spec.paused is set.
	ReasonPaused = "Paused"
	// ReasonNotPaused: spec.paused is not set.
	ReasonNotPaused = "NotPaused"
	// ReasonFallbackActive is the Warning Event's reason when a fallback
	// starts to apply.
	ReasonFallbackActive = "FallbackActive"
	// ReasonFallbackEnded is the Normal Event's reason when it stops.
	ReasonFallbackEnded = "FallbackEnded"
	// ReasonNoSplit: the fleet has not split its total yet; the member's
	// replicas are left as they are.
	ReasonNoSplit = "NoSplit"
	// ReasonExcluded: the fleet's last split left this member out
	// (stale, no report, or it could not scale); its replicas are left as
	// they are until it is pooled again.
	ReasonExcluded = "Excluded"
	// ReasonShareChanged is the Normal Event's reason when a fleet
	// member's share changes.
	ReasonShareChanged = "FleetShareChanged"
	// ReasonCannotScale is the Warning Event's reason when a fleet member
	// reports that it cannot scale (its workload is missing or its Scale
	// update was refused).
	ReasonCannotScale = "FleetCannotScale"
)

// Autoscaler is the Setpoint autoscaler custom resource: an autoscaling/v2
// HorizontalPodAutoscaler whose decisions are made by the Setpoint service.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=autoscalers,singular=autoscaler,shortName=spa,scope=Namespaced,categories=setpoint
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Reference",type=string,JSONPath=`.status.reference`,description="The scale target, as Kind/name"
// +kubebuilder:printcolumn:name="Targets",type=string,JSONPath=`.status.targets`,description="Each metric's current value over its target"
// +kubebuilder:printcolumn:name="MinPods",type=integer,JSONPath=`.spec.minReplicas`
// +kubebuilder:printcolumn:name="MaxPods",type=integer,JSONPath=`.spec.maxReplicas`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.currentReplicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Fleet",type=string,JSONPath=`.spec.fleet.name`,priority=1,description="The fleet this autoscaler is a member of"
// +kubebuilder:printcolumn:name="FleetReplicas",type=integer,JSONPath=`.status.fleetReplicas`,priority=1,description="The fleet's total in its last split"
type Autoscaler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired autoscaling behaviour.
	Spec AutoscalerSpec `json:"spec"`
	// Status is the autoscaler's current state, written by the agent.
	// +optional
	Status AutoscalerStatus `json:"status,omitempty"`
}

// AutoscalerSpec is the autoscaling/v2 HorizontalPodAutoscalerSpec plus
// Setpoint's paused and dryRun switches, or a member of a fleet.
//
// A fleet member (fleet set) needs only scaleTargetRef and fleet: the
// fleet's spec, kept by the Setpoint service, has the limits, metrics and
// behavior. Of the rest only paused is used; minReplicas, maxReplicas,
// metrics, behavior, dryRun, fallback, schedules and forecast are ignored.
//
// +kubebuilder:validation:XValidation:rule="has(self.fleet) || has(self.maxReplicas)",message="maxReplicas is required unless fleet is set"
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must be less than or equal to maxReplicas"
type AutoscalerSpec struct {
	// ScaleTargetRef points to the resource to scale: any kind with a scale
	// subresource (Deployment, StatefulSet, ReplicaSet, custom resources).
	ScaleTargetRef autoscalingv2.CrossVersionObjectReference `json:"scaleTargetRef"`
	// MinReplicas is the lower limit of the replica count (default 1). It
	// may be 0 only when at least one Object or External metric is set.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas is the upper limit of the replica count; required
	// unless fleet is set.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
	// Metrics are the metrics whose proposals are combined (the largest
	// wins). Empty means 80% average CPU utilization.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(m, m.type in ['Resource', 'ContainerResource', 'Pods', 'Object', 'External'])",message="type must be one of Resource, ContainerResource, Pods, Object, External"
	// +kubebuilder:validation:XValidation:rule="self.all(m, m.type != 'Resource' || has(m.resource))",message="a Resource metric needs the resource field"
	// +kubebuilder:validation:XValidation:rule="self.all(m, m.type != 'ContainerResource' || has(m.containerResource))",message="a ContainerResource metric needs the containerResource field"
	// +kubebuilder:validation:XValidation:rule="self.all(m, m.type != 'Pods' || has(m.pods))",message="a Pods metric needs the pods field"
	// +kubebuilder:validation:XValidation:rule="self.all(m, m.type != 'Object' || has(m.object))",message="an Object metric needs the object field"
	// +kubebuilder:validation:XValidation:rule="self.all(m, m.type != 'External' || has(m.external))",message="an External metric needs the external field"
	// +listType=atomic
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
	// Behavior configures scaling up and down separately (stabilization
	// windows, policies, tolerance). Unset means the HPA defaults.
	// +optional
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	// Paused stops decisions and writes: the agent neither asks the service
	// nor touches the target while it is set.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// DryRun makes the agent ask for decisions and report them in the
	// status without ever writing the target's Scale.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// Fallback is what the target does while its metrics fail (after
	// KEDA's spec.fallback); unset, the count is held as the HPA does. The
	// FallbackActive condition says when it applies.
	// +optional
	Fallback *Fallback `json:"fallback,omitempty"`
	// Schedules are windows of scheduled capacity: while one is open, its
	// minReplicas is a floor the metrics can still scale above.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Schedules []ScheduleWindow `json:"schedules,omitempty"`
	// Forecast turns forecasting on: the service keeps a compact history
	// of each metric's demand and, once it finds a daily or weekly period
	// it can predict, proposes the replicas needed one lead time ahead (it
	// never scales in on its own). Unset, nothing is forecast.
	// +optional
	Forecast *Forecast `json:"forecast,omitempty"`
	// Fleet makes the autoscaler a member of a fleet: one autoscaler,
	// kept by the Setpoint service, over a workload that runs in several
	// clusters (docs/fleets.md). The agent reports this cluster's scale,
	// pods and metrics to the fleet and applies this cluster's share of
	// the fleet's total to the scale target.
	// +optional
	Fleet *FleetRef `json:"fleet,omitempty"`
}

// FleetRef names the fleet an Autoscaler is a member of. The fleet lives
// in the Autoscaler's namespace; the member is the agent's cluster.
type FleetRef struct {
	// Name is the fleet's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Forecast is a target's forecasting settings. The service checks them
// (field spec.forecast of its API).
type Forecast struct {
	// LeadTime is how far ahead to forecast when the agent could not
	// measure the pods' start-up (fewer than 3 Ready pods that never
	// restarted): a duration above 0 and below 24h. When measured, the
	// lead time is the measured start-up plus 15s.
	// +optional
	LeadTime *metav1.Duration `json:"leadTime,omitempty"`
	// MaxErrorPercent is the backtest error (in percent of the mean
	// demand) above which the forecast stays silent; unset means 15.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxErrorPercent int32 `json:"maxErrorPercent,omitempty"`
}

// Fallback is what a target does once its metrics have been failing for
// failureDuration: each decision whose metrics fail again proposes the
// count behavior selects, merged by max with what the metrics that did not
// fail propose. The service checks it (field spec.fallback of its API).
type Fallback struct {
	// FailureDuration is how long the metrics must have been failing
	// before the fallback applies; unset or 0, from the second failing
	// decision. KEDA's failureThreshold n at a sync period p is n·p.
	// +optional
	FailureDuration *metav1.Duration `json:"failureDuration,omitempty"`
	// Behavior selects the proposed count: static (replicas),
	// currentReplicas, currentReplicasIfHigher or currentReplicasIfLower;
	// unset means static.
	// +kubebuilder:validation:Enum=static;currentReplicas;currentReplicasIfHigher;currentReplicasIfLower
	// +optional
	Behavior string `json:"behavior,omitempty"`
	// Replicas is the fallback count (0 to maxReplicas).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
}

// ScheduleWindow is one window of scheduled capacity, read on the wall
// clock of its time zone. The service checks the zone and the cron
// expressions (field spec.schedules of its API).
//
// +kubebuilder:validation:XValidation:rule="has(self.end) != has(self.duration)",message="exactly one of end and duration must be set"
type ScheduleWindow struct {
	// Name identifies the window in explanations.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// TimeZone is the IANA zone of the cron expressions, e.g.
	// Europe/Berlin; unset means UTC.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// Start is when the window opens: a five-field cron expression or a
	// descriptor such as @daily.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Start string `json:"start"`
	// End is when it closes, a cron expression; exclusive with Duration.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	End string `json:"end,omitempty"`
	// Duration is how long it stays open after each start (at most 8
	// days); exclusive with End.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// MinReplicas is the floor proposed while the window is open (0 to
	// maxReplicas).
	// +kubebuilder:validation:Minimum=0
	MinReplicas int32 `json:"minReplicas"`
}

// AutoscalerStatus mirrors the autoscaling/v2 HorizontalPodAutoscalerStatus
// and adds the last decision's explanation and two printable summaries.
type AutoscalerStatus struct {
	// ObservedGeneration is the most recent generation the agent acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastScaleTime is when the target was last rescaled by the agent.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// CurrentReplicas is the target's replica count as last seen.
	CurrentReplicas int32 `json:"currentReplicas"`
	// DesiredReplicas is the replica count last decided.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// CurrentMetrics are the metrics' values as last read.
	// +listType=atomic
	// +optional
	CurrentMetrics []autoscalingv2.MetricStatus `json:"currentMetrics,omitempty"`
	// Conditions are the HPA's conditions (AbleToScale, ScalingActive,
	// ScalingLimited, ScaledToZero) and the agent's (ServiceAvailable,
	// Paused).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []autoscalingv2.HorizontalPodAutoscalerCondition `json:"conditions,omitempty"`
	// Reference is the scale target as Kind/name, for printing.
	// +optional
	Reference string `json:"reference,omitempty"`
	// Targets is each metric's current value over its target, as
	// `kubectl get hpa` prints them, for printing.
	// +optional
	Targets string `json:"targets,omitempty"`
	// Explanation says how the last decision was reached.
	// +optional
	Explanation *Explanation `json:"explanation,omitempty"`
	// FleetReplicas is, for a fleet member, the fleet's total in its
	// last split; DesiredReplicas is then this member's share of it.
	// +optional
	FleetReplicas *int32 `json:"fleetReplicas,omitempty"`
}

// Explanation is the last decision's explanation in short.
type Explanation struct {
	// Summary is the explanation in one line.
	Summary string `json:"summary"`
	// Winner names the metric whose proposal was used; empty when none was.
	// +optional
	Winner string `json:"winner,omitempty"`
	// Proposal is the replica count proposed by the metrics before limits
	// and stabilization.
	// +optional
	Proposal int32 `json:"proposal,omitempty"`
	// Steps are the adjustments from Proposal to the decision, in order.
	// +listType=atomic
	// +optional
	Steps []ExplanationStep `json:"steps,omitempty"`
}

// ExplanationStep is one adjustment of the replica count.
type ExplanationStep struct {
	// Kind names the adjustment, e.g. Stabilized or Limited.
	Kind string `json:"kind"`
	// From is the count before the step.
	From int32 `json:"from"`
	// To is the count after the step.
	To int32 `json:"to"`
	// Reason is the HPA condition reason for it, e.g. ScaleDownStabilized.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says why, in words.
	// +optional
	Message string `json:"message,omitempty"`
}

// FromUnstructured converts an object read with the dynamic client into an
// Autoscaler.
func FromUnstructured(u *unstructured.Unstructured) (*Autoscaler, error) {
	var a Autoscaler
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &a); err != nil {
		return nil, fmt.Errorf("agent: decode %s %s/%s: %w", Kind, u.GetNamespace(), u.GetName(), err)
	}
	return &a, nil
}

// ToUnstructured converts an Autoscaler into the dynamic client's form,
// with apiVersion and kind set.
func ToUnstructured(a *Autoscaler) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	if err != nil {
		return nil, fmt.Errorf("agent: encode %s %s/%s: %w", Kind, a.Namespace, a.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(Group + "/" + Version)
	u.SetKind(Kind)
	return u, nil
}
