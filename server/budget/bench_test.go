package budget

import (
	"fmt"
	"testing"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/proto"
)

// BenchmarkBudgets is the size-budget walk over a Recommend of 10k pods,
// each with a cpu request and a usage sample.
func BenchmarkBudgets(b *testing.B) {
	req := &setpointv1.RecommendRequest{Spec: &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 100}, ResourceMetrics: &setpointv1.ResourceMetrics{}}
	for i := range 10000 { // the server's DefaultMaxPodsPerRequest
		name := fmt.Sprint("pod-", i)
		req.Pods = append(req.Pods, &setpointv1.Pod{Name: name, Phase: "Running", Requests: map[string]string{"cpu": "500m"}})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: name, Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "400m"}}}})
	}
	bg := Budgets{MaxString: DefaultMaxStringBytes, MaxEntries: DefaultMaxListEntries, MaxSpec: DefaultMaxSpecBytes}
	b.ReportAllocs()
	for b.Loop() {
		e := &setpointv1.ValidationError{}
		bg.Check(e, req)
		if len(e.Violations) > 0 {
			b.Fatal(e)
		}
	}
}

// BenchmarkBudgetsRecommend is the size-budget check of an agent's usual
// Recommend (10 pods of two containers, two metrics), with the typed walk
// the server uses (received: knowing the request's size as received, as
// the server does) and with the reflective walk it replaces.
func BenchmarkBudgetsRecommend(b *testing.B) {
	req := &setpointv1.RecommendRequest{
		Target: &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: "web"},
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 40, Metrics: []*setpointv1.MetricSpec{
			{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization"}}},
			{Type: "External", External: &setpointv1.ExternalMetricSource{
				Metric: &setpointv1.MetricIdentifier{Name: "queue", Selector: &setpointv1.LabelSelector{MatchLabels: map[string]string{"queue": "web"}}},
				Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "30"}}},
		}},
		Scale:           &setpointv1.Scale{Replicas: 10, Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}, {Values: []*setpointv1.MetricValue{{Value: "300"}}}},
	}
	for i := range 10 {
		name := fmt.Sprint("web-7d4b9-", i)
		req.Pods = append(req.Pods, &setpointv1.Pod{Name: name, Phase: "Running", Ready: &setpointv1.PodReadyCondition{Status: "True"},
			Containers: []*setpointv1.Container{
				{Name: "app", Requests: map[string]string{"cpu": "500m", "memory": "512Mi"}},
				{Name: "istio-proxy", Requests: map[string]string{"cpu": "100m", "memory": "128Mi"}}}})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: name, Containers: []*setpointv1.ContainerMetrics{
			{Name: "app", Usage: map[string]string{"cpu": "310m", "memory": "277Mi"}},
			{Name: "istio-proxy", Usage: map[string]string{"cpu": "20m", "memory": "60Mi"}}}})
	}
	bg := Budgets{MaxString: DefaultMaxStringBytes, MaxEntries: DefaultMaxListEntries, MaxSpec: DefaultMaxSpecBytes}
	size := int64(proto.Size(req))
	received := func(e *setpointv1.ValidationError, m proto.Message) { bg.CheckReceived(e, m, size) }
	for name, check := range map[string]func(*setpointv1.ValidationError, proto.Message){"received": received, "typed": bg.Check, "walk": bg.checkReflective} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var e setpointv1.ValidationError
			for b.Loop() {
				check(&e, req)
				if len(e.Violations) > 0 {
					b.Fatal(e)
				}
			}
		})
	}
}
