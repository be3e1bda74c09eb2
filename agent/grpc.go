package agent

import (
	"context"
	"fmt"
	"google.golang.org/protobuf/types/known/durationpb"
	"slices"
	"strings"

	"google.golang.org/grpc"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/hpa"
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

// recommendRequest converts what the agent read into the API's request
// through the one Kubernetes → request conversion (package hpa), which
// applies the API server's defaults to the Autoscaler's spec (an empty
// metrics list is 80% cpu utilization, as for an HPA).
func recommendRequest(req *Request) *setpointv1.RecommendRequest {
	r := &hpa.Reading{
		Target: targetKey(req.Target),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: req.Spec.ScaleTargetRef,
			MinReplicas:    req.Spec.MinReplicas,
			MaxReplicas:    req.Spec.MaxReplicas,
			Metrics:        req.Spec.Metrics,
			Behavior:       req.Spec.Behavior,
		},
		Settings:        req.Settings,
		Scale:           req.Scale,
		Pods:            req.Pods,
		ResourceMetrics: req.ResourceMetrics,
		Metrics:         req.Metrics,
	}
	out := hpa.Request(r)
	setAhead(out.Spec, &req.Spec)
	if req.PodStartup.Pods > 0 {
		out.PodStartup = durationpb.New(req.PodStartup.Time)
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
		rec.Metrics = append(rec.Metrics, MetricProposal{Proposal: m.GetProposal(), Failed: m.GetOutcome() == "Failed", Err: m.GetError()})
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

	// The HPA's rescale reasons (pkg/controller/podautoscaler,
	// reconcileAutoscaler): out of range, the range's bound; otherwise the
	// metrics' proposal before stabilization and policies against the
	// current count — none when they are equal, even if normalization then
	// moved the count (a scale from zero raised to the minimum excepted).
	var reason string
	steps := e.GetSteps()
	switch {
	case len(steps) > 0 && steps[0].GetKind() == "CurrentAboveMax":
		reason = "Current number of replicas above Spec.MaxReplicas"
	case len(steps) > 0 && steps[0].GetKind() == "CurrentBelowMin":
		reason = "Current number of replicas below Spec.MinReplicas"
	case out.Proposal > current:
		reason = out.Winner + " above target"
	case out.Proposal < current:
		reason = "All metrics below target"
	case slices.ContainsFunc(steps, func(s *setpointv1.Step) bool { return s.GetKind() == "MinFromZero" }):
		reason = "Current number of replicas below Spec.MinReplicas"
	}
	return out, reason
}
