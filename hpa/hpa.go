package hpa

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// Settings are the controller-wide HPA settings (kube-controller-manager's
// --horizontal-pod-autoscaler-* flags). A nil field is left for the service
// to default.
type Settings struct {
	// Tolerance is the default tolerance of the usage ratio, as a fraction:
	// 0.1 is 10%.
	Tolerance *float64
	// CPUInitializationPeriod is how long after a pod starts its CPU
	// samples are checked against its readiness.
	CPUInitializationPeriod *time.Duration
	// InitialReadinessDelay is how long after a pod starts an unready pod
	// is still considered never ready.
	InitialReadinessDelay *time.Duration
	// DownscaleStabilizationWindow is the scale-down stabilization window
	// used when the spec sets none.
	DownscaleStabilizationWindow *time.Duration
}

// Scale is what was read of the target's Scale subresource.
type Scale struct {
	// Replicas is spec.replicas.
	Replicas int32
	// StatusReplicas is status.replicas.
	StatusReplicas int32
	// Selector is status.selector, the pods' label selector as a string.
	Selector string
}

// ResourceMetrics is the answer of the resource metrics API
// (metrics.k8s.io PodMetrics) for the target's selector.
type ResourceMetrics struct {
	// Fetched is true when the API was asked (some metric needs it).
	Fetched bool
	// Items are the PodMetrics returned.
	Items []metricsv1beta1.PodMetrics
	// Err is the fetch error; nil when the API answered.
	Err error
}

// MetricValues is what the custom or external metrics API answered for
// one metric of the spec.
type MetricValues struct {
	// Custom are the values of a Pods or Object metric
	// (custom.metrics.k8s.io).
	Custom []custommetricsv1beta2.MetricValue
	// External are the values of an External metric
	// (external.metrics.k8s.io).
	External []externalmetricsv1beta1.ExternalMetricValue
	// Err is the fetch error; nil when the API answered.
	Err error
}

// Reading is everything one HPA reconcile reads about a target.
type Reading struct {
	// Target identifies the autoscaler to the service.
	Target *setpointv1.TargetKey
	// Spec is the autoscaler's spec, as written or as stored (Request
	// applies the API server's defaults either way).
	Spec autoscalingv2.HorizontalPodAutoscalerSpec
	// Settings are the controller settings.
	Settings Settings
	// Scale is the target's Scale subresource.
	Scale Scale
	// Pods are the pods matching Scale.Selector.
	Pods []*corev1.Pod
	// ResourceMetrics is the resource metrics API's answer for the
	// selector, shared by every Resource and ContainerResource metric.
	ResourceMetrics ResourceMetrics
	// Metrics holds, index-aligned with the defaulted spec's metrics, what
	// the custom or external metrics API answered for that metric. Entries
	// of Resource and ContainerResource metrics, and missing entries, are
	// empty.
	Metrics []MetricValues
}

// Request converts a reading into the API's request: the spec with the API
// server's defaults applied, everything else as raw values (quantities as
// strings, times as timestamps). A resource metrics fetch error is also
// each Resource and ContainerResource metric's observation error.
func Request(r *Reading) *setpointv1.RecommendRequest {
	spec := Default(r.Spec)
	out := &setpointv1.RecommendRequest{
		Target:   r.Target,
		Spec:     specOf(&spec),
		Settings: ControllerSettings(r.Settings),
		Scale:    &setpointv1.Scale{Replicas: r.Scale.Replicas, StatusReplicas: r.Scale.StatusReplicas, Selector: r.Scale.Selector},
	}
	for _, p := range r.Pods {
		out.Pods = append(out.Pods, Pod(p))
	}
	if rm := r.ResourceMetrics; rm.Fetched {
		out.ResourceMetrics = &setpointv1.ResourceMetrics{}
		if rm.Err != nil {
			out.ResourceMetrics.Error = rm.Err.Error()
		}
		for _, pm := range rm.Items {
			item := &setpointv1.PodMetrics{Pod: pm.Name, Timestamp: timestamp(pm.Timestamp), Window: durationpb.New(pm.Window.Duration)}
			for _, c := range pm.Containers {
				item.Containers = append(item.Containers, &setpointv1.ContainerMetrics{Name: c.Name, Usage: quantities(c.Usage)})
			}
			out.ResourceMetrics.Items = append(out.ResourceMetrics.Items, item)
		}
	}
	for i := range spec.Metrics {
		var mv MetricValues
		if i < len(r.Metrics) {
			mv = r.Metrics[i]
		}
		obs := observation(mv)
		if t := spec.Metrics[i].Type; r.ResourceMetrics.Err != nil &&
			(t == autoscalingv2.ResourceMetricSourceType || t == autoscalingv2.ContainerResourceMetricSourceType) {
			obs.Error = r.ResourceMetrics.Err.Error()
		}
		out.Observations = append(out.Observations, obs)
	}
	return out
}

// observation converts one metric's answer.
func observation(mv MetricValues) *setpointv1.MetricObservation {
	obs := &setpointv1.MetricObservation{}
	if mv.Err != nil {
		obs.Error = mv.Err.Error()
	}
	for _, v := range mv.Custom {
		val := &setpointv1.MetricValue{Value: v.Value.String(), Timestamp: timestamp(v.Timestamp)}
		if v.DescribedObject.Kind == "Pod" {
			val.Pod = v.DescribedObject.Name
		}
		if v.WindowSeconds != nil {
			val.Window = durationpb.New(time.Duration(*v.WindowSeconds) * time.Second)
		}
		obs.Values = append(obs.Values, val)
	}
	for _, v := range mv.External {
		obs.Values = append(obs.Values, &setpointv1.MetricValue{Value: v.Value.String(), Timestamp: timestamp(v.Timestamp)})
	}
	return obs
}

// ControllerSettings converts controller settings; nil fields stay absent.
func ControllerSettings(s Settings) *setpointv1.ControllerSettings {
	out := &setpointv1.ControllerSettings{Tolerance: s.Tolerance}
	if s.CPUInitializationPeriod != nil {
		out.CpuInitializationPeriod = durationpb.New(*s.CPUInitializationPeriod)
	}
	if s.InitialReadinessDelay != nil {
		out.InitialReadinessDelay = durationpb.New(*s.InitialReadinessDelay)
	}
	if s.DownscaleStabilizationWindow != nil {
		out.DownscaleStabilizationWindow = durationpb.New(*s.DownscaleStabilizationWindow)
	}
	return out
}

// Pod keeps what the HPA reads of a pod: phase, deletion, start time,
// readiness, the requests of its containers and init containers (sidecars,
// restartPolicy Always, marked restartable), its pod-level requests and
// its overhead.
func Pod(p *corev1.Pod) *setpointv1.Pod {
	out := &setpointv1.Pod{
		Name:     p.Name,
		Phase:    string(p.Status.Phase),
		Deleting: p.DeletionTimestamp != nil,
	}
	if p.Status.StartTime != nil {
		out.StartTime = timestamppb.New(p.Status.StartTime.Time)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = &setpointv1.PodReadyCondition{Status: string(c.Status), LastTransitionTime: timestamp(c.LastTransitionTime)}
			break
		}
	}
	// Containers first, then init containers in spec order: sidecars
	// count like containers; the others matter only for the pod request
	// aggregate used with pod-level requests.
	for _, c := range p.Spec.Containers {
		out.Containers = append(out.Containers, &setpointv1.Container{Name: c.Name, Requests: quantities(c.Resources.Requests)})
	}
	for _, c := range p.Spec.InitContainers {
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		out.Containers = append(out.Containers, &setpointv1.Container{Name: c.Name, Requests: quantities(c.Resources.Requests), RestartableInit: sidecar, Init: !sidecar})
	}
	out.Overhead = quantities(p.Spec.Overhead)
	if p.Spec.Resources != nil {
		out.Requests = quantities(p.Spec.Resources.Requests)
	}
	return out
}

// Spec converts a spec, with the API server's defaults applied, into the
// API's form.
func Spec(s autoscalingv2.HorizontalPodAutoscalerSpec) *setpointv1.HorizontalPodAutoscalerSpec {
	d := Default(s)
	return specOf(&d)
}

// specOf converts a defaulted spec.
func specOf(s *autoscalingv2.HorizontalPodAutoscalerSpec) *setpointv1.HorizontalPodAutoscalerSpec {
	out := &setpointv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: objectRef(s.ScaleTargetRef),
		MinReplicas:    s.MinReplicas,
		MaxReplicas:    s.MaxReplicas,
	}
	for i := range s.Metrics {
		out.Metrics = append(out.Metrics, metricSpec(&s.Metrics[i]))
	}
	if b := s.Behavior; b != nil {
		out.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{ScaleUp: rules(b.ScaleUp), ScaleDown: rules(b.ScaleDown)}
	}
	return out
}

func objectRef(r autoscalingv2.CrossVersionObjectReference) *setpointv1.CrossVersionObjectReference {
	return &setpointv1.CrossVersionObjectReference{ApiVersion: r.APIVersion, Kind: r.Kind, Name: r.Name}
}

func rules(r *autoscalingv2.HPAScalingRules) *setpointv1.ScalingRules {
	if r == nil {
		return nil
	}
	out := &setpointv1.ScalingRules{StabilizationWindowSeconds: r.StabilizationWindowSeconds, Tolerance: quantity(r.Tolerance)}
	if r.SelectPolicy != nil {
		out.SelectPolicy = string(*r.SelectPolicy)
	}
	for _, p := range r.Policies {
		out.Policies = append(out.Policies, &setpointv1.ScalingPolicy{Type: string(p.Type), Value: p.Value, PeriodSeconds: p.PeriodSeconds})
	}
	return out
}

func metricSpec(m *autoscalingv2.MetricSpec) *setpointv1.MetricSpec {
	out := &setpointv1.MetricSpec{Type: string(m.Type)}
	if r := m.Resource; r != nil {
		out.Resource = &setpointv1.ResourceMetricSource{Name: string(r.Name), Target: target(r.Target)}
	}
	if r := m.ContainerResource; r != nil {
		out.ContainerResource = &setpointv1.ContainerResourceMetricSource{Name: string(r.Name), Container: r.Container, Target: target(r.Target)}
	}
	if p := m.Pods; p != nil {
		out.Pods = &setpointv1.PodsMetricSource{Metric: identifier(p.Metric), Target: target(p.Target)}
	}
	if o := m.Object; o != nil {
		out.Object = &setpointv1.ObjectMetricSource{DescribedObject: objectRef(o.DescribedObject), Metric: identifier(o.Metric), Target: target(o.Target)}
	}
	if e := m.External; e != nil {
		out.External = &setpointv1.ExternalMetricSource{Metric: identifier(e.Metric), Target: target(e.Target)}
	}
	return out
}

func target(t autoscalingv2.MetricTarget) *setpointv1.MetricTarget {
	return &setpointv1.MetricTarget{Type: string(t.Type), Value: quantity(t.Value), AverageValue: quantity(t.AverageValue), AverageUtilization: t.AverageUtilization}
}

func identifier(id autoscalingv2.MetricIdentifier) *setpointv1.MetricIdentifier {
	out := &setpointv1.MetricIdentifier{Name: id.Name}
	if s := id.Selector; s != nil {
		out.Selector = &setpointv1.LabelSelector{MatchLabels: s.MatchLabels}
		for _, e := range s.MatchExpressions {
			out.Selector.MatchExpressions = append(out.Selector.MatchExpressions,
				&setpointv1.LabelSelectorRequirement{Key: e.Key, Operator: string(e.Operator), Values: e.Values})
		}
	}
	return out
}

func timestamp(t metav1.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t.Time)
}

func quantities(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

func quantity(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return q.String()
}
