package engine_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/internal/testkit"
)

// The expectations below are derived by hand from upstream's
// replica_calculator.go (GetResourceReplicas, calcPlainMetricReplicas,
// getUsageRatioReplicaCount, Get*PerPodMetricReplicas, groupPods,
// calculateRequests) and metrics/utilization.go; the arithmetic is written
// out in each case's comment.

const (
	cpuName = "cpu resource utilization (percentage of request)"
	memName = "memory resource utilization (percentage of request)"
)

// metricCase is one metric evaluated in one decision: want is the
// explanation of spec metric 0, wantStatus (when set) its current status.
type metricCase struct {
	name       string
	in         engine.Input
	want       engine.MetricExplanation
	wantStatus *engine.MetricStatus
}

func runMetricCases(t *testing.T, cases []metricCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(t, tc.in, engine.History{})
			if len(d.Explanation.Metrics) == 0 {
				t.Fatalf("metrics not evaluated; explanation %+v", d.Explanation)
			}
			if diff := cmp.Diff(tc.want, d.Explanation.Metrics[0]); diff != "" {
				t.Errorf("metric explanation (-want +got):\n%s", diff)
			}
			if tc.wantStatus != nil {
				if diff := cmp.Diff(*tc.wantStatus, d.Status.CurrentMetrics[0]); diff != "" {
					t.Errorf("metric status (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// cpuInput is a cpu-utilization input with the given pods and samples.
func cpuInput(current, target int32, pods []engine.Pod, samples ...engine.PodUsage) engine.Input {
	in := input(current, cpuUtilization(target))
	in.Pods = pods
	in.ResourceMetrics.Pods = samples
	return in
}

func withBehavior(in engine.Input, up, down float64) engine.Input {
	in.Spec.Behavior = behavior()
	in.Spec.Behavior.ScaleUp.Tolerance = up
	in.Spec.Behavior.ScaleDown.Tolerance = down
	return in
}

func withSettingsTolerance(in engine.Input, tol float64) engine.Input {
	in.Settings.Tolerance = tol
	return in
}

func TestResourceUtilization(t *testing.T) {
	p := func(names ...string) []engine.Pod {
		var out []engine.Pod
		for _, n := range names {
			out = append(out, cpuPod(n, 1000))
		}
		return out
	}
	runMetricCases(t, []metricCase{
		{
			// floor(1360·100/1500) = 90; 90/60 = 1.5; ceil(1.5·3) = 5.
			name: "scale up to ceil of ratio times ready pods",
			in: cpuInput(3, 60, []engine.Pod{cpuPod("a", 500), cpuPod("b", 500), cpuPod("c", 500)},
				cpuUsage("a", 460), cpuUsage("b", 430), cpuUsage("c", 470)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 5,
				Current: 90, Target: 60, Ratio: 1.5, RebalancedRatio: 1.5, ReadyPods: 3},
			wantStatus: &engine.MetricStatus{Type: engine.ResourceSource, Resource: "cpu",
				AverageUtilization: testkit.Ptr[int32](90), AverageValue: &engine.Quantity{Milli: 1360 / 3, Format: engine.DecimalSI}},
		},
		{
			// 2000·100/3000 = 66.67, truncated to 66; 66/60 = 1.1 is within
			// tolerance (66.67/60 = 1.11 would not be).
			name: "utilization is truncated to an integer percent",
			in: cpuInput(3, 60, p("a", "b", "c"),
				cpuUsage("a", 667), cpuUsage("b", 667), cpuUsage("c", 666)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeWithinTolerance, Proposal: 3,
				Current: 66, Target: 60, Ratio: 66.0 / 60, RebalancedRatio: 66.0 / 60, ReadyPods: 3},
			wantStatus: &engine.MetricStatus{Type: engine.ResourceSource, Resource: "cpu",
				AverageUtilization: testkit.Ptr[int32](66), AverageValue: &engine.Quantity{Milli: 666, Format: engine.DecimalSI}},
		},
		{
			// 55/50 = 1.1 = 1 + tolerance: inclusive bound, no change.
			name: "ratio exactly 1+tolerance holds",
			in:   cpuInput(2, 50, p("a", "b"), cpuUsage("a", 550), cpuUsage("b", 550)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeWithinTolerance, Proposal: 2,
				Current: 55, Target: 50, Ratio: 55.0 / 50, RebalancedRatio: 55.0 / 50, ReadyPods: 2},
		},
		{
			// 45/50 = 0.9 = 1 - tolerance.
			name: "ratio exactly 1-tolerance holds",
			in:   cpuInput(2, 50, p("a", "b"), cpuUsage("a", 450), cpuUsage("b", 450)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeWithinTolerance, Proposal: 2,
				Current: 45, Target: 50, Ratio: 0.9, RebalancedRatio: 0.9, ReadyPods: 2},
		},
		{
			// 56/50 = 1.12; ceil(1.12·2) = 3.
			name: "ratio just above 1+tolerance scales",
			in:   cpuInput(2, 50, p("a", "b"), cpuUsage("a", 560), cpuUsage("b", 560)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 3,
				Current: 56, Target: 50, Ratio: 1.12, RebalancedRatio: 1.12, ReadyPods: 2},
		},
		{
			// 30/50 = 0.6; ceil(0.6·4) = 3.
			name: "scale down",
			in: cpuInput(4, 50, p("a", "b", "c", "d"),
				cpuUsage("a", 300), cpuUsage("b", 300), cpuUsage("c", 300), cpuUsage("d", 300)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 3,
				Current: 30, Target: 50, Ratio: 0.6, RebalancedRatio: 0.6, ReadyPods: 4},
		},
		{
			// 75/50 = 1.5 <= 1 + 0.5.
			name: "behavior scale-up tolerance",
			in:   withBehavior(cpuInput(2, 50, p("a", "b"), cpuUsage("a", 750), cpuUsage("b", 750)), 0.5, 0.1),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeWithinTolerance, Proposal: 2,
				Current: 75, Target: 50, Ratio: 1.5, RebalancedRatio: 1.5, ReadyPods: 2},
		},
		{
			// 45/50 = 0.9 < 1 - 0.05; ceil(0.9·10) = 9.
			name: "behavior scale-down tolerance",
			in: withBehavior(cpuInput(10, 50, p("a", "b", "c", "d", "e", "f", "g", "h", "i", "j"),
				cpuUsage("a", 450), cpuUsage("b", 450), cpuUsage("c", 450), cpuUsage("d", 450), cpuUsage("e", 450),
				cpuUsage("f", 450), cpuUsage("g", 450), cpuUsage("h", 450), cpuUsage("i", 450), cpuUsage("j", 450)), 0.5, 0.05),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 9,
				Current: 45, Target: 50, Ratio: 0.9, RebalancedRatio: 0.9, ReadyPods: 10},
		},
		{
			// 60/50 = 1.2: the behavior's 0.1 applies, not the settings' 0.5.
			name: "settings tolerance unused with a behavior",
			in: withSettingsTolerance(withBehavior(cpuInput(2, 50, p("a", "b"),
				cpuUsage("a", 600), cpuUsage("b", 600)), 0.1, 0.1), 0.5),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 3,
				Current: 60, Target: 50, Ratio: 1.2, RebalancedRatio: 1.2, ReadyPods: 2},
		},
		{
			// 60/50 = 1.2 <= 1 + 0.5 (settings, no behavior).
			name: "settings tolerance without a behavior",
			in: withSettingsTolerance(cpuInput(2, 50, p("a", "b"),
				cpuUsage("a", 600), cpuUsage("b", 600)), 0.5),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeWithinTolerance, Proposal: 2,
				Current: 60, Target: 50, Ratio: 1.2, RebalancedRatio: 1.2, ReadyPods: 2},
		},
		{
			// d has no sample: ratio 10/50 = 0.2 < 1, so d counts at
			// max(100, 50)% of 1000m: floor(1300·100/4000) = 32; 0.64;
			// ceil(0.64·4) = 3. The status keeps the raw 10%.
			name: "missing pod at 100% of its request on scale-down",
			in: cpuInput(4, 50, p("a", "b", "c", "d"),
				cpuUsage("a", 100), cpuUsage("b", 100), cpuUsage("c", 100)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeRebalanced, Proposal: 3,
				Current: 10, Target: 50, Ratio: 0.2, RebalancedRatio: 0.64, ReadyPods: 3, MissingPods: 1},
			wantStatus: &engine.MetricStatus{Type: engine.ResourceSource, Resource: "cpu",
				AverageUtilization: testkit.Ptr[int32](10), AverageValue: &engine.Quantity{Milli: 100, Format: engine.DecimalSI}},
		},
		{
			// target 200%: missing pods count at 200% of 1000m.
			// 200·100/2000 = 10; 10/200 = 0.05; (200+4000)·100/4000 = 105;
			// 105/200 = 0.525; ceil(0.525·4) = 3 (at 100% it would be 2).
			name: "missing pod at the target utilization above 100% on scale-down",
			in:   cpuInput(4, 200, p("a", "b", "c", "d"), cpuUsage("a", 100), cpuUsage("b", 100)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeRebalanced, Proposal: 3,
				Current: 10, Target: 200, Ratio: 0.05, RebalancedRatio: 0.525, ReadyPods: 2, MissingPods: 2},
		},
		{
			// 100/50 = 2; c counts 0: 2000·100/3000 = 66; 1.32; ceil(3.96) = 4.
			name: "missing pod at 0 on scale-up",
			in:   cpuInput(3, 50, p("a", "b", "c"), cpuUsage("a", 1000), cpuUsage("b", 1000)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeRebalanced, Proposal: 4,
				Current: 100, Target: 50, Ratio: 2, RebalancedRatio: 1.32, ReadyPods: 2, MissingPods: 1},
		},
		{
			// 40/50 = 0.8; b at 1000m: 1400·100/2000 = 70; 1.4 > 1 flips.
			name: "rebalancing that flips the direction holds",
			in:   cpuInput(2, 50, p("a", "b"), cpuUsage("a", 400)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeRebalanceHeld, Proposal: 2,
				Current: 40, Target: 50, Ratio: 0.8, RebalancedRatio: 1.4, ReadyPods: 1, MissingPods: 1},
		},
		{
			// 80/100 = 0.8; b at 1000m: 1800·100/2000 = 90; 0.9 within.
			name: "rebalancing into tolerance holds",
			in:   cpuInput(2, 100, p("a", "b"), cpuUsage("a", 800)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeRebalanceHeld, Proposal: 2,
				Current: 80, Target: 100, Ratio: 0.8, RebalancedRatio: 0.9, ReadyPods: 1, MissingPods: 1},
		},
		{
			// As the first missing case but current is 2: ceil(0.64·4) = 3
			// would raise the count on a scale-down.
			name: "rebalanced scale-down above current holds",
			in: cpuInput(2, 50, p("a", "b", "c", "d"),
				cpuUsage("a", 100), cpuUsage("b", 100), cpuUsage("c", 100)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeRebalanceHeld, Proposal: 2,
				Current: 10, Target: 50, Ratio: 0.2, RebalancedRatio: 0.64, ReadyPods: 3, MissingPods: 1},
		},
		{
			// ceil(1.32·3) = 4 would lower 10 on a scale-up.
			name: "rebalanced scale-up below current holds",
			in:   cpuInput(10, 50, p("a", "b", "c"), cpuUsage("a", 1000), cpuUsage("b", 1000)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeRebalanceHeld, Proposal: 10,
				Current: 100, Target: 50, Ratio: 2, RebalancedRatio: 1.32, ReadyPods: 2, MissingPods: 1},
		},
		{
			// c is Pending (its sample is dropped): 2; c at 0: 66; 1.32; 4.
			name: "unready pod at 0 on scale-up",
			in: cpuInput(3, 50, []engine.Pod{cpuPod("a", 1000), cpuPod("b", 1000), cpuPod("c", 1000, phase(engine.PodPending))},
				cpuUsage("a", 1000), cpuUsage("b", 1000), cpuUsage("c", 1000)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeRebalanced, Proposal: 4,
				Current: 100, Target: 50, Ratio: 2, RebalancedRatio: 1.32, ReadyPods: 2, UnreadyPods: 1},
		},
		{
			// 10/50 = 0.2 from a and b only; ceil(0.2·2) = 1.
			name: "unready pod left out on scale-down",
			in: cpuInput(3, 50, []engine.Pod{cpuPod("a", 1000), cpuPod("b", 1000), cpuPod("c", 1000, phase(engine.PodPending))},
				cpuUsage("a", 100), cpuUsage("b", 100), cpuUsage("c", 1000)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 1,
				Current: 10, Target: 50, Ratio: 0.2, RebalancedRatio: 0.2, ReadyPods: 2, UnreadyPods: 1},
		},
		{
			// b (Failed) and c (deleting) are ignored with their samples:
			// 100/50 = 2 from a alone; ceil(2·1) = 2.
			name: "failed and deleting pods ignored",
			in: cpuInput(3, 50, []engine.Pod{cpuPod("a", 1000), cpuPod("b", 1000, phase(engine.PodFailed)), cpuPod("c", 1000, deleting())},
				cpuUsage("a", 1000), cpuUsage("b", 0), cpuUsage("c", 0)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 2,
				Current: 100, Target: 50, Ratio: 2, RebalancedRatio: 2, ReadyPods: 1, IgnoredPods: 2},
		},
		{
			// ghost is not a listed pod: it has no request and is skipped.
			// 1000·100/1000 = 100; 2; ceil(2·1) = 2; average 1000 (1 entry).
			name: "extraneous pod samples ignored for utilization",
			in:   cpuInput(1, 50, p("a"), cpuUsage("a", 1000), cpuUsage("ghost", 5000)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 2,
				Current: 100, Target: 50, Ratio: 2, RebalancedRatio: 2, ReadyPods: 1},
			wantStatus: &engine.MetricStatus{Type: engine.ResourceSource, Resource: "cpu",
				AverageUtilization: testkit.Ptr[int32](100), AverageValue: &engine.Quantity{Milli: 1000, Format: engine.DecimalSI}},
		},
		{
			// b has no Ready condition and no start time: for memory that
			// does not matter. 2000·100/2000 = 100; 2; ceil(2·2) = 4.
			name: "memory ignores readiness",
			in: func() engine.Input {
				in := input(2, resourceUtilization("memory", 50))
				in.Pods = []engine.Pod{pod("a", map[string]int64{"memory": 1000}),
					pod("b", map[string]int64{"memory": 1000}, noReadyCondition(), noStartTime())}
				in.ResourceMetrics.Pods = []engine.PodUsage{usage("a", map[string]int64{"memory": 1000}),
					usage("b", map[string]int64{"memory": 1000})}
				return in
			}(),
			want: engine.MetricExplanation{Name: memName, Outcome: engine.OutcomeScaled, Proposal: 4,
				Current: 100, Target: 50, Ratio: 2, RebalancedRatio: 2, ReadyPods: 2},
			wantStatus: &engine.MetricStatus{Type: engine.ResourceSource, Resource: "memory",
				AverageUtilization: testkit.Ptr[int32](100), AverageValue: &engine.Quantity{Milli: 1000, Format: engine.BinarySI}},
		},
		{
			// Request 300m + sidecar 200m = 500m; usage 500m: 100%; 2;
			// ceil(2·1) = 2 (without the sidecar's request: 166%, 4).
			name: "sidecar requests counted",
			in: cpuInput(1, 50, []engine.Pod{cpuPod("a", 0, containers(
				engine.Container{Name: "app", Requests: engine.ResourceListOf(map[string]int64{"cpu": 300})},
				engine.Container{Name: "proxy", Requests: engine.ResourceListOf(map[string]int64{"cpu": 200})}))},
				cpuUsage("a", 0, usageContainers(
					engine.ContainerUsage{Name: "app", Usage: engine.ResourceListOf(map[string]int64{"cpu": 300})},
					engine.ContainerUsage{Name: "proxy", Usage: engine.ResourceListOf(map[string]int64{"cpu": 200})}))),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 2,
				Current: 100, Target: 50, Ratio: 2, RebalancedRatio: 2, ReadyPods: 1},
		},
		{
			// Pod-level 2000m beats the container's 500m: 1000/2000 = 50%; 1.
			name: "pod-level request takes precedence for Resource",
			in: cpuInput(1, 50, []engine.Pod{cpuPod("a", 500, podRequests(map[string]int64{"cpu": 2000, "memory": 1 << 30}))},
				cpuUsage("a", 1000)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeWithinTolerance, Proposal: 1,
				Current: 50, Target: 50, Ratio: 1, RebalancedRatio: 1, ReadyPods: 1},
		},
		{
			// The container's 500m, not the pod's 2000m: 200%; 4; ceil(4·1) = 4.
			name: "container request used by ContainerResource despite pod-level requests",
			in: func() engine.Input {
				in := input(1, containerUtilization("cpu", "app", 50))
				in.Pods = []engine.Pod{cpuPod("a", 500, podRequests(map[string]int64{"cpu": 2000, "memory": 1 << 30}))}
				in.ResourceMetrics.Pods = []engine.PodUsage{cpuUsage("a", 1000)}
				return in
			}(),
			want: engine.MetricExplanation{Name: "cpu container resource utilization (percentage of request)",
				Outcome: engine.OutcomeScaled, Proposal: 4, Current: 200, Target: 50, Ratio: 4, RebalancedRatio: 4, ReadyPods: 1},
			wantStatus: &engine.MetricStatus{Type: engine.ContainerResourceSource, Resource: "cpu", Container: "app",
				AverageUtilization: testkit.Ptr[int32](200), AverageValue: &engine.Quantity{Milli: 1000, Format: engine.DecimalSI}},
		},
		{
			// Pod-level requests of a resource Kubernetes does not support
			// at pod level do not switch to pod-level: 1000/500 = 200%.
			name: "pod-level requests of unsupported resources ignored",
			in: cpuInput(1, 50, []engine.Pod{cpuPod("a", 500, podRequests(map[string]int64{"example.com/gpu": 1000}))},
				cpuUsage("a", 1000)),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 4,
				Current: 200, Target: 50, Ratio: 4, RebalancedRatio: 4, ReadyPods: 1},
		},
		{
			// A sample lacking cpu in one container is no sample: missing.
			// a alone: 100%; 2; b at 0: 50%; 1.0 within: held.
			name: "sample with a container lacking the resource is missing",
			in: cpuInput(2, 50, p("a", "b"), cpuUsage("a", 1000),
				cpuUsage("b", 1000, usageContainers(
					engine.ContainerUsage{Name: "app", Usage: engine.ResourceListOf(map[string]int64{"cpu": 1000})},
					engine.ContainerUsage{Name: "proxy", Usage: engine.ResourceListOf(map[string]int64{"memory": 1})}))),
			want: engine.MetricExplanation{Name: cpuName, Outcome: engine.OutcomeRebalanceHeld, Proposal: 2,
				Current: 100, Target: 50, Ratio: 2, RebalancedRatio: 1, ReadyPods: 1, MissingPods: 1},
		},
	})
}

func TestResourceMetricErrors(t *testing.T) {
	cases := []struct {
		name       string
		in         engine.Input
		wantReason string
		wantErr    string // a substring of the metric's error
	}{
		{
			name:       "missing container request",
			in:         cpuInput(2, 50, []engine.Pod{cpuPod("a", 1000), pod("b", map[string]int64{"memory": 1})}, cpuUsage("a", 1000), cpuUsage("b", 1000)),
			wantReason: "FailedGetResourceMetric",
			wantErr:    "missing request for cpu in container app of Pod b",
		},
		{
			name: "missing named container",
			in: func() engine.Input {
				in := input(1, containerUtilization("cpu", "proxy", 50))
				in.Pods = []engine.Pod{cpuPod("a", 1000)}
				in.ResourceMetrics.Pods = []engine.PodUsage{usage("a", map[string]int64{"cpu": 1}, usageContainers(
					engine.ContainerUsage{Name: "proxy", Usage: engine.ResourceListOf(map[string]int64{"cpu": 1})}))}
				return in
			}(),
			wantReason: "FailedGetContainerResourceMetric",
			wantErr:    "container proxy not found in Pod a",
		},
		{
			name: "resource metrics API failed",
			in: func() engine.Input {
				in := cpuInput(1, 50, []engine.Pod{cpuPod("a", 1)})
				in.ResourceMetrics.Err = "boom"
				return in
			}(),
			wantReason: "FailedGetResourceMetric",
			wantErr:    "unable to fetch metrics from resource metrics API: boom",
		},
		{
			name:       "no samples",
			in:         cpuInput(1, 50, []engine.Pod{cpuPod("a", 1)}),
			wantReason: "FailedGetResourceMetric",
			wantErr:    "no metrics returned from resource metrics API",
		},
		{
			name:       "no pods",
			in:         cpuInput(1, 50, nil, cpuUsage("a", 1)),
			wantReason: "FailedGetResourceMetric",
			wantErr:    "no pods returned by selector",
		},
		{
			name:       "only unready pods",
			in:         cpuInput(1, 50, []engine.Pod{cpuPod("a", 1, noReadyCondition())}, cpuUsage("a", 1)),
			wantReason: "FailedGetResourceMetric",
			wantErr:    "did not receive metrics for targeted pods (pods might be unready)",
		},
		{
			name:       "no sample matches a pod",
			in:         cpuInput(1, 50, []engine.Pod{cpuPod("a", 1)}, cpuUsage("ghost", 1)),
			wantReason: "FailedGetResourceMetric",
			// a is missing, ghost has no request.
			wantErr: "no metrics returned matched known pods",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Status.DesiredReplicas = 7
			d := decide(t, tc.in, engine.History{})
			if d.Rescale || d.DesiredReplicas != 7 {
				t.Errorf("Rescale, DesiredReplicas = %v, %d; want false, 7 (kept from the status)", d.Rescale, d.DesiredReplicas)
			}
			got := condition(d.Status, engine.ScalingActive)
			if got == nil || got.Status != engine.ConditionFalse || got.Reason != tc.wantReason {
				t.Errorf("ScalingActive = %+v; want False/%s", got, tc.wantReason)
			}
			m := d.Explanation.Metrics[0]
			if m.Outcome != engine.OutcomeFailed || !strings.Contains(m.Err, tc.wantErr) {
				t.Errorf("metric = %s %q; want Failed containing %q", m.Outcome, m.Err, tc.wantErr)
			}
			if !strings.Contains(d.Error, tc.wantErr) {
				t.Errorf("Error = %q; want it to contain %q", d.Error, tc.wantErr)
			}
		})
	}
}

// TestCPUReadiness covers groupPods' cpu-only readiness rules. Pod a is
// ready at 100% of its request; pod b, at 100% too, varies. Target 50%:
// with b ready, 100/50 = 2 and ceil(2·2) = 4; with b unready, a alone gives
// 2, b counts 0 on the scale-up: 50%, ratio 1, held at 2.
func TestCPUReadiness(t *testing.T) {
	const (
		counted = int32(4)
		unready = int32(2)
	)
	cases := []struct {
		name       string
		b          []podOpt
		sample     []usageOpt
		want       int32
		pendingToo bool // unready for memory too
	}{
		{name: "ready after initialization", want: counted},
		{name: "pending", b: []podOpt{phase(engine.PodPending)}, want: unready, pendingToo: true},
		{name: "no Ready condition", b: []podOpt{noReadyCondition()}, want: unready},
		{name: "no start time", b: []podOpt{noStartTime()}, want: unready},
		{name: "initializing with Ready=False",
			b: []podOpt{startedAgo(time.Minute), ready(engine.ConditionFalse, 50*time.Second)}, want: unready},
		{name: "initializing with a sample younger than transition+window",
			b: []podOpt{startedAgo(time.Minute), ready(engine.ConditionTrue, 20*time.Second)}, want: unready},
		{name: "initializing with a sample a full window after the transition",
			b: []podOpt{startedAgo(2 * time.Minute), ready(engine.ConditionTrue, 50*time.Second)}, want: counted},
		{name: "initializing with a sample exactly at transition+window",
			b: []podOpt{startedAgo(2 * time.Minute), ready(engine.ConditionTrue, 40*time.Second)}, want: counted},
		{name: "initializing with Ready=Unknown and a young sample",
			b: []podOpt{startedAgo(time.Minute), ready(engine.ConditionUnknown, 20*time.Second)}, want: unready},
		{name: "one second inside the initialization period",
			b: []podOpt{startedAgo(5*time.Minute - time.Second), ready(engine.ConditionTrue, 20*time.Second)}, want: unready},
		{name: "initialization period just over",
			b: []podOpt{startedAgo(5 * time.Minute), ready(engine.ConditionTrue, 20*time.Second)}, want: counted},
		{name: "unready and never ready within the readiness delay",
			b: []podOpt{startedAgo(10 * time.Minute), ready(engine.ConditionFalse, 10*time.Minute-10*time.Second)}, want: unready},
		{name: "unready since after the readiness delay",
			b: []podOpt{startedAgo(10 * time.Minute), ready(engine.ConditionFalse, time.Minute)}, want: counted},
		{name: "unready since exactly the readiness delay",
			b: []podOpt{startedAgo(10 * time.Minute), ready(engine.ConditionFalse, 10*time.Minute-30*time.Second)}, want: counted},
		{name: "Ready=Unknown after initialization",
			b: []podOpt{ready(engine.ConditionUnknown, 10*time.Second)}, want: counted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := cpuInput(2, 50, []engine.Pod{cpuPod("a", 1000), cpuPod("b", 1000, tc.b...)},
				cpuUsage("a", 1000), cpuUsage("b", 1000, tc.sample...))
			d := decide(t, in, engine.History{})
			m := d.Explanation.Metrics[0]
			if m.Proposal != tc.want {
				t.Errorf("proposal = %d (ready %d, unready %d); want %d", m.Proposal, m.ReadyPods, m.UnreadyPods, tc.want)
			}
			// The same pods under a memory metric are all counted.
			mem := input(2, resourceUtilization("memory", 50))
			mem.Pods = []engine.Pod{pod("a", map[string]int64{"memory": 1000}), pod("b", map[string]int64{"memory": 1000}, tc.b...)}
			mem.ResourceMetrics.Pods = []engine.PodUsage{usage("a", map[string]int64{"memory": 1000}),
				usage("b", map[string]int64{"memory": 1000}, tc.sample...)}
			md := decide(t, mem, engine.History{})
			want := counted
			if tc.pendingToo {
				want = unready // Pending is unready for every metric.
			}
			if got := md.Explanation.Metrics[0].Proposal; got != want {
				t.Errorf("memory proposal = %d; want %d", got, want)
			}
		})
	}
}

func TestPodsMetric(t *testing.T) {
	pods := func(in engine.Input, names ...string) engine.Input {
		for _, n := range names {
			in.Pods = append(in.Pods, cpuPod(n, 1000))
		}
		return in
	}
	with := func(in engine.Input, o engine.Observation) engine.Input {
		in.Observations[0] = o
		return in
	}
	const name = "pods metric qps"
	runMetricCases(t, []metricCase{
		{
			// floor(3/2) = 1; 1/1 = 1: within (1.5 would scale).
			name: "average is floored",
			in:   with(pods(input(2, podsMetric("qps", 1)), "a", "b"), podValues("a", 1, "b", 2)),
			want: engine.MetricExplanation{Name: name, Outcome: engine.OutcomeWithinTolerance, Proposal: 2,
				Current: 1, Target: 1, Ratio: 1, RebalancedRatio: 1, ReadyPods: 2},
			wantStatus: &engine.MetricStatus{Type: engine.PodsSource, Metric: engine.MetricIdentifier{Name: "qps"},
				AverageValue: &engine.Quantity{Milli: 1, Format: engine.DecimalSI}},
		},
		{
			// Unlike utilization, values of unlisted pods are averaged:
			// 600/3 = 200; 2; ceil(2·2) = 4.
			name: "values of unlisted pods averaged",
			in:   with(pods(input(2, podsMetric("qps", 100)), "a", "b"), podValues("a", 100, "b", 100, "ghost", 400)),
			want: engine.MetricExplanation{Name: name, Outcome: engine.OutcomeScaled, Proposal: 4,
				Current: 200, Target: 100, Ratio: 2, RebalancedRatio: 2, ReadyPods: 2},
		},
		{
			// 60/2 = 30; 0.3; c at the target 100: 160/3 = 53; 0.53;
			// ceil(1.59) = 2. The status keeps 30.
			name: "missing pod at the target on scale-down",
			in:   with(pods(input(3, podsMetric("qps", 100)), "a", "b", "c"), podValues("a", 20, "b", 40)),
			want: engine.MetricExplanation{Name: name, Outcome: engine.OutcomeRebalanced, Proposal: 2,
				Current: 30, Target: 100, Ratio: 0.3, RebalancedRatio: 0.53, ReadyPods: 2, MissingPods: 1},
			wantStatus: &engine.MetricStatus{Type: engine.PodsSource, Metric: engine.MetricIdentifier{Name: "qps"},
				AverageValue: &engine.Quantity{Milli: 30, Format: engine.DecimalSI}},
		},
		{
			// 300; 3; c at 0: 600/3 = 200; 2; ceil(6) = 6.
			name: "missing pod at 0 on scale-up",
			in:   with(pods(input(3, podsMetric("qps", 100)), "a", "b", "c"), podValues("a", 300, "b", 300)),
			want: engine.MetricExplanation{Name: name, Outcome: engine.OutcomeRebalanced, Proposal: 6,
				Current: 300, Target: 100, Ratio: 3, RebalancedRatio: 2, ReadyPods: 2, MissingPods: 1},
		},
		{
			// b's readiness does not matter for a Pods metric: 200/100 = 2; 4.
			name: "readiness ignored",
			in: func() engine.Input {
				in := with(input(2, podsMetric("qps", 100)), podValues("a", 200, "b", 200))
				in.Pods = []engine.Pod{cpuPod("a", 1), cpuPod("b", 1, noReadyCondition(), noStartTime())}
				return in
			}(),
			want: engine.MetricExplanation{Name: name, Outcome: engine.OutcomeScaled, Proposal: 4,
				Current: 200, Target: 100, Ratio: 2, RebalancedRatio: 2, ReadyPods: 2},
		},
		{
			// cpu AverageValue: b's readiness matters. a alone: 1000/500 =
			// 2; b at 0: 500; 1: held.
			name: "cpu average value applies readiness",
			in: func() engine.Input {
				in := input(2, resourceAverage("cpu", 500))
				in.Pods = []engine.Pod{cpuPod("a", 1), cpuPod("b", 1, noReadyCondition())}
				in.ResourceMetrics.Pods = []engine.PodUsage{cpuUsage("a", 1000), cpuUsage("b", 1000)}
				return in
			}(),
			want: engine.MetricExplanation{Name: "cpu resource", Outcome: engine.OutcomeRebalanceHeld, Proposal: 2,
				Current: 1000, Target: 500, Ratio: 2, RebalancedRatio: 1, ReadyPods: 1, UnreadyPods: 1},
			wantStatus: &engine.MetricStatus{Type: engine.ResourceSource, Resource: "cpu",
				AverageValue: &engine.Quantity{Milli: 1000, Format: engine.DecimalSI}},
		},
	})
}

func TestObjectAndExternalMetrics(t *testing.T) {
	threePods := []engine.Pod{cpuPod("a", 1), cpuPod("b", 1), cpuPod("c", 1, phase(engine.PodPending))}
	build := func(current, status int32, m engine.MetricSpec, o engine.Observation) engine.Input {
		in := input(current, m)
		in.Scale.StatusReplicas = status
		in.Pods = threePods
		in.Observations[0] = o
		return in
	}
	obj := engine.ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"}
	runMetricCases(t, []metricCase{
		{
			// 3000/1000 = 3 × 2 ready pods (c is Pending) = 6.
			name: "object value scales with ready pods",
			in:   build(3, 3, objectMetric("requests", engine.ValueTarget, 1000), values(3000)),
			want: engine.MetricExplanation{Name: "Ingress metric requests", Outcome: engine.OutcomeScaled, Proposal: 6,
				Current: 3000, Target: 1000, Ratio: 3, RebalancedRatio: 3, ReadyPods: 2},
			wantStatus: &engine.MetricStatus{Type: engine.ObjectSource, Metric: engine.MetricIdentifier{Name: "requests"},
				DescribedObject: obj, Value: &engine.Quantity{Milli: 3000, Format: engine.DecimalSI}},
		},
		{
			name: "object value within tolerance",
			in:   build(3, 3, objectMetric("requests", engine.ValueTarget, 1000), values(1050)),
			want: engine.MetricExplanation{Name: "Ingress metric requests", Outcome: engine.OutcomeWithinTolerance, Proposal: 3,
				Current: 1050, Target: 1000, Ratio: 1.05, RebalancedRatio: 1.05},
		},
		{
			// 10001/(1000·4) = 2.50025; ceil(10001/1000) = 11; the average
			// is ceil(10001/4) = 2501. Upstream names it "external metric".
			name: "object average value over status replicas",
			in:   build(4, 4, objectMetric("requests", engine.AverageValueTarget, 1000), values(10001)),
			want: engine.MetricExplanation{Name: "external metric requests(nil)", Outcome: engine.OutcomeScaled, Proposal: 11,
				Current: 10001, Target: 1000, Ratio: 10001.0 / 4000, RebalancedRatio: 10001.0 / 4000},
			wantStatus: &engine.MetricStatus{Type: engine.ObjectSource, Metric: engine.MetricIdentifier{Name: "requests"},
				DescribedObject: obj, AverageValue: &engine.Quantity{Milli: 2501, Format: engine.DecimalSI}},
		},
		{
			// 4200/4000 = 1.05 within: the proposal is the status replicas
			// (4), not the spec replicas (5).
			name: "object average value within tolerance proposes status replicas",
			in:   build(5, 4, objectMetric("requests", engine.AverageValueTarget, 1000), values(4200)),
			want: engine.MetricExplanation{Name: "external metric requests(nil)", Outcome: engine.OutcomeWithinTolerance, Proposal: 4,
				Current: 4200, Target: 1000, Ratio: 1.05, RebalancedRatio: 1.05},
		},
		{
			// 1000+2000+3000 = 6000; 6000/2000 = 3 × 2 ready pods = 6.
			name: "external value sums series",
			in:   build(2, 2, externalMetric("queue", engine.ValueTarget, 2000), values(1000, 2000, 3000)),
			want: engine.MetricExplanation{Name: "external metric queue(nil)", Outcome: engine.OutcomeScaled, Proposal: 6,
				Current: 6000, Target: 2000, Ratio: 3, RebalancedRatio: 3, ReadyPods: 2},
			wantStatus: &engine.MetricStatus{Type: engine.ExternalSource, Metric: engine.MetricIdentifier{Name: "queue"},
				Value: &engine.Quantity{Milli: 6000, Format: engine.DecimalSI}},
		},
		{
			// The sum saturates at MaxInt64; ratio × 2 exceeds MaxInt32, so
			// the proposal saturates at MaxInt32.
			name: "external value saturates",
			in:   build(2, 2, externalMetric("queue", engine.ValueTarget, 1000), values(math.MaxInt64, 1)),
			want: engine.MetricExplanation{Name: "external metric queue(nil)", Outcome: engine.OutcomeScaled, Proposal: math.MaxInt32,
				Current: math.MaxInt64, Target: 1000, Ratio: float64(math.MaxInt64) / 1000, RebalancedRatio: float64(math.MaxInt64) / 1000, ReadyPods: 2},
			wantStatus: &engine.MetricStatus{Type: engine.ExternalSource, Metric: engine.MetricIdentifier{Name: "queue"},
				Value: &engine.Quantity{Milli: math.MaxInt64, Format: engine.DecimalSI}},
		},
		{
			// 2500/(500·2) = 2.5; ceil(2500/500) = 5; average ceil(2500/2) = 1250.
			name: "external average value sums series",
			in:   build(2, 2, externalMetric("queue", engine.AverageValueTarget, 500), values(1000, 1500)),
			want: engine.MetricExplanation{Name: "external metric queue(nil)", Outcome: engine.OutcomeScaled, Proposal: 5,
				Current: 2500, Target: 500, Ratio: 2.5, RebalancedRatio: 2.5},
			wantStatus: &engine.MetricStatus{Type: engine.ExternalSource, Metric: engine.MetricIdentifier{Name: "queue"},
				AverageValue: &engine.Quantity{Milli: 1250, Format: engine.DecimalSI}},
		},
		{
			// MaxInt64 + MaxInt64 overflows: the total saturates at MaxInt64,
			// the proposal at MaxInt32 and the reported average at MaxInt64.
			name: "external average value saturates",
			in:   build(2, 2, externalMetric("queue", engine.AverageValueTarget, 1000), values(math.MaxInt64, math.MaxInt64)),
			want: engine.MetricExplanation{Name: "external metric queue(nil)", Outcome: engine.OutcomeScaled, Proposal: math.MaxInt32,
				Current: math.MaxInt64, Target: 1000, Ratio: float64(math.MaxInt64) / 2000, RebalancedRatio: float64(math.MaxInt64) / 2000},
			wantStatus: &engine.MetricStatus{Type: engine.ExternalSource, Metric: engine.MetricIdentifier{Name: "queue"},
				AverageValue: &engine.Quantity{Milli: math.MaxInt64, Format: engine.DecimalSI}},
		},
	})
}
