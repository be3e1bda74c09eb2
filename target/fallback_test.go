package target_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/target"
)

// failingStatus is a status whose metrics have failed since t0.
func failingStatus() engine.Status {
	return engine.Status{Conditions: []engine.Condition{{Type: engine.ScalingActive, Status: engine.ConditionFalse,
		Reason: "FailedGetResourceMetric", LastTransitionTime: t0}}}
}

func TestFallbackProposal(t *testing.T) {
	healthy := engine.Status{Conditions: []engine.Condition{{Type: engine.ScalingActive, Status: engine.ConditionTrue, Reason: "ValidMetricFound", LastTransitionTime: t0}}}
	disabled := engine.Status{Conditions: []engine.Condition{{Type: engine.ScalingActive, Status: engine.ConditionFalse, Reason: "ScalingDisabled", LastTransitionTime: t0}}}
	cases := []struct {
		name     string
		f        target.Fallback
		st       engine.Status
		current  int32
		at       time.Duration // after t0
		want     int32
		wantSome bool
	}{
		{"static", target.Fallback{After: time.Minute, Behavior: target.FallbackStatic, Replicas: 6}, failingStatus(), 3, time.Minute, 6, true},
		{"static below current", target.Fallback{After: time.Minute, Behavior: target.FallbackStatic, Replicas: 2}, failingStatus(), 3, time.Minute, 2, true},
		{"currentReplicas", target.Fallback{After: time.Minute, Behavior: target.FallbackCurrentReplicas, Replicas: 6}, failingStatus(), 3, time.Minute, 3, true},
		{"currentReplicasIfHigher, current higher", target.Fallback{Behavior: target.FallbackCurrentReplicasIfHigher, Replicas: 2}, failingStatus(), 3, 0, 3, true},
		{"currentReplicasIfHigher, current lower", target.Fallback{Behavior: target.FallbackCurrentReplicasIfHigher, Replicas: 6}, failingStatus(), 3, 0, 6, true},
		{"currentReplicasIfLower, current lower", target.Fallback{Behavior: target.FallbackCurrentReplicasIfLower, Replicas: 6}, failingStatus(), 3, 0, 3, true},
		{"currentReplicasIfLower, current higher", target.Fallback{Behavior: target.FallbackCurrentReplicasIfLower, Replicas: 2}, failingStatus(), 3, 0, 2, true},
		{"not failing long enough", target.Fallback{After: time.Minute, Behavior: target.FallbackStatic, Replicas: 6}, failingStatus(), 3, 59 * time.Second, 0, false},
		{"healthy metrics", target.Fallback{Behavior: target.FallbackStatic, Replicas: 6}, healthy, 3, time.Hour, 0, false},
		{"scaling disabled is no failure", target.Fallback{Behavior: target.FallbackStatic, Replicas: 6}, disabled, 0, time.Hour, 0, false},
		{"new target", target.Fallback{Behavior: target.FallbackStatic, Replicas: 6}, engine.Status{}, 0, time.Hour, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := target.FallbackProposal(tc.f, tc.st, tc.current, t0.Add(tc.at))
			if ok != tc.wantSome || (ok && (p.Replicas != tc.want || p.Kind != engine.ProposalFallback)) {
				t.Errorf("FallbackProposal = %+v, %v; want %d replicas, %v", p, ok, tc.want, tc.wantSome)
			}
		})
	}
}

// TestFallbackAcrossSyncs steps a target through healthy metrics, an outage
// and the recovery, one decision every 15 s: the fallback applies from the
// fourth failing sync (After 45 s, KEDA's failureThreshold 3) and stops at
// the first healthy one.
func TestFallbackAcrossSyncs(t *testing.T) {
	f := &target.Fallback{After: 45 * time.Second, Behavior: target.FallbackStatic, Replicas: 6}
	var rec target.Record
	replicas := int32(2)
	type sync struct {
		failing      bool
		wantDesired  int32
		wantFallback engine.ConditionStatus // "": no FallbackActive condition
	}
	// 2 pods at 250m of 500m: 50% against a 50% target, 2 replicas.
	syncs := []sync{
		{false, 2, ""},
		{true, 2, ""}, {true, 2, ""}, {true, 2, ""}, // failing since the second sync, 0, 15, 30 s
		{true, 6, engine.ConditionTrue}, // 45 s: the fallback applies
		{true, 6, engine.ConditionTrue},
		{false, 6, engine.ConditionFalse}, // healthy again: 6 pods' worth held by the scale-down window
	}
	for i, s := range syncs {
		now := t0.Add(time.Duration(i) * 15 * time.Second)
		in := input(replicas)
		for j := range in.Engine.ResourceMetrics.Pods {
			in.Engine.ResourceMetrics.Pods[j].Containers[0].Usage = engine.ResourceListOf(map[string]int64{"cpu": 250})
			in.Engine.ResourceMetrics.Pods[j].Timestamp = now.Add(-10 * time.Second)
		}
		if s.failing {
			in.Engine.ResourceMetrics = engine.ResourceMetrics{Err: "the metrics server is down"}
		}
		in.Fallback = f
		id := fmt.Sprint("d", i)
		if err := target.Decide(&rec, in, id, now); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
		d := rec.Last.Decision
		if d.DesiredReplicas != s.wantDesired {
			t.Errorf("sync %d: desired %d; want %d (%+v)", i, d.DesiredReplicas, s.wantDesired, d.Explanation.Steps)
		}
		var got engine.ConditionStatus
		for _, c := range rec.Status.Conditions {
			if c.Type == engine.FallbackActive {
				got = c.Status
			}
		}
		if got != s.wantFallback {
			t.Errorf("sync %d: FallbackActive %q; want %q", i, got, s.wantFallback)
		}
		if d.Rescale {
			if err := target.Observe(&rec, target.Observation{Kind: target.EventApplied, DecisionID: id, From: replicas, To: d.DesiredReplicas}, now); err != nil {
				t.Fatal(err)
			}
			replicas = d.DesiredReplicas
		}
	}
}

func TestFallbackValidation(t *testing.T) {
	cases := []struct {
		f     target.Fallback
		field string
	}{
		{target.Fallback{Behavior: "sometimes"}, "fallback.behavior"},
		{target.Fallback{Behavior: target.FallbackStatic, Replicas: -1}, "fallback.replicas"},
		{target.Fallback{Behavior: target.FallbackStatic, After: -time.Second}, "fallback.after"},
	}
	for _, tc := range cases {
		var rec target.Record
		in := input(2)
		in.Fallback = &tc.f
		err := target.Decide(&rec, in, "d1", t0)
		var fe *engine.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || rec.Last != nil {
			t.Errorf("%+v: Decide = %v, record changed %v; want a FieldError on %s and no change", tc.f, err, rec.Last != nil, tc.field)
		}
	}
}
