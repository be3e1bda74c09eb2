package target_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/target"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// input is a decision's input: 2 pods using 400m of 500m cpu against a
// 50% utilization target, which scales 2 → 4 (ratio 1.6, ceil 3.2).
func input(replicas int32) target.Input {
	in := engine.Input{
		Spec: engine.Spec{
			MinReplicas: 1, MaxReplicas: 10,
			Metrics: []engine.MetricSpec{{Type: engine.ResourceSource, Resource: "cpu",
				Target: engine.Target{Type: engine.UtilizationTarget, Utilization: 50}}},
			Behavior: &engine.Behavior{
				ScaleUp:   engine.Rules{SelectPolicy: engine.SelectMax, Policies: []engine.Policy{{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 15}}},
				ScaleDown: engine.Rules{StabilizationWindowSeconds: 300, SelectPolicy: engine.SelectMax, Policies: []engine.Policy{{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}}},
			},
		},
		Settings:     engine.Settings{Tolerance: 0.1, CPUInitializationPeriod: 5 * time.Minute, InitialReadinessDelay: 30 * time.Second, DownscaleStabilizationWindow: 5 * time.Minute},
		Scale:        engine.Scale{Replicas: replicas, StatusReplicas: replicas, Selector: "app=web"},
		Observations: []engine.Observation{{}},
	}
	for _, name := range []string{"web-0", "web-1"} {
		start := t0.Add(-time.Hour)
		in.Pods = append(in.Pods, engine.Pod{Name: name, Phase: engine.PodRunning, StartTime: start,
			Ready:      &engine.PodReadiness{Status: engine.ConditionTrue, LastTransitionTime: start},
			Containers: []engine.Container{{Name: "app", Requests: engine.ResourceListOf(map[string]int64{"cpu": 500})}}})
		in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, engine.PodUsage{Pod: name, Timestamp: t0.Add(-15 * time.Second), Window: 15 * time.Second,
			Containers: []engine.ContainerUsage{{Name: "app", Usage: engine.ResourceListOf(map[string]int64{"cpu": 400})}}})
	}
	return target.Input{Ref: target.Ref{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Engine: in, ReceivedSpec: "spec as sent"}
}

// decided returns a record after one decision "d1" at t0.
func decided(t *testing.T) target.Record {
	t.Helper()
	var rec target.Record
	if err := target.Decide(&rec, input(2), "d1", t0); err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestDecide(t *testing.T) {
	rec := decided(t)
	in := input(2)
	if rec.Ref != in.Ref || rec.LastSeen != t0 || rec.ReceivedSpec != in.ReceivedSpec {
		t.Errorf("Ref, LastSeen, ReceivedSpec = %v, %v, %q; want %v, %v, %q", rec.Ref, rec.LastSeen, rec.ReceivedSpec, in.Ref, t0, in.ReceivedSpec)
	}
	if diff := cmp.Diff(in.Engine.Spec, rec.Spec); diff != "" {
		t.Errorf("Spec (-want +got):\n%s", diff)
	}
	l := rec.Last
	if l == nil || l.ID != "d1" || !l.At.Equal(t0) || l.From != 2 || l.Decision.DesiredReplicas != 4 || !l.Decision.Rescale {
		t.Fatalf("Last = %+v, want d1 at t0 from 2 to 4", l)
	}
	if diff := cmp.Diff(engine.History{}, l.Decision.History, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Last.Decision.History is not empty:\n%s", diff)
	}
	if len(rec.History.Recommendations) == 0 {
		t.Errorf("History has no recommendation after a decision")
	}
	if diff := cmp.Diff(l.Decision.Status, rec.Status); diff != "" {
		t.Errorf("Status is not the decision's (-decision +record):\n%s", diff)
	}
	if diff := cmp.Diff(engine.Status{}, l.Before, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Before of a first decision is not the zero status:\n%s", diff)
	}

	// The second decision starts from the first one's status.
	first := rec.Status
	if err := target.Decide(&rec, input(4), "d2", t0.Add(15*time.Second)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, rec.Last.Before); diff != "" {
		t.Errorf("Before is not the previous status (-want +got):\n%s", diff)
	}
}

func TestDecideInvalidLeavesRecord(t *testing.T) {
	rec := decided(t)
	want := rec
	bad := input(2)
	bad.Engine.Spec.MaxReplicas = 0
	err := target.Decide(&rec, bad, "d2", t0.Add(time.Minute))
	var fe *engine.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("Decide with maxReplicas 0 = %v, want an *engine.FieldError", err)
	}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("a rejected decision changed the record (-before +after):\n%s", diff)
	}
}

func TestObserve(t *testing.T) {
	later := t0.Add(time.Second)
	tests := []struct {
		name    string
		obs     target.Observation
		wantErr error
		check   func(t *testing.T, before, after target.Record)
	}{
		{
			name: "applied adds a scale event",
			obs:  target.Observation{Kind: target.EventApplied, DecisionID: "d1", From: 2, To: 4},
			check: func(t *testing.T, before, after target.Record) {
				want := engine.RecordScale(before.History, before.Spec.Behavior, 2, 4, later)
				if diff := cmp.Diff(want, after.History); diff != "" {
					t.Errorf("History (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(before.Status, after.Status); diff != "" {
					t.Errorf("Status changed (-before +after):\n%s", diff)
				}
			},
		},
		{
			name: "failed restores what the decision started from",
			obs:  target.Observation{Kind: target.EventFailed, DecisionID: "d1", To: 4, Message: "forbidden"},
			check: func(t *testing.T, before, after target.Record) {
				want := engine.RescaleFailed(before.Last.Before, before.Last.Decision, later, "forbidden")
				if diff := cmp.Diff(want, after.Status); diff != "" {
					t.Errorf("Status (-want +got):\n%s", diff)
				}
				if e := after.Events[len(after.Events)-1]; e.From != 2 || e.To != 4 || e.Message != "forbidden" {
					t.Errorf("event = %+v, want 2 → 4 with the message", e)
				}
			},
		},
		{
			name: "external is only an event",
			obs:  target.Observation{Kind: target.EventExternal, From: 4, To: 9},
			check: func(t *testing.T, before, after target.Record) {
				if diff := cmp.Diff(before.History, after.History); diff != "" {
					t.Errorf("History changed:\n%s", diff)
				}
			},
		},
		{name: "failed of another decision", obs: target.Observation{Kind: target.EventFailed, DecisionID: "d0", To: 4}, wantErr: target.ErrStaleDecision},
		{name: "unknown kind", obs: target.Observation{Kind: "Sideways"}, wantErr: target.ErrInvalidObservation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := decided(t)
			after := decided(t)
			err := target.Observe(&after, tt.obs, later)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Observe = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("a rejected observation changed the record (-before +after):\n%s", diff)
				}
				return
			}
			if n := len(after.Events); n != 1 || after.Events[0].Kind != tt.obs.Kind || !after.Events[0].At.Equal(later) || after.LastSeen != later {
				t.Errorf("Events, LastSeen = %+v, %v; want one %s event at %v", after.Events, after.LastSeen, tt.obs.Kind, later)
			}
			tt.check(t, before, after)
		})
	}
}

func TestObserveAppliedTwice(t *testing.T) {
	rec := decided(t)
	o := target.Observation{Kind: target.EventApplied, DecisionID: "d1", From: 2, To: 4}
	if err := target.Observe(&rec, o, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	once := rec
	once.Events = append([]target.Event(nil), rec.Events...)
	if err := target.Observe(&rec, o, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(once, rec); diff != "" {
		t.Errorf("a retried applied report changed the record (-once +twice):\n%s", diff)
	}
}

func TestObserveWithoutDecision(t *testing.T) {
	var rec target.Record
	err := target.Observe(&rec, target.Observation{Kind: target.EventExternal, From: 1, To: 2}, t0)
	if !errors.Is(err, target.ErrNoDecision) {
		t.Errorf("Observe before any decision = %v, want ErrNoDecision", err)
	}
}

// TestClockNeverRunsBackwards: a transition at a time before the record's
// last one (another server's clock, a retry after a conflict) is stamped at
// the record's last time, so stamps follow the order of recording; a
// decision never shares the previous decision's stamp.
func TestClockNeverRunsBackwards(t *testing.T) {
	earlier, later := t0.Add(-time.Second), t0.Add(time.Second)
	tests := []struct {
		name   string
		at     time.Time
		apply  func(rec *target.Record, at time.Time) error
		stamp  func(rec target.Record) time.Time
		wantAt time.Time
	}{
		{"decision before the last", earlier,
			func(rec *target.Record, at time.Time) error { return target.Decide(rec, input(4), "d2", at) },
			func(rec target.Record) time.Time { return rec.Last.At }, t0.Add(time.Nanosecond)},
		{"decision at the last's own time", t0,
			func(rec *target.Record, at time.Time) error { return target.Decide(rec, input(4), "d2", at) },
			func(rec target.Record) time.Time { return rec.Last.At }, t0.Add(time.Nanosecond)},
		{"decision after the last", later,
			func(rec *target.Record, at time.Time) error { return target.Decide(rec, input(4), "d2", at) },
			func(rec target.Record) time.Time { return rec.Last.At }, later},
		{"observation before the last", earlier,
			func(rec *target.Record, at time.Time) error {
				return target.Observe(rec, target.Observation{Kind: target.EventApplied, DecisionID: "d1", From: 2, To: 4}, at)
			},
			func(rec target.Record) time.Time { return rec.Events[len(rec.Events)-1].At }, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := decided(t)
			if err := tt.apply(&rec, tt.at); err != nil {
				t.Fatal(err)
			}
			if got := tt.stamp(rec); !got.Equal(tt.wantAt) || !rec.LastSeen.Equal(tt.wantAt) {
				t.Errorf("stamp, LastSeen = %v, %v; want both %v", got, rec.LastSeen, tt.wantAt)
			}
		})
	}
}
