package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// grpcService is Service over the generated gRPC client.
type grpcService struct {
	client setpointv1.AutoscalerServiceClient
}

// NewGRPCService returns the Service that calls the Setpoint API over conn.
// Errors are the gRPC status errors of the calls, unchanged.
func NewGRPCService(conn grpc.ClientConnInterface) Service {
	return &grpcService{client: setpointv1.NewAutoscalerServiceClient(conn)}
}

// Recommend implements Service.
func (s *grpcService) Recommend(ctx context.Context, req *Request) (*Recommendation, error) {
	resp, err := s.client.Recommend(ctx, recommendRequest(req))
	if err != nil {
		return nil, err
	}
	return recommendationOf(resp.GetDecision()), nil
}

// Observe implements Service.
func (s *grpcService) Observe(ctx context.Context, obs *Observation) error {
	_, err := s.client.Observe(ctx, observeRequest(obs))
	return err
}

// DeleteTarget implements Service.
func (s *grpcService) DeleteTarget(ctx context.Context, t Target) error {
	_, err := s.client.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: targetKey(t)})
	return err
}

func targetKey(t Target) *setpointv1.TargetKey {
	return &setpointv1.TargetKey{Cluster: t.Cluster, Namespace: t.Namespace, Name: t.Name}
}

func observeRequest(obs *Observation) *setpointv1.ObserveRequest {
	out := &setpointv1.ObserveRequest{Target: targetKey(obs.Target), DecisionId: obs.DecisionID}
	switch obs.Kind {
	case ObservedApplied:
		out.Change = &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: obs.From, To: obs.To}}
	case ObservedFailed:
		out.Change = &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: obs.To, Message: obs.Err}}
	default:
		out.Change = &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: obs.From, To: obs.To}}
	}
	return out
}

// recommendRequest converts what the agent read into the API's request:
// raw values, quantities as strings; the service validates and decides.
func recommendRequest(req *Request) *setpointv1.RecommendRequest {
	out := &setpointv1.RecommendRequest{
		Target:   targetKey(req.Target),
		Spec:     specOf(&req.Spec),
		Settings: settingsOf(req.Settings),
		Scale:    &setpointv1.Scale{Replicas: req.Scale.Replicas, StatusReplicas: req.Scale.StatusReplicas, Selector: req.Scale.Selector},
	}
	for _, p := range req.Pods {
		out.Pods = append(out.Pods, podOf(p))
	}
	if req.ResourceMetrics.Fetched {
		rm := &setpointv1.ResourceMetrics{}
		if req.ResourceMetrics.Err != nil {
			rm.Error = req.ResourceMetrics.Err.Error()
		}
		for _, pm := range req.ResourceMetrics.Items {
			item := &setpointv1.PodMetrics{Pod: pm.Name, Timestamp: timestamp(pm.Timestamp), Window: durationpb.New(pm.Window.Duration)}
			for _, c := range pm.Containers {
				item.Containers = append(item.Containers, &setpointv1.ContainerMetrics{Name: c.Name, Usage: quantities(c.Usage)})
			}
			rm.Items = append(rm.Items, item)
		}
		out.ResourceMetrics = rm
	}
	for i := range req.Spec.Metrics {
		obs := &setpointv1.MetricObservation{}
		if i < len(req.Metrics) {
			mv := req.Metrics[i]
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
		}
		if req.Spec.Metrics[i].Type == autoscalingv2.ResourceMetricSourceType || req.Spec.Metrics[i].Type == autoscalingv2.ContainerResourceMetricSourceType {
			if req.ResourceMetrics.Err != nil {
				obs.Error = req.ResourceMetrics.Err.Error()
			}
		}
		out.Observations = append(out.Observations, obs)
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

func settingsOf(s Settings) *setpointv1.ControllerSettings {
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

// podOf keeps what the HPA reads of a pod: phase, deletion, start time,
// readiness, the requests of its containers and init containers, its
// pod-level requests and its overhead.
func podOf(p *corev1.Pod) *setpointv1.Pod {
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
	// (restartable) count like containers; the others matter only for
	// the pod request aggregate used with pod-level requests.
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

func specOf(s *v1alpha1.AutoscalerSpec) *setpointv1.HorizontalPodAutoscalerSpec {
	out := &setpointv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: objectRef(s.ScaleTargetRef),
		MinReplicas:    s.MinReplicas,
		MaxReplicas:    s.MaxReplicas,
	}
	for i := range s.Metrics {
		out.Metrics = append(out.Metrics, metricSpecOf(&s.Metrics[i]))
	}
	if b := s.Behavior; b != nil {
		out.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{ScaleUp: rulesOf(b.ScaleUp), ScaleDown: rulesOf(b.ScaleDown)}
	}
	return out
}

func objectRef(r autoscalingv2.CrossVersionObjectReference) *setpointv1.CrossVersionObjectReference {
	return &setpointv1.CrossVersionObjectReference{ApiVersion: r.APIVersion, Kind: r.Kind, Name: r.Name}
}

func rulesOf(r *autoscalingv2.HPAScalingRules) *setpointv1.ScalingRules {
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

func metricSpecOf(m *autoscalingv2.MetricSpec) *setpointv1.MetricSpec {
	out := &setpointv1.MetricSpec{Type: string(m.Type)}
	if r := m.Resource; r != nil {
		out.Resource = &setpointv1.ResourceMetricSource{Name: string(r.Name), Target: targetOf(r.Target)}
	}
	if r := m.ContainerResource; r != nil {
		out.ContainerResource = &setpointv1.ContainerResourceMetricSource{Name: string(r.Name), Container: r.Container, Target: targetOf(r.Target)}
	}
	if p := m.Pods; p != nil {
		out.Pods = &setpointv1.PodsMetricSource{Metric: identifierOf(p.Metric), Target: targetOf(p.Target)}
	}
	if o := m.Object; o != nil {
		out.Object = &setpointv1.ObjectMetricSource{DescribedObject: objectRef(o.DescribedObject), Metric: identifierOf(o.Metric), Target: targetOf(o.Target)}
	}
	if e := m.External; e != nil {
		out.External = &setpointv1.ExternalMetricSource{Metric: identifierOf(e.Metric), Target: targetOf(e.Target)}
	}
	return out
}

func targetOf(t autoscalingv2.MetricTarget) *setpointv1.MetricTarget {
	return &setpointv1.MetricTarget{Type: string(t.Type), Value: quantity(t.Value), AverageValue: quantity(t.AverageValue), AverageUtilization: t.AverageUtilization}
}

func identifierOf(id autoscalingv2.MetricIdentifier) *setpointv1.MetricIdentifier {
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

// recommendationOf converts the API's decision into the agent's form.
func recommendationOf(d *setpointv1.Decision) *Recommendation {
	st := d.GetStatus()
	rec := &Recommendation{
		DecisionID:      d.GetDecisionId(),
		DesiredReplicas: d.GetDesiredReplicas(),
		Rescale:         d.GetRescale(),
		Error:           d.GetError(),
	}
	if t := st.GetLastScaleTime(); t != nil {
		mt := metav1.NewTime(t.AsTime())
		rec.LastScaleTime = &mt
	}
	for _, c := range st.GetConditions() {
		cond := autoscalingv2.HorizontalPodAutoscalerCondition{
			Type:    autoscalingv2.HorizontalPodAutoscalerConditionType(c.GetType()),
			Status:  corev1.ConditionStatus(c.GetStatus()),
			Reason:  c.GetReason(),
			Message: c.GetMessage(),
		}
		if t := c.GetLastTransitionTime(); t != nil {
			cond.LastTransitionTime = metav1.NewTime(t.AsTime())
		}
		rec.Conditions = append(rec.Conditions, cond)
	}
	for _, m := range st.GetCurrentMetrics() {
		rec.CurrentMetrics = append(rec.CurrentMetrics, metricStatusOf(m))
	}
	rec.Explanation, rec.Reason = explain(d.GetExplanation(), d.GetDesiredReplicas())
	for _, m := range d.GetExplanation().GetMetrics() {
		rec.Metrics = append(rec.Metrics, MetricProposal{Proposal: m.GetProposal(), Failed: m.GetOutcome() == "Failed"})
	}
	return rec
}

func metricStatusOf(m *setpointv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(m.GetType())}
	if r := m.GetResource(); r != nil {
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceName(r.GetName()), Current: valueStatusOf(r.GetCurrent())}
	}
	if r := m.GetContainerResource(); r != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: corev1.ResourceName(r.GetName()), Container: r.GetContainer(), Current: valueStatusOf(r.GetCurrent())}
	}
	if p := m.GetPods(); p != nil {
		out.Pods = &autoscalingv2.PodsMetricStatus{Metric: identifierFrom(p.GetMetric()), Current: valueStatusOf(p.GetCurrent())}
	}
	if o := m.GetObject(); o != nil {
		ref := o.GetDescribedObject()
		out.Object = &autoscalingv2.ObjectMetricStatus{
			Metric:          identifierFrom(o.GetMetric()),
			Current:         valueStatusOf(o.GetCurrent()),
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: ref.GetApiVersion(), Kind: ref.GetKind(), Name: ref.GetName()},
		}
	}
	if e := m.GetExternal(); e != nil {
		out.External = &autoscalingv2.ExternalMetricStatus{Metric: identifierFrom(e.GetMetric()), Current: valueStatusOf(e.GetCurrent())}
	}
	return out
}

func valueStatusOf(v *setpointv1.MetricValueStatus) autoscalingv2.MetricValueStatus {
	return autoscalingv2.MetricValueStatus{
		Value:              parseQuantity(v.GetValue()),
		AverageValue:       parseQuantity(v.GetAverageValue()),
		AverageUtilization: v.AverageUtilization,
	}
}

func parseQuantity(s string) *resource.Quantity {
	if s == "" {
		return nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return nil
	}
	return &q
}

func identifierFrom(id *setpointv1.MetricIdentifier) autoscalingv2.MetricIdentifier {
	out := autoscalingv2.MetricIdentifier{Name: id.GetName()}
	if s := id.GetSelector(); s != nil {
		out.Selector = &metav1.LabelSelector{MatchLabels: s.GetMatchLabels()}
		for _, e := range s.GetMatchExpressions() {
			out.Selector.MatchExpressions = append(out.Selector.MatchExpressions,
				metav1.LabelSelectorRequirement{Key: e.GetKey(), Operator: metav1.LabelSelectorOperator(e.GetOperator()), Values: e.GetValues()})
		}
	}
	return out
}

// explain shortens the API's explanation for the status and derives the
// rescale reason the HPA puts in its SuccessfulRescale Event.
func explain(e *setpointv1.Explanation, desired int32) (v1alpha1.Explanation, string) {
	out := v1alpha1.Explanation{Proposal: e.GetProposal()}
	current := e.GetCurrentReplicas()
	var parts []string
	winner := int(e.GetWinner())
	if ms := e.GetMetrics(); winner >= 0 && winner < len(ms) {
		m := ms[winner]
		out.Winner = m.GetName()
		parts = append(parts, fmt.Sprintf("%s proposed %d (%s, ratio %.2f)", m.GetName(), m.GetProposal(), m.GetOutcome(), m.GetRebalancedRatio()))
	} else {
		parts = append(parts, fmt.Sprintf("metrics not used; started from %d", current))
	}
	for _, s := range e.GetSteps() {
		out.Steps = append(out.Steps, v1alpha1.ExplanationStep{Kind: s.GetKind(), From: s.GetFrom(), To: s.GetTo(), Reason: s.GetReason(), Message: s.GetMessage()})
		parts = append(parts, fmt.Sprintf("%s %d→%d (%s)", s.GetKind(), s.GetFrom(), s.GetTo(), s.GetReason()))
	}
	parts = append(parts, fmt.Sprintf("desired %d", desired))
	out.Summary = strings.Join(parts, "; ")

	// The HPA's rescale reasons (pkg/controller/podautoscaler).
	var reason string
	switch {
	case len(e.GetSteps()) > 0 && e.GetSteps()[0].GetKind() == "CurrentAboveMax":
		reason = "Current number of replicas above Spec.MaxReplicas"
	case len(e.GetSteps()) > 0 && e.GetSteps()[0].GetKind() == "CurrentBelowMin":
		reason = "Current number of replicas below Spec.MinReplicas"
	case current == 0 && out.Winner == "":
		reason = "Current number of replicas must be greater than 0"
	case desired > current && out.Winner != "":
		reason = out.Winner + " above target"
	default:
		reason = "All metrics below target"
	}
	return out, reason
}
