package server

import (
	"fmt"
	"testing"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// BenchmarkBudgets is the size-budget walk over a Recommend of 10k pods,
// each with a cpu request and a usage sample.
func BenchmarkBudgets(b *testing.B) {
	req := &setpointv1.RecommendRequest{Spec: &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 100}, ResourceMetrics: &setpointv1.ResourceMetrics{}}
	for i := range DefaultMaxPodsPerRequest {
		name := fmt.Sprint("pod-", i)
		req.Pods = append(req.Pods, &setpointv1.Pod{Name: name, Phase: "Running", Requests: map[string]string{"cpu": "500m"}})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: name, Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "400m"}}}})
	}
	bg := budgets{maxString: DefaultMaxStringBytes, maxEntries: DefaultMaxListEntries, maxSpec: DefaultMaxSpecBytes}
	b.ReportAllocs()
	for b.Loop() {
		e := &setpointv1.ValidationError{}
		bg.check(e, req)
		if len(e.Violations) > 0 {
			b.Fatal(e)
		}
	}
}
