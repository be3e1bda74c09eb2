package scenario

import (
	"errors"
	"fmt"

	"github.com/setpointhq/setpoint/hpa"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	custommetrics "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
)

// unavailableText is the error text of a failed fetch (HTTP 503).
const unavailableText = "the server is currently unable to handle the request"

// SpecAt is the HPA spec in force at step i: the last spec edit at or
// before step i (FORMAT.md, Step and replay note 6), else hpa.spec.
func (s *Scenario) SpecAt(i int) *autoscalingv2.HorizontalPodAutoscalerSpec {
	for j := min(i, len(s.Steps)-1); j >= 0; j-- {
		if s.Steps[j].Spec != nil {
			return s.Steps[j].Spec
		}
	}
	return &s.HPA.Spec
}

// Settings are the scenario's controller settings, every one explicit.
func (s *Scenario) Settings() hpa.Settings {
	c := &s.Controller
	return hpa.Settings{
		Tolerance:                    &c.Tolerance,
		CPUInitializationPeriod:      &c.CPUInitializationPeriod.Duration,
		InitialReadinessDelay:        &c.InitialReadinessDelay.Duration,
		DownscaleStabilizationWindow: &c.DownscaleStabilizationWindow.Duration,
	}
}

// Request is the RecommendRequest of step i (no target key), built from
// what a controller reads at that step through the conversion the agent
// uses (package hpa), with the spec in force at that step.
func (s *Scenario) Request(i int) *setpointv1.RecommendRequest {
	return hpa.Request(s.Reading(i))
}

// Reading is what the controller reads at step i: the spec in force, the
// scale, the pods, and the metrics APIs' answers. It plays the metrics
// APIs: custom and external series are selected as the API would select
// them for each metric of the spec, and listed unavailable fetches fail.
func (s *Scenario) Reading(i int) *hpa.Reading {
	st := &s.Steps[i]
	spec := hpa.Default(*s.SpecAt(i))
	r := &hpa.Reading{
		Spec:            spec,
		Settings:        s.Settings(),
		Scale:           hpa.Scale{Replicas: st.Scale.Replicas, StatusReplicas: st.Scale.StatusReplicas, Selector: st.Scale.Selector},
		ResourceMetrics: hpa.ResourceMetrics{Fetched: true, Items: st.PodMetrics},
	}
	for j := range st.Pods {
		r.Pods = append(r.Pods, &st.Pods[j])
	}
	if st.unavailable("resource", "") {
		r.ResourceMetrics = hpa.ResourceMetrics{Fetched: true, Err: errors.New(unavailableText + " (get pods.metrics.k8s.io)")}
	}
	for j := range spec.Metrics {
		r.Metrics = append(r.Metrics, s.observe(st, &spec.Metrics[j]))
	}
	return r
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
func (s *Scenario) observe(st *Step, m *autoscalingv2.MetricSpec) hpa.MetricValues {
	var out hpa.MetricValues
	switch m.Type {
	case autoscalingv2.PodsMetricSourceType:
		if st.unavailable("custom", m.Pods.Metric.Name) {
			out.Err = errors.New(unavailableText + " (get pods.custom.metrics.k8s.io)")
			return out
		}
		for _, v := range st.CustomMetrics {
			if v.DescribedObject.Kind == "Pod" && sameMetric(v.Metric.Name, v.Metric.Selector, m.Pods.Metric) {
				out.Custom = append(out.Custom, v)
			}
		}
	case autoscalingv2.ObjectMetricSourceType:
		o := m.Object
		if st.unavailable("custom", o.Metric.Name) {
			out.Err = errors.New(unavailableText + " (get " + o.DescribedObject.Kind + ".custom.metrics.k8s.io)")
			return out
		}
		want := schema.FromAPIVersionAndKind(o.DescribedObject.APIVersion, o.DescribedObject.Kind)
		name := o.DescribedObject.Name
		if want.Kind == "Namespace" && want.Group == "" {
			name = s.HPA.Namespace
		}
		for _, v := range st.CustomMetrics {
			got := schema.FromAPIVersionAndKind(v.DescribedObject.APIVersion, v.DescribedObject.Kind)
			if got.GroupKind() == want.GroupKind() && v.DescribedObject.Name == name && sameMetric(v.Metric.Name, v.Metric.Selector, o.Metric) {
				out.Custom = []custommetrics.MetricValue{v}
				return out
			}
		}
		out.Err = fmt.Errorf("%s %q not found", o.Metric.Name, name)
	case autoscalingv2.ExternalMetricSourceType:
		e := m.External
		if st.unavailable("external", e.Metric.Name) {
			out.Err = errors.New(unavailableText + " (get " + e.Metric.Name + ".external.metrics.k8s.io)")
			return out
		}
		sel := labels.Everything()
		if e.Metric.Selector != nil {
			var err error
			if sel, err = metav1.LabelSelectorAsSelector(e.Metric.Selector); err != nil {
				out.Err = err
				return out
			}
		}
		for _, v := range st.ExternalMetrics {
			if v.MetricName == e.Metric.Name && sel.Matches(labels.Set(v.MetricLabels)) {
				out.External = append(out.External, v)
			}
		}
	}
	return out
}

// sameMetric reports whether a held custom metric is the one the spec asks
// for: the same name and the same selector, compared as the controller
// sends it to the API — its canonical string, in which requirements and
// values are sorted (an absent selector is the empty string).
func sameMetric(name string, sel *metav1.LabelSelector, want autoscalingv2.MetricIdentifier) bool {
	return name == want.Name && selectorString(sel) == selectorString(want.Selector)
}

// selectorString is a metric selector's canonical string; one that does not
// parse is its own Go syntax, equal only to itself.
func selectorString(s *metav1.LabelSelector) string {
	if s == nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return fmt.Sprintf("invalid:%#v", s)
	}
	return sel.String()
}
