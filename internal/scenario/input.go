package scenario

import (
	"fmt"
	"time"

	"github.com/setpointhq/setpoint/engine"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// defaultMetricWindow is the window the Kubernetes controller assumes for a
// custom metric value that does not state one.
const defaultMetricWindow = time.Minute

// unavailableText is the error text of a failed fetch (HTTP 503).
const unavailableText = "the server is currently unable to handle the request"

// Spec converts the scenario's HPA spec into the engine's resolved form.
func (s *Scenario) Spec() (engine.Spec, error) {
	hs := &s.HPA.Spec
	spec := engine.Spec{MinReplicas: 1, MaxReplicas: hs.MaxReplicas}
	if hs.MinReplicas != nil {
		spec.MinReplicas = *hs.MinReplicas
	}
	for i := range hs.Metrics {
		m, err := metricSpec(&hs.Metrics[i])
		if err != nil {
			return engine.Spec{}, fmt.Errorf("spec.metrics[%d]: %w", i, err)
		}
		spec.Metrics = append(spec.Metrics, m)
	}
	if b := hs.Behavior; b != nil {
		tol := s.Controller.Tolerance
		window := int32(s.Controller.DownscaleStabilizationWindow.Seconds())
		spec.Behavior = &engine.Behavior{ScaleUp: rules(b.ScaleUp, tol, 0), ScaleDown: rules(b.ScaleDown, tol, window)}
	}
	return spec, nil
}

// rules resolves one direction's scaling rules (they are present after API
// defaulting; the window and tolerance may still be absent).
func rules(r *autoscalingv2.HPAScalingRules, tolerance float64, window int32) engine.Rules {
	out := engine.Rules{StabilizationWindowSeconds: window, SelectPolicy: engine.SelectMax, Tolerance: tolerance}
	if r == nil {
		return out
	}
	if r.StabilizationWindowSeconds != nil {
		out.StabilizationWindowSeconds = *r.StabilizationWindowSeconds
	}
	if r.SelectPolicy != nil {
		out.SelectPolicy = engine.SelectPolicy(*r.SelectPolicy)
	}
	if r.Tolerance != nil {
		out.Tolerance = r.Tolerance.AsApproximateFloat64()
	}
	for _, p := range r.Policies {
		out.Policies = append(out.Policies, engine.Policy{Type: engine.PolicyType(p.Type), Value: p.Value, PeriodSeconds: p.PeriodSeconds})
	}
	return out
}

func metricSpec(m *autoscalingv2.MetricSpec) (engine.MetricSpec, error) {
	out := engine.MetricSpec{Type: engine.MetricSourceType(m.Type)}
	var target autoscalingv2.MetricTarget
	switch m.Type {
	case autoscalingv2.ResourceMetricSourceType:
		out.Resource, target = string(m.Resource.Name), m.Resource.Target
	case autoscalingv2.ContainerResourceMetricSourceType:
		out.Resource, out.Container, target = string(m.ContainerResource.Name), m.ContainerResource.Container, m.ContainerResource.Target
	case autoscalingv2.PodsMetricSourceType:
		out.Metric, target = identifier(m.Pods.Metric), m.Pods.Target
	case autoscalingv2.ObjectMetricSourceType:
		out.Metric, target = identifier(m.Object.Metric), m.Object.Target
		out.DescribedObject = engine.ObjectReference{APIVersion: m.Object.DescribedObject.APIVersion, Kind: m.Object.DescribedObject.Kind, Name: m.Object.DescribedObject.Name}
	case autoscalingv2.ExternalMetricSourceType:
		out.Metric, target = identifier(m.External.Metric), m.External.Target
	default:
		return out, fmt.Errorf("unknown metric source type %q", m.Type)
	}
	out.Target.Type = engine.TargetType(target.Type)
	switch {
	case target.Type == autoscalingv2.UtilizationMetricType && target.AverageValue == nil && target.AverageUtilization != nil:
		out.Target.Utilization = *target.AverageUtilization
	case target.AverageValue != nil && target.Type != autoscalingv2.ValueMetricType:
		out.Target.Type, out.Target.Milli = engine.AverageValueTarget, target.AverageValue.MilliValue()
	case target.Value != nil:
		out.Target.Milli = target.Value.MilliValue()
	}
	return out, nil
}

func identifier(id autoscalingv2.MetricIdentifier) engine.MetricIdentifier {
	return engine.MetricIdentifier{Name: id.Name, Selector: selector(id.Selector)}
}

func selector(s *metav1.LabelSelector) *engine.LabelSelector {
	if s == nil {
		return nil
	}
	out := &engine.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, engine.LabelSelectorRequirement{Key: e.Key, Operator: string(e.Operator), Values: e.Values})
	}
	return out
}

// Settings are the scenario's controller settings.
func (s *Scenario) Settings() engine.Settings {
	c := &s.Controller
	return engine.Settings{
		Tolerance:                    c.Tolerance,
		CPUInitializationPeriod:      c.CPUInitializationPeriod.Duration,
		InitialReadinessDelay:        c.InitialReadinessDelay.Duration,
		DownscaleStabilizationWindow: c.DownscaleStabilizationWindow.Duration,
	}
}

// Input builds the engine input of step i, without Status (the replay
// carries it). It plays the metrics APIs: custom and external series are
// selected as the API would, and listed unavailable fetches fail.
func (s *Scenario) Input(i int) (engine.Input, error) {
	st := &s.Steps[i]
	spec, err := s.Spec()
	if err != nil {
		return engine.Input{}, err
	}
	in := engine.Input{
		Now:      st.Time,
		Spec:     spec,
		Settings: s.Settings(),
		Scale:    engine.Scale{Replicas: st.Scale.Replicas, StatusReplicas: st.Scale.StatusReplicas, Selector: st.Scale.Selector},
	}
	if st.Scale.Selector != "" {
		if _, err := labels.Parse(st.Scale.Selector); err != nil {
			in.Scale.SelectorError = err.Error()
		}
	}
	for j := range st.Pods {
		in.Pods = append(in.Pods, Pod(&st.Pods[j]))
	}
	if st.unavailable("resource", "") {
		in.ResourceMetrics.Err = unavailableText + " (get pods.metrics.k8s.io)"
	} else {
		for _, pm := range st.PodMetrics {
			u := engine.PodUsage{Pod: pm.Name, Timestamp: pm.Timestamp.Time, Window: pm.Window.Duration}
			for _, c := range pm.Containers {
				cu := engine.ContainerUsage{Name: c.Name, Usage: map[string]int64{}}
				for name, q := range c.Usage {
					cu.Usage[string(name)] = q.MilliValue()
				}
				u.Containers = append(u.Containers, cu)
			}
			in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, u)
		}
	}
	for j := range s.HPA.Spec.Metrics {
		in.Observations = append(in.Observations, s.observe(st, &s.HPA.Spec.Metrics[j]))
	}
	return in, nil
}

// unavailable reports whether a fetch of metric from api fails this step.
func (st *Step) unavailable(api, metric string) bool {
	for _, u := range st.Unavailable {
		if u.API == api && (u.Metric == "" || u.Metric == metric) {
			return true
		}
	}
	return false
}

// observe answers the custom or external metrics API for one metric.
func (s *Scenario) observe(st *Step, m *autoscalingv2.MetricSpec) engine.Observation {
	var obs engine.Observation
	switch m.Type {
	case autoscalingv2.PodsMetricSourceType:
		if st.unavailable("custom", m.Pods.Metric.Name) {
			obs.Err = unavailableText + " (get pods.custom.metrics.k8s.io)"
			return obs
		}
		for _, v := range st.CustomMetrics {
			if v.DescribedObject.Kind != "Pod" || !sameMetric(v.Metric.Name, v.Metric.Selector, m.Pods.Metric) {
				continue
			}
			window := defaultMetricWindow
			if v.WindowSeconds != nil {
				window = time.Duration(*v.WindowSeconds) * time.Second
			}
			obs.Values = append(obs.Values, engine.MetricValue{Pod: v.DescribedObject.Name, Milli: v.Value.MilliValue(), Timestamp: v.Timestamp.Time, Window: window})
		}
	case autoscalingv2.ObjectMetricSourceType:
		o := m.Object
		if st.unavailable("custom", o.Metric.Name) {
			obs.Err = unavailableText + " (get " + o.DescribedObject.Kind + ".custom.metrics.k8s.io)"
			return obs
		}
		want := schema.FromAPIVersionAndKind(o.DescribedObject.APIVersion, o.DescribedObject.Kind)
		name := o.DescribedObject.Name
		if want.Kind == "Namespace" && want.Group == "" {
			name = s.HPA.Namespace
		}
		for _, v := range st.CustomMetrics {
			got := schema.FromAPIVersionAndKind(v.DescribedObject.APIVersion, v.DescribedObject.Kind)
			if got.GroupKind() == want.GroupKind() && v.DescribedObject.Name == name && sameMetric(v.Metric.Name, v.Metric.Selector, o.Metric) {
				obs.Values = []engine.MetricValue{{Milli: v.Value.MilliValue(), Timestamp: v.Timestamp.Time}}
				return obs
			}
		}
		obs.Err = fmt.Sprintf("%s %q not found", o.Metric.Name, name)
	case autoscalingv2.ExternalMetricSourceType:
		e := m.External
		if st.unavailable("external", e.Metric.Name) {
			obs.Err = unavailableText + " (get " + e.Metric.Name + ".external.metrics.k8s.io)"
			return obs
		}
		sel := labels.Everything()
		if e.Metric.Selector != nil {
			var err error
			if sel, err = metav1.LabelSelectorAsSelector(e.Metric.Selector); err != nil {
				obs.Err = err.Error()
				return obs
			}
		}
		for _, v := range st.ExternalMetrics {
			if v.MetricName == e.Metric.Name && sel.Matches(labels.Set(v.MetricLabels)) {
				obs.Values = append(obs.Values, engine.MetricValue{Milli: v.Value.MilliValue(), Timestamp: v.Timestamp.Time})
			}
		}
	}
	return obs
}

// sameMetric reports whether a held custom metric is the one the spec asks
// for: same name and the same selector (both absent, or equal).
func sameMetric(name string, sel *metav1.LabelSelector, want autoscalingv2.MetricIdentifier) bool {
	if name != want.Name {
		return false
	}
	if sel == nil || want.Selector == nil {
		return sel == nil && want.Selector == nil
	}
	return equality.Semantic.DeepEqual(sel, want.Selector)
}

// Pod converts a Kubernetes pod into what the engine reads of it.
func Pod(p *corev1.Pod) engine.Pod {
	out := engine.Pod{
		Name:     p.Name,
		Phase:    engine.PodPhase(p.Status.Phase),
		Deleting: p.DeletionTimestamp != nil,
	}
	if p.Status.StartTime != nil {
		out.StartTime = p.Status.StartTime.Time
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = &engine.PodReadiness{Status: engine.ConditionStatus(c.Status), LastTransitionTime: c.LastTransitionTime.Time}
			break
		}
	}
	for _, c := range p.Spec.Containers {
		out.Containers = append(out.Containers, engine.Container{Name: c.Name, Requests: milli(c.Resources.Requests)})
	}
	for _, c := range p.Spec.InitContainers {
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		out.Containers = append(out.Containers, engine.Container{Name: c.Name, Requests: milli(c.Resources.Requests), Sidecar: sidecar, Init: !sidecar})
	}
	if p.Spec.Resources != nil && len(p.Spec.Resources.Requests) > 0 {
		out.Requests = milli(p.Spec.Resources.Requests)
	}
	out.Overhead = milli(p.Spec.Overhead)
	return out
}

func milli(rl corev1.ResourceList) map[string]int64 {
	if len(rl) == 0 {
		return nil
	}
	out := make(map[string]int64, len(rl))
	for name, q := range rl {
		out[string(name)] = q.MilliValue()
	}
	return out
}
