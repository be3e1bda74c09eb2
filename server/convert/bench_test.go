package convert_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// benchRequest is a request shaped like setpoint-bench's workload: n pods
// of an app container and a sidecar, each requesting cpu and memory, their
// usage, a cpu utilization metric and an External metric, and a behavior.
func benchRequest(n int) *setpointv1.RecommendRequest {
	req := &setpointv1.RecommendRequest{
		Target: key,
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    testkit.Ptr[int32](1),
			MaxReplicas:    int32(4 * n),
			Metrics: []*setpointv1.MetricSpec{
				{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{Name: "cpu",
					Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: testkit.Ptr[int32](60)}}},
				{Type: "External", External: &setpointv1.ExternalMetricSource{
					Metric: &setpointv1.MetricIdentifier{Name: "queue_messages_ready",
						Selector: &setpointv1.LabelSelector{MatchLabels: map[string]string{"queue": "web"}}},
					Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "30"}}},
			},
			Behavior: &setpointv1.HorizontalPodAutoscalerBehavior{
				ScaleUp: &setpointv1.ScalingRules{Policies: []*setpointv1.ScalingPolicy{
					{Type: "Percent", Value: 100, PeriodSeconds: 15}, {Type: "Pods", Value: 4, PeriodSeconds: 15}}},
			},
		},
		Scale:           &setpointv1.Scale{Replicas: int32(n), StatusReplicas: int32(n), Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations: []*setpointv1.MetricObservation{{}, {Values: []*setpointv1.MetricValue{
			{Value: fmt.Sprint(25 * n), Timestamp: timestamppb.New(t0.Add(-10 * time.Second))}}}},
	}
	started := timestamppb.New(t0.Add(-time.Hour))
	for i := range n {
		pod := fmt.Sprintf("web-7d4b9-%05d", i)
		req.Pods = append(req.Pods, &setpointv1.Pod{
			Name: pod, Phase: "Running", StartTime: started,
			Ready: &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: timestamppb.New(t0.Add(-time.Hour + 20*time.Second))},
			Containers: []*setpointv1.Container{
				{Name: "app", Requests: map[string]string{"cpu": "500m", "memory": "512Mi"}},
				{Name: "istio-proxy", Requests: map[string]string{"cpu": "100m", "memory": "128Mi"}},
			},
		})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{
			Pod: pod, Timestamp: timestamppb.New(t0.Add(-15 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{
				{Name: "app", Usage: map[string]string{"cpu": fmt.Sprintf("%dm", 300+i%200), "memory": "300Mi"}},
				{Name: "istio-proxy", Usage: map[string]string{"cpu": "40m", "memory": "60Mi"}},
			},
		})
	}
	return req
}

// BenchmarkInput converts requests of 10 and 100 pods into the engine's
// input, into new memory and (scratch) into reused memory as Recommend
// does for every call.
func BenchmarkInput(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			req := benchRequest(n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := convert.Input(req, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/scratch", n), func(b *testing.B) {
			req := benchRequest(n)
			var s convert.Scratch
			b.ReportAllocs()
			for b.Loop() {
				if _, err := convert.InputIn(req, t0, &s); err != nil {
					b.Fatal(err)
				}
				s.Reset()
			}
		})
	}
}

// BenchmarkDecision converts the decision made for a request of 10 pods
// into the API's form, as Recommend's response does.
func BenchmarkDecision(b *testing.B) {
	in, err := convert.Input(benchRequest(10), t0)
	if err != nil {
		b.Fatal(err)
	}
	d, err := engine.Decide(in, engine.History{})
	if err != nil {
		b.Fatal(err)
	}
	last := target.LastDecision{ID: "0123456789abcdef", At: t0, Decision: d}
	b.ReportAllocs()
	for b.Loop() {
		convert.Decision(last)
	}
}
