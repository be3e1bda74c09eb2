package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
)

// TestPodLevelRequestsOfAnotherResource pins pod-level requests that name
// another resource than the metric's.
//
// A pod with pod-level requests for cpu only (spec.resources.requests:
// {cpu: 1}) and a memory request on its container, under a memory
// utilization metric. Upstream's calculateRequests
// (replica_calculator.go) takes the pod-level path because
// IsPodLevelRequestsSet is true, and calculatePodLevelRequests reads the
// resource from resourcehelpers.PodRequests(pod, {}), which starts from
// AggregateContainerRequests and only overrides the resources set at pod
// level (component-helpers resource/helpers.go, PodRequests and
// applyPodLevelResources). So memory's request is the containers' 1000m:
// 2000·100/1000 = 200%; 200/100 = 2; ceil(2·1) = 2.
func TestPodLevelRequestsOfAnotherResource(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource string
		podLevel map[string]int64
	}{
		{name: "pod-level cpu, memory metric", resource: "memory", podLevel: map[string]int64{"cpu": 1000}},
		{name: "pod-level memory, cpu metric", resource: "cpu", podLevel: map[string]int64{"memory": 1 << 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(1, resourceUtilization(tc.resource, 100))
			in.Pods = []engine.Pod{pod("a", map[string]int64{tc.resource: 1000}, podRequests(tc.podLevel))}
			in.ResourceMetrics.Pods = []engine.PodUsage{usage("a", map[string]int64{tc.resource: 2000})}
			d := decide(t, in, engine.History{})
			want := engine.MetricExplanation{Name: tc.resource + " resource utilization (percentage of request)",
				Outcome: engine.OutcomeScaled, Proposal: 2, Current: 200, Target: 100, Ratio: 2, RebalancedRatio: 2, ReadyPods: 1}
			if diff := cmp.Diff(want, d.Explanation.Metrics[0]); diff != "" {
				t.Errorf("metric explanation (-want +got):\n%s", diff)
			}
		})
	}
}
