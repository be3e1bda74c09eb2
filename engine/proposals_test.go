package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
)

func schedule(name string, replicas int32) engine.Proposal {
	return engine.Proposal{Name: name, Kind: engine.ProposalSchedule, Replicas: replicas, Explanation: "window active"}
}

func forecast(replicas int32) engine.Proposal {
	return engine.Proposal{Name: "forecast cpu", Kind: engine.ProposalForecast, Replicas: replicas, Explanation: "daily period"}
}

func fallback(replicas int32) engine.Proposal {
	return engine.Proposal{Name: "fallback", Kind: engine.ProposalFallback, Replicas: replicas, Explanation: "metrics failing for 45s"}
}

func TestProposalsMergeByMax(t *testing.T) {
	// 4 pods at 1000m, cpu target 50%: usage 500 is within tolerance (4),
	// usage 750 proposes 6.
	cases := []struct {
		name       string
		usage      int64
		metricsErr bool // the resource metrics API fails
		behavior   bool
		proposals  []engine.Proposal
		status     []engine.Condition
		want       int32
		wantSteps  []engine.Step
		wantActive cond
		fallback   *cond // the FallbackActive condition; nil: absent
	}{
		{
			name: "schedule floor above the metrics", usage: 500,
			proposals: []engine.Proposal{schedule("schedule business-hours", 7)}, want: 7,
			wantSteps:  []engine.Step{{Kind: engine.StepProposal, From: 4, To: 7, Reason: "ScheduleFloor"}},
			wantActive: cond{engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound"},
		},
		{
			name: "schedule floor below the metrics changes nothing", usage: 750,
			proposals: []engine.Proposal{schedule("schedule night", 2)}, want: 6,
			wantActive: cond{engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound"},
		},
		{
			name: "the largest of several proposals wins", usage: 750,
			proposals: []engine.Proposal{schedule("schedule a", 7), forecast(8), schedule("schedule b", 5)}, want: 8,
			wantSteps:  []engine.Step{{Kind: engine.StepProposal, From: 6, To: 8, Reason: "ForecastAhead"}},
			wantActive: cond{engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound"},
		},
		{
			name: "max replicas still bounds a proposal", usage: 500,
			proposals: []engine.Proposal{forecast(500)}, want: 8, // legacy limit max(2×4, 4) = 8
			wantSteps: []engine.Step{
				{Kind: engine.StepProposal, From: 4, To: 500, Reason: "ForecastAhead"},
				{Kind: engine.StepLimited, From: 500, To: 8, Reason: "ScaleUpLimit"},
			},
			wantActive: cond{engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound"},
		},
		{
			name: "behavior policies limit a proposal", usage: 500, behavior: true,
			proposals: []engine.Proposal{schedule("schedule peak", 20)}, want: 8, // Percent 100/15s
			wantSteps: []engine.Step{
				{Kind: engine.StepProposal, From: 4, To: 20, Reason: "ScheduleFloor"},
				{Kind: engine.StepLimited, From: 20, To: 8, Reason: "ScaleUpLimit"},
			},
			wantActive: cond{engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound"},
		},
		{
			name: "a fallback never applies while metrics are healthy", usage: 500,
			proposals: []engine.Proposal{fallback(10)}, want: 4,
			wantActive: cond{engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound"},
		},
		{
			name: "a healthy decision clears a fallback left active", usage: 500,
			status:     []engine.Condition{{Type: engine.FallbackActive, Status: engine.ConditionTrue, Reason: "FallbackActive"}},
			want:       4,
			wantActive: cond{engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound"},
			fallback:   &cond{engine.FallbackActive, engine.ConditionFalse, "MetricsHealthy"},
		},
		{
			name: "failed metrics without a fallback hold", metricsErr: true,
			proposals: []engine.Proposal{schedule("schedule peak", 9)}, want: 0, // the status' desired count, 0
			wantActive: cond{engine.ScalingActive, engine.ConditionFalse, "FailedGetResourceMetric"},
		},
		{
			name: "failed metrics take the fallback", metricsErr: true,
			proposals: []engine.Proposal{fallback(10)}, want: 8, // legacy limit
			wantSteps: []engine.Step{
				{Kind: engine.StepProposal, From: 0, To: 10, Reason: "FallbackActive"},
				{Kind: engine.StepLimited, From: 10, To: 8, Reason: "ScaleUpLimit"},
			},
			wantActive: cond{engine.ScalingActive, engine.ConditionFalse, "FailedGetResourceMetric"},
			fallback:   &cond{engine.FallbackActive, engine.ConditionTrue, "FallbackActive"},
		},
		{
			name: "a lower fallback scales in, after the scale-down window", metricsErr: true,
			proposals: []engine.Proposal{fallback(2)}, want: 4, // window holds the seed, 4
			wantSteps:  []engine.Step{{Kind: engine.StepProposal, From: 0, To: 2, Reason: "FallbackActive"}, {Kind: engine.StepStabilized, From: 2, To: 4, Reason: "ScaleDownStabilized"}},
			wantActive: cond{engine.ScalingActive, engine.ConditionFalse, "FailedGetResourceMetric"},
			fallback:   &cond{engine.FallbackActive, engine.ConditionTrue, "FallbackActive"},
		},
		{
			name: "a schedule floor joins a fallback", metricsErr: true,
			proposals: []engine.Proposal{fallback(5), schedule("schedule peak", 6)}, want: 6,
			wantSteps:  []engine.Step{{Kind: engine.StepProposal, From: 0, To: 6, Reason: "ScheduleFloor"}},
			wantActive: cond{engine.ScalingActive, engine.ConditionFalse, "FailedGetResourceMetric"},
			fallback:   &cond{engine.FallbackActive, engine.ConditionTrue, "FallbackActive"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fourCPUPods(4, tc.usage, cpuUtilization(50))
			if tc.metricsErr {
				in.ResourceMetrics = engine.ResourceMetrics{Err: "metrics server unavailable"}
			}
			if tc.behavior {
				in.Spec.Behavior = behavior()
			}
			in.Proposals = tc.proposals
			in.Status.Conditions = tc.status
			d := decide(t, in, engine.History{})
			if d.DesiredReplicas != tc.want {
				t.Errorf("desired %d; want %d", d.DesiredReplicas, tc.want)
			}
			if diff := cmp.Diff(tc.wantSteps, d.Explanation.Steps, ignoreMessages); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if c := condition(d.Status, engine.ScalingActive); c == nil || (cond{c.Type, c.Status, c.Reason}) != tc.wantActive {
				t.Errorf("ScalingActive = %+v; want %+v", c, tc.wantActive)
			}
			c := condition(d.Status, engine.FallbackActive)
			switch {
			case tc.fallback == nil && c != nil:
				t.Errorf("FallbackActive = %+v; want none", c)
			case tc.fallback != nil && (c == nil || (cond{c.Type, c.Status, c.Reason}) != *tc.fallback):
				t.Errorf("FallbackActive = %+v; want %+v", c, *tc.fallback)
			}
		})
	}
}

// TestProposalNamedInExplanation checks that the winning proposal is named
// by its step and by the ScalingActive message.
func TestProposalNamedInExplanation(t *testing.T) {
	in := fourCPUPods(4, 500, cpuUtilization(50))
	in.Proposals = []engine.Proposal{schedule("schedule business-hours", 9)}
	d := decide(t, in, engine.History{})
	if len(d.Explanation.Steps) == 0 || !strings.Contains(d.Explanation.Steps[0].Message, "schedule business-hours: window active") {
		t.Errorf("steps %+v; want the first to name the schedule", d.Explanation.Steps)
	}
	if c := condition(d.Status, engine.ScalingActive); !strings.Contains(c.Message, "schedule business-hours proposed more") {
		t.Errorf("ScalingActive message %q; want it to name the schedule", c.Message)
	}
	if d.Explanation.Proposal != 4 {
		t.Errorf("explanation proposal %d; want the metrics' 4", d.Explanation.Proposal)
	}
}

// TestProposalsStabilizeLikeMetrics checks that a schedule's floor, once
// gone, is held by the scale-down window as a metric's proposal would be.
func TestProposalsStabilizeLikeMetrics(t *testing.T) {
	in := fourCPUPods(4, 500, cpuUtilization(50))
	in.Proposals = []engine.Proposal{schedule("schedule peak", 9)}
	d := decide(t, in, engine.History{})
	if d.DesiredReplicas != 8 {
		t.Fatalf("desired %d; want 8 (legacy limit)", d.DesiredReplicas)
	}
	// A minute later the window has ended and the 8 pods run at 25%
	// (proposal 4); the scale-down window keeps the floor's 9.
	in = input(8, cpuUtilization(50))
	in.Now = now.Add(time.Minute)
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		in.Pods = append(in.Pods, cpuPod(n, 1000))
		in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, cpuUsage(n, 250))
	}
	in.Status = d.Status
	d2 := decide(t, in, d.History)
	if d2.DesiredReplicas != 9 || d2.Explanation.Proposal != 4 {
		t.Errorf("a minute after the window: proposal %d, desired %d; want 4 held at the window's 9", d2.Explanation.Proposal, d2.DesiredReplicas)
	}
}

// TestNoProposalsUnchanged checks that an empty proposal list decides
// exactly as no list does.
func TestNoProposalsUnchanged(t *testing.T) {
	for _, u := range []int64{100, 500, 750, 2000} {
		in := fourCPUPods(4, u, cpuUtilization(50))
		want := decide(t, in, engine.History{})
		in.Proposals = []engine.Proposal{}
		if diff := cmp.Diff(want, decide(t, in, engine.History{})); diff != "" {
			t.Errorf("usage %d: empty proposals changed the decision (-want +got):\n%s", u, diff)
		}
	}
}

func TestProposalValidation(t *testing.T) {
	cases := []struct {
		name  string
		p     engine.Proposal
		field string
	}{
		{"unknown kind", engine.Proposal{Name: "x", Kind: "Guess", Replicas: 1}, "proposals[0].kind"},
		{"no name", engine.Proposal{Kind: engine.ProposalSchedule, Replicas: 1}, "proposals[0].name"},
		{"negative", engine.Proposal{Name: "x", Kind: engine.ProposalForecast, Replicas: -1}, "proposals[0].replicas"},
		{"long explanation", engine.Proposal{Name: "x", Kind: engine.ProposalForecast, Explanation: strings.Repeat("a", 2000)}, "proposals[0].explanation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fourCPUPods(4, 500, cpuUtilization(50))
			in.Proposals = []engine.Proposal{tc.p}
			_, err := engine.Decide(in, engine.History{})
			var fe *engine.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("Decide error %v; want a FieldError on %s", err, tc.field)
			}
		})
	}
}

// BenchmarkDecideProposals measures, in the same run, the yardstick target
// (100 pods, cpu and External) without proposals, with a schedule and a
// forecast that lose to the metrics, and with one that wins.
func BenchmarkDecideProposals(b *testing.B) {
	cases := []struct {
		name string
		ps   []engine.Proposal
	}{
		{"none", nil},
		{"two-losing", []engine.Proposal{schedule("schedule night", 1), forecast(2)}},
		{"one-winning", []engine.Proposal{schedule("schedule night", 1), forecast(300)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			in, h := benchInputMetrics(100, 2)
			in.Proposals = c.ps
			if _, err := engine.Decide(in, h); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := engine.Decide(in, h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
