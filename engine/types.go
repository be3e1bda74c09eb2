package engine

import (
	"slices"
	"strings"
	"time"
)

// Input is everything one decision depends on, apart from the target's
// history. Every field is resolved: defaults (tolerance, windows, default
// behavior rules) are applied by the caller before Decide sees it.
type Input struct {
	// Now is the decision's instant; every cutoff is computed from it.
	Now time.Time
	// Namespace is the autoscaler's namespace, which the controller's
	// messages about Object and External metrics name.
	Namespace string
	// Spec is the autoscaler's spec.
	Spec Spec
	// Settings are the controller settings for this target.
	Settings Settings
	// Scale is the target's Scale subresource as read for this decision.
	Scale Scale
	// Pods are the pods selected by Scale.Selector.
	Pods []Pod
	// ResourceMetrics is the answer of the resource metrics API
	// (metrics.k8s.io) for the selector; shared by every Resource and
	// ContainerResource metric of the spec.
	ResourceMetrics ResourceMetrics
	// Observations holds, for each entry of Spec.Metrics at the same index,
	// what the custom or external metrics API answered. Entries for Resource
	// and ContainerResource metrics are read only for their Err.
	Observations []Observation
	// Status is the autoscaler's status as left by the previous decision
	// (zero for a new target): its conditions, desired replicas and last
	// scale time carry over.
	Status Status
	// Proposals are replica counts proposed from outside the metrics (a
	// fallback, schedule windows, forecasts), merged by max with the
	// metrics' proposal before normalization; empty leaves the decision
	// exactly the controller's.
	Proposals []Proposal
}

// Settings are the controller-wide knobs of the Kubernetes HPA controller,
// given per request.
type Settings struct {
	// Tolerance is the default tolerance of the usage ratio in both
	// directions, as a fraction: 0.1 is 10%.
	Tolerance float64
	// CPUInitializationPeriod is how long after a pod starts its CPU samples
	// are checked against its readiness transitions.
	CPUInitializationPeriod time.Duration
	// InitialReadinessDelay is how long after a pod starts an unready pod is
	// still considered to have never been ready.
	InitialReadinessDelay time.Duration
	// DownscaleStabilizationWindow is the scale-down stabilization window of
	// the legacy normalization (no behavior in the spec).
	DownscaleStabilizationWindow time.Duration
}

// Spec is an autoscaling/v2 HorizontalPodAutoscalerSpec without the scale
// target reference, which identifies the target outside the engine.
type Spec struct {
	// MinReplicas is the lower limit of the replica count; 0 enables
	// scale-to-zero when an Object or External metric is present.
	MinReplicas int32
	// MaxReplicas is the upper limit of the replica count.
	MaxReplicas int32
	// Metrics are the metrics whose proposals are combined (maximum).
	Metrics []MetricSpec
	// Behavior selects the behavior normalization; nil selects the legacy
	// one (scale-up limit max(2×current, 4), downscale window from Settings).
	Behavior *Behavior
}

// MetricSourceType names the kind of a metric source, with Kubernetes'
// spelling.
type MetricSourceType string

// The metric source types of autoscaling/v2.
const (
	ResourceSource          MetricSourceType = "Resource"
	ContainerResourceSource MetricSourceType = "ContainerResource"
	PodsSource              MetricSourceType = "Pods"
	ObjectSource            MetricSourceType = "Object"
	ExternalSource          MetricSourceType = "External"
)

// MetricSpec is one metric of the spec; exactly the field matching Type is
// used.
type MetricSpec struct {
	// Type is the metric source type.
	Type MetricSourceType
	// Resource names a resource of the pods (Resource and ContainerResource):
	// "cpu", "memory", ….
	Resource string
	// Container names the container (ContainerResource only).
	Container string
	// Metric identifies a custom or external metric (Pods, Object, External).
	Metric MetricIdentifier
	// DescribedObject is the object an Object metric describes.
	DescribedObject ObjectReference
	// Target is the value the metric is driven towards.
	Target Target
}

// MetricIdentifier names a custom or external metric and its label
// selector.
type MetricIdentifier struct {
	// Name is the metric's name.
	Name string
	// Selector narrows the metric's series; nil selects all.
	Selector *LabelSelector
}

// LabelSelector is a Kubernetes label selector, carried through to metric
// statuses unchanged; the engine never evaluates it.
type LabelSelector struct {
	// MatchLabels are equality requirements.
	MatchLabels map[string]string
	// MatchExpressions are set-based requirements.
	MatchExpressions []LabelSelectorRequirement
}

// LabelSelectorRequirement is one set-based requirement of a LabelSelector.
type LabelSelectorRequirement struct {
	// Key is the label key.
	Key string
	// Operator is In, NotIn, Exists or DoesNotExist.
	Operator string
	// Values are the operand values.
	Values []string
}

// ObjectReference identifies the object an Object metric describes.
type ObjectReference struct {
	// APIVersion is the object's group/version.
	APIVersion string
	// Kind is the object's kind.
	Kind string
	// Name is the object's name.
	Name string
}

// TargetType is how a metric's target is expressed.
type TargetType string

// The target types of autoscaling/v2.
const (
	UtilizationTarget  TargetType = "Utilization"
	ValueTarget        TargetType = "Value"
	AverageValueTarget TargetType = "AverageValue"
)

// Target is a metric's target value.
type Target struct {
	// Type selects which of the fields below applies.
	Type TargetType
	// Milli is the Value or AverageValue target in thousandths of the
	// metric's unit (a Kubernetes milli-value, rounded up).
	Milli int64
	// Utilization is the Utilization target in percent of the pods' requests.
	Utilization int32
}

// Behavior is the resolved scaling behavior: both directions present.
type Behavior struct {
	// ScaleUp governs increases of the replica count.
	ScaleUp Rules
	// ScaleDown governs decreases of the replica count.
	ScaleDown Rules
}

// SelectPolicy chooses among the limits of several policies.
type SelectPolicy string

// The select policies of autoscaling/v2.
const (
	SelectMax      SelectPolicy = "Max"
	SelectMin      SelectPolicy = "Min"
	SelectDisabled SelectPolicy = "Disabled"
)

// PolicyType is the unit of a scaling policy's value.
type PolicyType string

// The scaling policy types of autoscaling/v2.
const (
	PodsPolicy    PolicyType = "Pods"
	PercentPolicy PolicyType = "Percent"
)

// Rules are the resolved scaling rules of one direction.
type Rules struct {
	// StabilizationWindowSeconds is the stabilization window, in seconds.
	StabilizationWindowSeconds int32
	// SelectPolicy chooses among the policies' limits.
	SelectPolicy SelectPolicy
	// Policies limit the change per period.
	Policies []Policy
	// Tolerance is this direction's tolerance of the usage ratio, as a
	// fraction: 0.1 is 10%.
	Tolerance float64
}

// Policy limits the change of the replica count within a period.
type Policy struct {
	// Type is the unit of Value.
	Type PolicyType
	// Value is the allowed change: pods, or percent of the replicas at the
	// start of the period.
	Value int32
	// PeriodSeconds is the length of the period, in seconds.
	PeriodSeconds int32
}

// Scale is the target's Scale subresource.
type Scale struct {
	// Replicas is spec.replicas: the current replica count.
	Replicas int32
	// StatusReplicas is status.replicas: the replicas that exist.
	StatusReplicas int32
	// Selector is status.selector, the pods' label selector in string form.
	Selector string
	// SelectorError is why Selector could not be parsed by the Kubernetes
	// label parser at the boundary; empty when it parses.
	SelectorError string
}

// PodPhase is a pod's lifecycle phase, with Kubernetes' spelling.
type PodPhase string

// The pod phases the engine distinguishes.
const (
	PodPending   PodPhase = "Pending"
	PodRunning   PodPhase = "Running"
	PodSucceeded PodPhase = "Succeeded"
	PodFailed    PodPhase = "Failed"
	PodUnknown   PodPhase = "Unknown"
)

// ConditionStatus is a condition's status: "True", "False" or "Unknown".
type ConditionStatus string

// The condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Pod is what the engine reads of a pod selected by the target.
type Pod struct {
	// Name is the pod's name, unique among the pods of one input.
	Name string
	// Phase is status.phase.
	Phase PodPhase
	// Deleting is true when the pod has a deletion timestamp.
	Deleting bool
	// StartTime is status.startTime; zero when not reported.
	StartTime time.Time
	// Ready is the pod's Ready condition; nil when absent.
	Ready *PodReadiness
	// Containers are the pod's containers, then its init containers in
	// spec order (marked Sidecar or Init).
	Containers []Container
	// Requests are the pod-level resource requests (spec.resources.requests)
	// in milli-units; nil when the pod sets none.
	Requests ResourceList
	// Overhead is spec.overhead in milli-units; counted only with pod-level
	// requests, as Kubernetes' pod request aggregate counts it.
	Overhead ResourceList
}

// ResourceList is a Kubernetes resource list (requests, overhead, usage)
// in milli-units: each resource named at most once, in any order.
type ResourceList []ResourceQuantity

// ResourceQuantity is one entry of a ResourceList.
type ResourceQuantity struct {
	// Name is the resource's name: "cpu", "memory", ….
	Name string
	// Milli is the amount in thousandths of the resource's unit.
	Milli int64
}

// Get returns the amount of the resource named name, and whether the list
// names it.
func (l ResourceList) Get(name string) (milli int64, ok bool) {
	for i := range l {
		if l[i].Name == name {
			return l[i].Milli, true
		}
	}
	return 0, false
}

// ResourceListOf returns the resource list of m, sorted by name; nil when m
// is empty.
func ResourceListOf(m map[string]int64) ResourceList {
	if len(m) == 0 {
		return nil
	}
	l := make(ResourceList, 0, len(m))
	for name, milli := range m {
		l = append(l, ResourceQuantity{Name: name, Milli: milli})
	}
	slices.SortFunc(l, func(a, b ResourceQuantity) int { return strings.Compare(a.Name, b.Name) })
	return l
}

// PodReadiness is a pod's Ready condition.
type PodReadiness struct {
	// Status is the condition's status.
	Status ConditionStatus
	// LastTransitionTime is when the status last changed.
	LastTransitionTime time.Time
}

// Container is one container of a pod.
type Container struct {
	// Name is the container's name.
	Name string
	// Requests are the container's resource requests in milli-units
	// (cpu in millicores, memory in thousandths of a byte).
	Requests ResourceList
	// Sidecar marks a restartable init container (restartPolicy Always):
	// its requests count like a regular container's.
	Sidecar bool
	// Init marks an init container that runs to completion: the HPA's own
	// request sum leaves it out; only Kubernetes' pod request aggregate,
	// used with pod-level requests, takes it into account.
	Init bool
}

// ResourceMetrics is the answer of the resource metrics API.
type ResourceMetrics struct {
	// Err is the fetch error, empty when the API answered.
	Err string
	// Pods are the PodMetrics items returned, in the API's order.
	Pods []PodUsage
}

// PodUsage is one PodMetrics item of the resource metrics API.
type PodUsage struct {
	// Pod is the pod's name; it may name a pod absent from Input.Pods.
	Pod string
	// Timestamp is when the sample was taken.
	Timestamp time.Time
	// Window is the length of the sampling window.
	Window time.Duration
	// Containers are the per-container usages.
	Containers []ContainerUsage
}

// ContainerUsage is one container's usage in a PodMetrics item.
type ContainerUsage struct {
	// Name is the container's name.
	Name string
	// Usage is the container's usage of each resource, in milli-units.
	Usage ResourceList
}

// Observation is what a custom or external metrics API answered for one
// metric of the spec.
type Observation struct {
	// Err is the fetch error, empty when the API answered.
	Err string
	// Values are the returned values in the API's order: one per pod for a
	// Pods metric, exactly one for an Object metric, one per series for an
	// External metric.
	Values []MetricValue
}

// MetricValue is one value returned by a custom or external metrics API.
type MetricValue struct {
	// Pod names the described pod (Pods metrics only).
	Pod string
	// Milli is the value in thousandths of the metric's unit.
	Milli int64
	// Timestamp is when the value was observed.
	Timestamp time.Time
	// Window is the length of the sampling window (Pods metrics only).
	Window time.Duration
}

// Status is the autoscaler's status as the engine reads and writes it.
type Status struct {
	// CurrentReplicas is the replica count the last decision saw.
	CurrentReplicas int32
	// DesiredReplicas is the replica count last decided.
	DesiredReplicas int32
	// LastScaleTime is when the target was last rescaled; zero if never.
	LastScaleTime time.Time
	// CurrentMetrics are the metrics' current values, one per spec metric.
	CurrentMetrics []MetricStatus
	// Conditions are the autoscaler's conditions, in the order they were
	// first set.
	Conditions []Condition
}

// ConditionType names an autoscaler condition, with Kubernetes' spelling.
type ConditionType string

// The autoscaler condition types.
const (
	AbleToScale    ConditionType = "AbleToScale"
	ScalingActive  ConditionType = "ScalingActive"
	ScalingLimited ConditionType = "ScalingLimited"
	ScaledToZero   ConditionType = "ScaledToZero"
)

// Condition is one autoscaler condition.
type Condition struct {
	// Type is the condition's type.
	Type ConditionType
	// Status is the condition's status.
	Status ConditionStatus
	// Reason is a CamelCase reason, as the Kubernetes controller spells it.
	Reason string
	// Message is a human-readable explanation.
	Message string
	// LastTransitionTime is when Status last changed.
	LastTransitionTime time.Time
}

// QuantityFormat is how a Quantity is best printed.
type QuantityFormat string

// The quantity formats the engine produces.
const (
	DecimalSI QuantityFormat = "DecimalSI"
	BinarySI  QuantityFormat = "BinarySI"
)

// Quantity is a Kubernetes quantity as a milli-value and its format.
type Quantity struct {
	// Milli is the value in thousandths of the unit.
	Milli int64
	// Format is the preferred printed form.
	Format QuantityFormat
}

// MetricStatus is one entry of status.currentMetrics. A metric that could
// not be computed has an empty Type and nothing else.
type MetricStatus struct {
	// Type is the metric source type; empty for a failed metric.
	Type MetricSourceType
	// Resource is the resource name (Resource, ContainerResource).
	Resource string
	// Container is the container name (ContainerResource).
	Container string
	// Metric identifies the metric (Pods, Object, External).
	Metric MetricIdentifier
	// DescribedObject is the described object (Object).
	DescribedObject ObjectReference
	// Value is the current total value, when reported.
	Value *Quantity
	// AverageValue is the current average value, when reported.
	AverageValue *Quantity
	// AverageUtilization is the current utilization in percent, when
	// reported.
	AverageUtilization *int32
}

// History is what the engine remembers of a target between decisions: the
// same lists the Kubernetes controller keeps in memory, kept here by the
// caller so they survive restarts.
type History struct {
	// Recommendations are past unstabilized recommendations. Entries that
	// fall outside every window are overwritten in place, as upstream does.
	Recommendations []Recommendation
	// ScaleUpEvents are past increases applied to the target.
	ScaleUpEvents []ScaleEvent
	// ScaleDownEvents are past decreases applied to the target.
	ScaleDownEvents []ScaleEvent
}

// Recommendation is one unstabilized recommendation.
type Recommendation struct {
	// Replicas is the recommended replica count.
	Replicas int32
	// At is when it was made.
	At time.Time
}

// ScaleEvent is one applied change of the replica count.
type ScaleEvent struct {
	// Change is the absolute change in replicas.
	Change int32
	// At is when it was applied.
	At time.Time
	// Outdated marks an event older than the direction's longest policy
	// period when the last event was recorded; it may be overwritten.
	Outdated bool
}

// Decision is the outcome of one decision.
type Decision struct {
	// DesiredReplicas is the replica count decided: the count to write when
	// Rescale is true, otherwise the status' desired replicas.
	DesiredReplicas int32
	// Rescale is true when the target's scale should be written.
	Rescale bool
	// Error is the reconcile error, as the Kubernetes controller would
	// report it; empty when the decision succeeded. A decision may rescale
	// and still carry an error (some metrics failed, the rest scale up).
	Error string
	// Status is the autoscaler's status after the decision, assuming the
	// rescale (if any) succeeds; see RescaleFailed otherwise.
	Status Status
	// Explanation says how the decision was reached.
	Explanation Explanation
	// History is the target's history after the decision. Scale events are
	// added by RecordScale once a rescale is applied. Its scale event lists
	// are those of the history the decision started from, shared, not
	// copied: neither is to be modified in place.
	History History
}

// Explanation says how a decision was reached: what each metric proposed
// and why, which proposal won, and every step that moved the count.
type Explanation struct {
	// CurrentReplicas is the replica count the decision started from.
	CurrentReplicas int32
	// Metrics explains each spec metric, index-aligned with Spec.Metrics;
	// empty when metrics were not evaluated.
	Metrics []MetricExplanation
	// Winner is the index in Metrics of the proposal that was used; -1 when
	// none was.
	Winner int
	// Proposal is the replica count proposed by the metrics, before
	// normalization; equal to CurrentReplicas when metrics were not used,
	// 0 when every metric failed and a fallback was given (Input.Proposals
	// then set the count, as a Proposal step).
	Proposal int32
	// Steps are the adjustments, in order, from Proposal to the decision.
	Steps []Step
}

// MetricOutcome says how a metric's proposal was reached.
type MetricOutcome string

// The metric outcomes.
const (
	// OutcomeFailed: the metric could not be evaluated; see Err.
	OutcomeFailed MetricOutcome = "Failed"
	// OutcomeWithinTolerance: the usage ratio was within tolerance, so the
	// proposal is the current count.
	OutcomeWithinTolerance MetricOutcome = "WithinTolerance"
	// OutcomeScaled: the proposal is ceil(ratio × counted replicas).
	OutcomeScaled MetricOutcome = "Scaled"
	// OutcomeRebalanced: missing or unready pods were given fallback values
	// and the proposal follows the rebalanced ratio.
	OutcomeRebalanced MetricOutcome = "Rebalanced"
	// OutcomeRebalanceHeld: after rebalancing the ratio fell within
	// tolerance or changed direction, so the proposal is the current count.
	OutcomeRebalanceHeld MetricOutcome = "RebalanceHeld"
	// OutcomeFromZero: the target has no replicas; the proposal is
	// ceil(ratio) without tolerance.
	OutcomeFromZero MetricOutcome = "FromZero"
)

// MetricExplanation explains one metric's proposal.
type MetricExplanation struct {
	// Name describes the metric as the Kubernetes controller does, e.g.
	// "cpu resource utilization (percentage of request)".
	Name string
	// Outcome says how Proposal was reached.
	Outcome MetricOutcome
	// Proposal is the proposed replica count; meaningless when Outcome is
	// OutcomeFailed.
	Proposal int32
	// Err is why the metric failed.
	Err string
	// Current is the measured value the ratio was computed from: a
	// utilization in percent or a milli-value.
	Current int64
	// Target is the target the ratio was computed against: a utilization in
	// percent or a milli-value.
	Target int64
	// Ratio is the usage ratio, current over target (per replica where the
	// target is an average).
	Ratio float64
	// RebalancedRatio is the ratio after missing and unready pods were given
	// fallback values; equal to Ratio when no rebalancing happened.
	RebalancedRatio float64
	// ReadyPods, UnreadyPods, MissingPods and IgnoredPods count the pods in
	// each group (pod-based metrics only).
	ReadyPods, UnreadyPods, MissingPods, IgnoredPods int32
}

// StepKind names an adjustment of the replica count.
type StepKind string

// The step kinds.
const (
	// StepScalingDisabled: the target has 0 replicas and may not be scaled
	// from zero.
	StepScalingDisabled StepKind = "ScalingDisabled"
	// StepAboveMax: the current count exceeds the maximum; metrics unused.
	StepAboveMax StepKind = "CurrentAboveMax"
	// StepBelowMin: the current count is below the minimum; metrics unused.
	StepBelowMin StepKind = "CurrentBelowMin"
	// StepStabilized: the stabilization window(s) moved the count.
	StepStabilized StepKind = "Stabilized"
	// StepLimited: a rate limit or min/max clamp moved the count.
	StepLimited StepKind = "Limited"
	// StepMinFromZero: scaling from zero was raised to the minimum.
	StepMinFromZero StepKind = "MinFromZero"
	// StepProposal: a proposal from outside the metrics (Input.Proposals)
	// set the count in place of the metrics' proposal; the step's message
	// names it.
	StepProposal StepKind = "Proposal"
)

// Step is one adjustment of the replica count.
type Step struct {
	// Kind names the adjustment.
	Kind StepKind
	// From is the count before the step.
	From int32
	// To is the count after the step.
	To int32
	// Reason is the condition reason the Kubernetes controller gives for
	// it, e.g. "ScaleDownStabilized" or "ScaleUpLimit".
	Reason string
	// Message says why, in words.
	Message string
}
