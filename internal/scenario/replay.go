package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Outcome is what a Driver reports for one step, in the terms the corpus
// records.
type Outcome struct {
	// OK is false when the decision carries an error.
	OK bool
	// Scale is the replica count to write, nil when nothing is written.
	Scale *int32
	// DesiredReplicas is status.desiredReplicas after the step.
	DesiredReplicas int32
	// CurrentReplicas is status.currentReplicas after the step.
	CurrentReplicas int32
	// Conditions are status.conditions after the step.
	Conditions []engine.Condition
	// CurrentMetrics is status.currentMetrics after the step.
	CurrentMetrics []engine.MetricStatus
}

// OutcomeOf reads an engine decision as an Outcome.
func OutcomeOf(d engine.Decision) Outcome {
	o := Outcome{
		OK:              d.Error == "",
		DesiredReplicas: d.Status.DesiredReplicas,
		CurrentReplicas: d.Status.CurrentReplicas,
		Conditions:      d.Status.Conditions,
		CurrentMetrics:  d.Status.CurrentMetrics,
	}
	if d.Rescale {
		n := d.DesiredReplicas
		o.Scale = &n
	}
	return o
}

// Driver makes decisions for one scenario, keeping its status and history
// between steps, across spec edits, as the Kubernetes controller keeps
// them.
type Driver interface {
	// Decide makes the decision at now for one step's request (without a
	// target key: the driver sets its own).
	Decide(ctx context.Context, req *setpointv1.RecommendRequest, now time.Time) (Outcome, error)
	// Applied reports that the scale was written from → to at the given
	// time.
	Applied(ctx context.Context, from, to int32, at time.Time) error
}

// Mismatch is the first difference between a replay and the corpus.
type Mismatch struct {
	// Step is the index of the differing step.
	Step int
	// Field names the differing field, e.g. "conditions[1].reason".
	Field string
	// Want is the controller's value.
	Want string
	// Got is the replay's value.
	Got string
}

// String renders the mismatch for a report.
func (m *Mismatch) String() string {
	return fmt.Sprintf("step %d: %s: want %s, got %s", m.Step, m.Field, m.Want, m.Got)
}

// Replay feeds every step of s to drv, each with the spec in force at that
// step, and compares each outcome with the recorded one. It returns the
// first mismatch (nil when all steps agree), or an error when the driver
// failed.
func Replay(ctx context.Context, s *Scenario, drv Driver) (*Mismatch, error) {
	for i := range s.Steps {
		got, err := drv.Decide(ctx, s.Request(i), s.Steps[i].Time)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		if m := Compare(&s.Steps[i].Expect, got); m != nil {
			m.Step = i
			return m, nil
		}
		if want := s.Steps[i].Expect.Scale; want != nil {
			if err := drv.Applied(ctx, s.Steps[i].Scale.Replicas, *want, s.Steps[i].Time); err != nil {
				return nil, fmt.Errorf("step %d: applied: %w", i, err)
			}
		}
	}
	return nil, nil
}

// Compare returns the first normative field where got differs from want
// (Step left 0), or nil.
func Compare(want *Expect, got Outcome) *Mismatch {
	mm := func(field string, w, g any) *Mismatch {
		return &Mismatch{Field: field, Want: fmt.Sprint(w), Got: fmt.Sprint(g)}
	}
	if want.OK != got.OK {
		return mm("ok", want.OK, got.OK)
	}
	if ws, gs := scaleText(want.Scale), scaleText(got.Scale); ws != gs {
		return mm("scale", ws, gs)
	}
	if want.DesiredReplicas != got.DesiredReplicas {
		return mm("desiredReplicas", want.DesiredReplicas, got.DesiredReplicas)
	}
	if want.CurrentReplicas != got.CurrentReplicas {
		return mm("currentReplicas", want.CurrentReplicas, got.CurrentReplicas)
	}
	if len(want.Conditions) != len(got.Conditions) {
		return mm("conditions", conditionsText(expected(want.Conditions)), conditionsText(got.Conditions))
	}
	for i, w := range want.Conditions {
		g := got.Conditions[i]
		if w.Type != string(g.Type) || w.Status != string(g.Status) || w.Reason != g.Reason {
			return mm(fmt.Sprintf("conditions[%d]", i), w.Type+"/"+w.Status+"/"+w.Reason, string(g.Type)+"/"+string(g.Status)+"/"+g.Reason)
		}
	}
	if len(want.CurrentMetrics) != len(got.CurrentMetrics) {
		return mm("currentMetrics", fmt.Sprintf("%d entries", len(want.CurrentMetrics)), fmt.Sprintf("%d entries", len(got.CurrentMetrics)))
	}
	for i := range want.CurrentMetrics {
		g := MetricStatus(got.CurrentMetrics[i])
		if !equality.Semantic.DeepEqual(want.CurrentMetrics[i], g) {
			return mm(fmt.Sprintf("currentMetrics[%d]", i), metricText(want.CurrentMetrics[i]), metricText(g))
		}
	}
	return nil
}

func scaleText(s *int32) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprint(*s)
}

// conditionsText renders conditions as [type/status/reason ...].
func conditionsText(cs []engine.Condition) string {
	out := "["
	for i, c := range cs {
		if i > 0 {
			out += " "
		}
		out += string(c.Type) + "/" + string(c.Status) + "/" + c.Reason
	}
	return out + "]"
}

// expected reads recorded conditions as engine conditions.
func expected(cs []ExpectCondition) []engine.Condition {
	out := make([]engine.Condition, len(cs))
	for i, c := range cs {
		out[i] = engine.Condition{Type: engine.ConditionType(c.Type), Status: engine.ConditionStatus(c.Status), Reason: c.Reason}
	}
	return out
}

func metricText(m autoscalingv2.MetricStatus) string {
	var cur *autoscalingv2.MetricValueStatus
	switch {
	case m.Resource != nil:
		cur = &m.Resource.Current
	case m.ContainerResource != nil:
		cur = &m.ContainerResource.Current
	case m.Pods != nil:
		cur = &m.Pods.Current
	case m.Object != nil:
		cur = &m.Object.Current
	case m.External != nil:
		cur = &m.External.Current
	}
	if cur == nil {
		return fmt.Sprintf("{type:%q}", m.Type)
	}
	s := fmt.Sprintf("{type:%s", m.Type)
	if cur.Value != nil {
		s += " value:" + cur.Value.String()
	}
	if cur.AverageValue != nil {
		s += " averageValue:" + cur.AverageValue.String()
	}
	if cur.AverageUtilization != nil {
		s += fmt.Sprintf(" averageUtilization:%d", *cur.AverageUtilization)
	}
	return s + "}"
}

// MetricStatus converts an engine metric status into autoscaling/v2 form.
func MetricStatus(m engine.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(m.Type)}
	cur := autoscalingv2.MetricValueStatus{
		Value:              quantity(m.Value),
		AverageValue:       quantity(m.AverageValue),
		AverageUtilization: m.AverageUtilization,
	}
	id := autoscalingv2.MetricIdentifier{Name: m.Metric.Name, Selector: labelSelector(m.Metric.Selector)}
	switch m.Type {
	case engine.ResourceSource:
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceName(m.Resource), Current: cur}
	case engine.ContainerResourceSource:
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: corev1.ResourceName(m.Resource), Container: m.Container, Current: cur}
	case engine.PodsSource:
		out.Pods = &autoscalingv2.PodsMetricStatus{Metric: id, Current: cur}
	case engine.ObjectSource:
		ref := autoscalingv2.CrossVersionObjectReference{APIVersion: m.DescribedObject.APIVersion, Kind: m.DescribedObject.Kind, Name: m.DescribedObject.Name}
		out.Object = &autoscalingv2.ObjectMetricStatus{DescribedObject: ref, Metric: id, Current: cur}
	case engine.ExternalSource:
		out.External = &autoscalingv2.ExternalMetricStatus{Metric: id, Current: cur}
	}
	return out
}

func quantity(q *engine.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	f := resource.DecimalSI
	if q.Format == engine.BinarySI {
		f = resource.BinarySI
	}
	return resource.NewMilliQuantity(q.Milli, f)
}

func labelSelector(s *engine.LabelSelector) *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: e.Key, Operator: metav1.LabelSelectorOperator(e.Operator), Values: e.Values})
	}
	return out
}
