package convert

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/resource"
)

// request is the inverse of Input: the RecommendRequest for target whose
// conversion gives in (apart from in.Now and in.Status, which the server
// supplies). Every default is explicit in the request. It fails only when a
// behavior tolerance has no quantity whose approximate float64 is exactly
// the tolerance.
func request(target *setpointv1.TargetKey, ref target.Ref, in engine.Input) (*setpointv1.RecommendRequest, error) {
	spec, err := Spec(in.Spec, ref)
	if err != nil {
		return nil, err
	}
	req := &setpointv1.RecommendRequest{
		Target:   target,
		Spec:     spec,
		Settings: ControllerSettings(in.Settings),
		Scale:    &setpointv1.Scale{Replicas: in.Scale.Replicas, StatusReplicas: in.Scale.StatusReplicas, Selector: in.Scale.Selector},
		Pods:     pods(in.Pods),
	}
	req.ResourceMetrics = &setpointv1.ResourceMetrics{Error: in.ResourceMetrics.Err}
	for _, p := range in.ResourceMetrics.Pods {
		item := &setpointv1.PodMetrics{Pod: p.Pod, Timestamp: timestamp(p.Timestamp)}
		if p.Window != 0 {
			item.Window = durationpb.New(p.Window)
		}
		for _, c := range p.Containers {
			item.Containers = append(item.Containers, &setpointv1.ContainerMetrics{Name: c.Name, Usage: quantityStrings(c.Usage)})
		}
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, item)
	}
	for i, o := range in.Observations {
		mo := &setpointv1.MetricObservation{Error: o.Err}
		pods := i < len(in.Spec.Metrics) && in.Spec.Metrics[i].Type == engine.PodsSource
		for _, v := range o.Values {
			mv := &setpointv1.MetricValue{Pod: v.Pod, Value: Quantity(engine.Quantity{Milli: v.Milli}), Timestamp: timestamp(v.Timestamp)}
			if pods || v.Window != 0 {
				mv.Window = durationpb.New(v.Window)
			}
			mo.Values = append(mo.Values, mv)
		}
		req.Observations = append(req.Observations, mo)
	}
	return req, nil
}

// ControllerSettings returns resolved settings with every field explicit.
func ControllerSettings(s engine.Settings) *setpointv1.ControllerSettings {
	return &setpointv1.ControllerSettings{
		Tolerance:                    &s.Tolerance,
		CpuInitializationPeriod:      durationpb.New(s.CPUInitializationPeriod),
		InitialReadinessDelay:        durationpb.New(s.InitialReadinessDelay),
		DownscaleStabilizationWindow: durationpb.New(s.DownscaleStabilizationWindow),
	}
}

// Spec returns a resolved spec, with its scale target reference, in the
// API's form with every default explicit.
func Spec(s engine.Spec, ref target.Ref) (*setpointv1.HorizontalPodAutoscalerSpec, error) {
	out := &setpointv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name},
		MinReplicas:    &s.MinReplicas,
		MaxReplicas:    s.MaxReplicas,
	}
	for _, m := range s.Metrics {
		out.Metrics = append(out.Metrics, metricSpec(m))
	}
	if b := s.Behavior; b != nil {
		up, err := scalingRules(b.ScaleUp)
		if err != nil {
			return nil, fmt.Errorf("convert: spec.behavior.scale_up: %w", err)
		}
		down, err := scalingRules(b.ScaleDown)
		if err != nil {
			return nil, fmt.Errorf("convert: spec.behavior.scale_down: %w", err)
		}
		out.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{ScaleUp: up, ScaleDown: down}
	}
	return out, nil
}

func scalingRules(r engine.Rules) (*setpointv1.ScalingRules, error) {
	tol, err := ToleranceQuantity(r.Tolerance)
	if err != nil {
		return nil, err
	}
	out := &setpointv1.ScalingRules{StabilizationWindowSeconds: &r.StabilizationWindowSeconds, SelectPolicy: string(r.SelectPolicy), Tolerance: tol}
	for _, p := range r.Policies {
		out.Policies = append(out.Policies, &setpointv1.ScalingPolicy{Type: string(p.Type), Value: p.Value, PeriodSeconds: p.PeriodSeconds})
	}
	return out, nil
}

// ToleranceQuantity returns a quantity string whose approximate float64
// (the controller's reading of a behavior tolerance) is exactly f. Equal
// decimals read differently by scale ("0.3" and "300m" give neighbouring
// floats), so decimal, milli, micro and nano forms are tried.
func ToleranceQuantity(f float64) (string, error) {
	var candidates []string
	for prec := range 10 {
		candidates = append(candidates, strconv.FormatFloat(f, 'f', prec, 64))
	}
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"m", 1e3}, {"u", 1e6}, {"n", 1e9}} {
		if v := math.Round(f * u.scale); math.Abs(v) < 1<<53 {
			candidates = append(candidates, strconv.FormatFloat(v, 'f', 0, 64)+u.suffix)
		}
	}
	candidates = append(candidates, strconv.FormatFloat(f, 'g', -1, 64))
	for _, s := range candidates {
		q, err := resource.ParseQuantity(s)
		if err == nil && toleranceValue(q) == f {
			return s, nil
		}
	}
	return "", fmt.Errorf("convert: tolerance %v has no exact quantity form", f)
}

func metricSpec(m engine.MetricSpec) *setpointv1.MetricSpec {
	out := &setpointv1.MetricSpec{Type: string(m.Type)}
	t := metricTarget(m.Target)
	switch m.Type {
	case engine.ResourceSource:
		out.Resource = &setpointv1.ResourceMetricSource{Name: m.Resource, Target: t}
	case engine.ContainerResourceSource:
		out.ContainerResource = &setpointv1.ContainerResourceMetricSource{Name: m.Resource, Container: m.Container, Target: t}
	case engine.PodsSource:
		out.Pods = &setpointv1.PodsMetricSource{Metric: identifier(m.Metric), Target: t}
	case engine.ObjectSource:
		out.Object = &setpointv1.ObjectMetricSource{DescribedObject: objectReference(m.DescribedObject), Metric: identifier(m.Metric), Target: t}
	case engine.ExternalSource:
		out.External = &setpointv1.ExternalMetricSource{Metric: identifier(m.Metric), Target: t}
	}
	return out
}

func metricTarget(t engine.Target) *setpointv1.MetricTarget {
	out := &setpointv1.MetricTarget{Type: string(t.Type)}
	switch t.Type {
	case engine.UtilizationTarget:
		out.AverageUtilization = &t.Utilization
	case engine.ValueTarget:
		out.Value = Quantity(engine.Quantity{Milli: t.Milli})
	case engine.AverageValueTarget:
		out.AverageValue = Quantity(engine.Quantity{Milli: t.Milli})
	}
	return out
}

func identifier(id engine.MetricIdentifier) *setpointv1.MetricIdentifier {
	out := &setpointv1.MetricIdentifier{Name: id.Name}
	if s := id.Selector; s != nil {
		out.Selector = &setpointv1.LabelSelector{MatchLabels: s.MatchLabels}
		for _, e := range s.MatchExpressions {
			out.Selector.MatchExpressions = append(out.Selector.MatchExpressions,
				&setpointv1.LabelSelectorRequirement{Key: e.Key, Operator: e.Operator, Values: e.Values})
		}
	}
	return out
}

func objectReference(r engine.ObjectReference) *setpointv1.CrossVersionObjectReference {
	return &setpointv1.CrossVersionObjectReference{ApiVersion: r.APIVersion, Kind: r.Kind, Name: r.Name}
}

func pods(ps []engine.Pod) []*setpointv1.Pod {
	var out []*setpointv1.Pod
	for _, p := range ps {
		pod := &setpointv1.Pod{Name: p.Name, Phase: string(p.Phase), Deleting: p.Deleting, StartTime: timestamp(p.StartTime), Requests: quantityStrings(p.Requests), Overhead: quantityStrings(p.Overhead)}
		if r := p.Ready; r != nil {
			pod.Ready = &setpointv1.PodReadyCondition{Status: string(r.Status), LastTransitionTime: timestamp(r.LastTransitionTime)}
		}
		for _, c := range p.Containers {
			pod.Containers = append(pod.Containers, &setpointv1.Container{Name: c.Name, Requests: quantityStrings(c.Requests), RestartableInit: c.Sidecar, Init: c.Init})
		}
		out = append(out, pod)
	}
	return out
}

// quantityStrings prints a resource list; resources are printed in
// BinarySI when they are memory-like ("memory", "ephemeral-storage",
// "storage"), in DecimalSI otherwise.
func quantityStrings(l engine.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for _, q := range l {
		format := engine.DecimalSI
		switch q.Name {
		case "memory", "ephemeral-storage", "storage":
			format = engine.BinarySI
		}
		out[q.Name] = Quantity(engine.Quantity{Milli: q.Milli, Format: format})
	}
	return out
}

// Quantity prints a milli-value in canonical Kubernetes form, in its format
// (DecimalSI when unset).
func Quantity(q engine.Quantity) string {
	format := resource.DecimalSI
	if q.Format == engine.BinarySI {
		format = resource.BinarySI
	}
	return resource.NewMilliQuantity(q.Milli, format).String()
}

// timestamp returns t as a protobuf timestamp; nil for the zero time.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// Status returns an autoscaler status in the API's form.
func Status(s engine.Status) *setpointv1.HorizontalPodAutoscalerStatus {
	return statusIn(s, fresh)
}

// statusIn is Status in r's memory.
func statusIn(s engine.Status, r *Response) *setpointv1.HorizontalPodAutoscalerStatus {
	out := single(r, &r.singles[0].status)
	out.CurrentReplicas, out.DesiredReplicas = s.CurrentReplicas, s.DesiredReplicas
	if !s.LastScaleTime.IsZero() {
		out.LastScaleTime = single(r, &r.singles[0].lastScale)
		setTimestamp(out.LastScaleTime, s.LastScaleTime)
	}
	if n := len(s.CurrentMetrics); n > 0 {
		// One array holds the metrics' statuses and one their values.
		ms := grab(r, &r.metricStatuses, n)
		curs := grab(r, &r.metricValues, n)
		out.CurrentMetrics = grab(r, &r.metricStatusList, n)
		for i, m := range s.CurrentMetrics {
			var resource *setpointv1.ResourceMetricStatus
			if m.Type == engine.ResourceSource {
				resource = &grab(r, &r.resourceStatuses, 1)[0]
			}
			metricStatus(m, &ms[i], &curs[i], resource)
			out.CurrentMetrics[i] = &ms[i]
		}
	}
	if n := len(s.Conditions); n > 0 {
		// One array holds the conditions and one their times.
		conds := grab(r, &r.conditions, n)
		times := grab(r, &r.conditionTimes, n)
		out.Conditions = grab(r, &r.conditionList, n)
		for i, c := range s.Conditions {
			pc := &conds[i]
			pc.Type, pc.Status, pc.Reason, pc.Message = string(c.Type), string(c.Status), c.Reason, c.Message
			if !c.LastTransitionTime.IsZero() {
				setTimestamp(&times[i], c.LastTransitionTime)
				pc.LastTransitionTime = &times[i]
			}
			out.Conditions[i] = pc
		}
	}
	return out
}

// setTimestamp sets the empty *ts to t, as timestamppb.New(t) would.
func setTimestamp(ts *timestamppb.Timestamp, t time.Time) {
	ts.Seconds, ts.Nanos = t.Unix(), int32(t.Nanosecond())
}

// MetricStatus returns one status.currentMetrics entry in the API's form.
func MetricStatus(m engine.MetricStatus) *setpointv1.MetricStatus {
	out := &setpointv1.MetricStatus{}
	metricStatus(m, out, &setpointv1.MetricValueStatus{}, nil)
	return out
}

// metricStatus is MetricStatus into out (empty), with its current value in
// cur (empty) and, for a Resource metric, its source's status in resource
// (empty; nil: new).
func metricStatus(m engine.MetricStatus, out *setpointv1.MetricStatus, cur *setpointv1.MetricValueStatus, resource *setpointv1.ResourceMetricStatus) {
	out.Type = string(m.Type)
	cur.AverageUtilization = m.AverageUtilization
	if m.Value != nil {
		cur.Value = Quantity(*m.Value)
	}
	if m.AverageValue != nil {
		cur.AverageValue = Quantity(*m.AverageValue)
	}
	switch m.Type {
	case engine.ResourceSource:
		if resource == nil {
			resource = &setpointv1.ResourceMetricStatus{}
		}
		resource.Name, resource.Current = m.Resource, cur
		out.Resource = resource
	case engine.ContainerResourceSource:
		out.ContainerResource = &setpointv1.ContainerResourceMetricStatus{Name: m.Resource, Container: m.Container, Current: cur}
	case engine.PodsSource:
		out.Pods = &setpointv1.PodsMetricStatus{Metric: identifier(m.Metric), Current: cur}
	case engine.ObjectSource:
		out.Object = &setpointv1.ObjectMetricStatus{Metric: identifier(m.Metric), Current: cur, DescribedObject: objectReference(m.DescribedObject)}
	case engine.ExternalSource:
		out.External = &setpointv1.ExternalMetricStatus{Metric: identifier(m.Metric), Current: cur}
	}
}

// Explanation returns a decision's explanation in the API's form.
func Explanation(e engine.Explanation) *setpointv1.Explanation {
	return explanationIn(e, fresh)
}

// explanationIn is Explanation in r's memory.
func explanationIn(e engine.Explanation, r *Response) *setpointv1.Explanation {
	out := single(r, &r.singles[0].explanation)
	out.CurrentReplicas, out.Winner, out.Proposal = e.CurrentReplicas, int32(e.Winner), e.Proposal
	if len(e.Metrics) > 0 {
		// One array holds the metrics' explanations, one the steps.
		ms := grab(r, &r.metricExplanations, len(e.Metrics))
		out.Metrics = grab(r, &r.metricExplanationList, len(e.Metrics))
		for i, m := range e.Metrics {
			pm := &ms[i]
			pm.Name, pm.Outcome, pm.Proposal, pm.Error = m.Name, string(m.Outcome), m.Proposal, m.Err
			pm.Current, pm.Target, pm.Ratio, pm.RebalancedRatio = m.Current, m.Target, m.Ratio, m.RebalancedRatio
			pm.ReadyPods, pm.UnreadyPods, pm.MissingPods, pm.IgnoredPods = m.ReadyPods, m.UnreadyPods, m.MissingPods, m.IgnoredPods
			out.Metrics[i] = pm
		}
	}
	if len(e.Steps) > 0 {
		steps := grab(r, &r.steps, len(e.Steps))
		out.Steps = grab(r, &r.stepList, len(e.Steps))
		for i, s := range e.Steps {
			ps := &steps[i]
			ps.Kind, ps.From, ps.To, ps.Reason, ps.Message = string(s.Kind), s.From, s.To, s.Reason, s.Message
			out.Steps[i] = ps
		}
	}
	return out
}

// Decision returns a recorded decision in the API's form.
func Decision(d target.LastDecision) *setpointv1.Decision {
	return decisionIn(d, fresh)
}

// decisionIn is Decision in r's memory.
func decisionIn(d target.LastDecision, r *Response) *setpointv1.Decision {
	out := single(r, &r.singles[0].decision)
	out.DecisionId = d.ID
	if !d.At.IsZero() {
		out.DecisionTime = single(r, &r.singles[0].decisionTime)
		setTimestamp(out.DecisionTime, d.At)
	}
	out.DesiredReplicas, out.Rescale, out.Error = d.Decision.DesiredReplicas, d.Decision.Rescale, d.Decision.Error
	out.Explanation = explanationIn(d.Decision.Explanation, r)
	out.Status = statusIn(d.Decision.Status, r)
	return out
}

// RecommendResponse returns Recommend's response for a recorded decision,
// in r's memory (nil: new memory).
func RecommendResponse(d target.LastDecision, r *Response) *setpointv1.RecommendResponse {
	if r == nil {
		r = fresh
	}
	out := single(r, &r.singles[0].response)
	out.Decision = decisionIn(d, r)
	return out
}

// History returns a target's history in the API's form.
func History(h engine.History) *setpointv1.History {
	out := &setpointv1.History{}
	for _, r := range h.Recommendations {
		out.Recommendations = append(out.Recommendations, &setpointv1.Recommendation{Replicas: r.Replicas, Time: timestamp(r.At)})
	}
	events := func(es []engine.ScaleEvent) []*setpointv1.ScaleEvent {
		var out []*setpointv1.ScaleEvent
		for _, e := range es {
			out = append(out, &setpointv1.ScaleEvent{Change: e.Change, Time: timestamp(e.At), Outdated: e.Outdated})
		}
		return out
	}
	out.ScaleUpEvents = events(h.ScaleUpEvents)
	out.ScaleDownEvents = events(h.ScaleDownEvents)
	return out
}

// Target returns everything kept for a target in the API's form.
func Target(rec target.Record) (*setpointv1.Target, error) {
	spec, err := Spec(rec.Spec, rec.Ref)
	if err != nil {
		return nil, err
	}
	received, err := receivedSpec(rec.ReceivedSpec)
	if err != nil {
		return nil, fmt.Errorf("target %s: the spec as received: %w", rec.Key, err)
	}
	out := &setpointv1.Target{
		ReceivedSpec: received,
		Key:          &setpointv1.TargetKey{Cluster: rec.Key.Cluster, Namespace: rec.Key.Namespace, Name: rec.Key.Name},
		Spec:         spec,
		Settings:     ControllerSettings(rec.Settings),
		Status:       Status(rec.Status),
		History:      History(rec.History),
		LastSeen:     timestamp(rec.LastSeen),
	}
	if rec.Last != nil {
		out.LastDecision = Decision(*rec.Last)
	}
	for _, e := range rec.Events {
		out.Events = append(out.Events, &setpointv1.Event{
			Kind: string(e.Kind), From: e.From, To: e.To, Time: timestamp(e.At), DecisionId: e.DecisionID, Message: e.Message,
		})
	}
	return out, nil
}

// LoggedDecision returns an entry of a decision log in the API's form.
func LoggedDecision(d target.LoggedDecision) *setpointv1.LoggedDecision {
	return &setpointv1.LoggedDecision{
		DecisionTime:    timestamp(d.At),
		DesiredReplicas: d.DesiredReplicas,
		Rescale:         d.Rescale,
		Error:           d.Error,
		Explanation:     Explanation(d.Explanation),
	}
}

// ReceivedSpec returns spec as the record keeps it (target.Record's
// ReceivedSpec): its wire form, which Target reads back unchanged.
func ReceivedSpec(spec *setpointv1.HorizontalPodAutoscalerSpec) string {
	if spec == nil {
		return ""
	}
	// Encoded on the stack when it fits, so that the string is the one
	// allocation (most specs are well under 1 KiB).
	var stack [1024]byte
	n := spec.SizeVT()
	b := stack[:0]
	if n > len(stack) {
		b = make([]byte, n)
	}
	if _, err := spec.MarshalToSizedBufferVT(b[:n]); err != nil { // a message that was decoded always encodes
		return ""
	}
	return string(b[:n])
}

// receivedSpec reads back what ReceivedSpec kept; nil when nothing was.
func receivedSpec(s string) (*setpointv1.HorizontalPodAutoscalerSpec, error) {
	if s == "" {
		return nil, nil
	}
	spec := &setpointv1.HorizontalPodAutoscalerSpec{}
	if err := spec.UnmarshalVT([]byte(s)); err != nil {
		return nil, err
	}
	return spec, nil
}
