package convert

import (
	"fmt"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// scratchRequest is a valid request of n pods of two containers, with
// their usage and a Pods metric of one value per pod.
func scratchRequest(n int) *setpointv1.RecommendRequest {
	req := &setpointv1.RecommendRequest{
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 10, Metrics: []*setpointv1.MetricSpec{{Type: "Pods",
			Pods: &setpointv1.PodsMetricSource{Metric: &setpointv1.MetricIdentifier{Name: "rps"}, Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "10"}}}}},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	for i := range n {
		name := fmt.Sprint("web-", i)
		req.Pods = append(req.Pods, &setpointv1.Pod{Name: name, Phase: "Running", Ready: &setpointv1.PodReadyCondition{Status: "True"},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "1"}}, {Name: "side", Requests: map[string]string{"memory": "1Mi"}}}})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: name,
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "1"}}}})
		req.Observations[0].Values = append(req.Observations[0].Values, &setpointv1.MetricValue{Pod: name, Value: "3"})
	}
	return req
}

// TestScratchResetClearsWhatWasUsed: after Reset, no array a Scratch keeps
// holds anything of the inputs converted into it (so pooled memory keeps
// no request alive), also when a small request follows a large one, and
// an array over maxScratchEntries is let go.
func TestScratchResetClearsWhatWasUsed(t *testing.T) {
	var s Scratch
	zero := func(when string) {
		t.Helper()
		check := func(name string, n int, isZero func(i int) bool) {
			for i := range n {
				if !isZero(i) {
					t.Fatalf("%s: %s[%d] not cleared", when, name, i)
				}
			}
		}
		check("pods", cap(s.pods), func(i int) bool { return s.pods[:cap(s.pods)][i].Name == "" })
		check("containers", cap(s.containers), func(i int) bool { return s.containers[:cap(s.containers)][i].Name == "" })
		check("requests", cap(s.requests), func(i int) bool { return s.requests[:cap(s.requests)][i].Name == "" })
		check("usages", cap(s.usages), func(i int) bool { return s.usages[:cap(s.usages)][i].Pod == "" })
		check("cusages", cap(s.cusages), func(i int) bool { return s.cusages[:cap(s.cusages)][i].Name == "" })
		check("usage", cap(s.usage), func(i int) bool { return s.usage[:cap(s.usage)][i].Name == "" })
		check("values", cap(s.values), func(i int) bool { return s.values[:cap(s.values)][i].Pod == "" })
		check("readies", cap(s.readies), func(i int) bool { return s.readies[:cap(s.readies)][i].Status == "" })
		check("obs", cap(s.obs), func(i int) bool { return s.obs[:cap(s.obs)][i].Values == nil })
	}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, n := range []int{300, 3, 0, 20, 2000, 5} {
		if _, err := InputIn(scratchRequest(n), now, &s); err != nil {
			t.Fatalf("%d pods: %v", n, err)
		}
		s.Reset()
		zero(fmt.Sprint("after ", n, " pods"))
		if cap(s.containers) > maxScratchEntries {
			t.Errorf("after %d pods: containers' array of %d kept", n, cap(s.containers))
		}
	}
}
