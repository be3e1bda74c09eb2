package server_test

import (
	"strings"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The spec's opt-in fields that act ahead of the load (fallback,
// schedules), through a real server over gRPC.

// fastUp lets a test's decisions reach any count in one step: a scale-up
// policy of 100 pods per 15 s, no windows in either direction.
func fastUp(spec *setpointv1.HorizontalPodAutoscalerSpec) {
	zero := int32(0)
	spec.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{
		ScaleUp:   &setpointv1.ScalingRules{StabilizationWindowSeconds: &zero, Policies: []*setpointv1.ScalingPolicy{{Type: "Pods", Value: 100, PeriodSeconds: 15}}},
		ScaleDown: &setpointv1.ScalingRules{StabilizationWindowSeconds: &zero},
	}
}

// condition returns the condition of type typ in d's status, nil when absent.
func condition(d *setpointv1.Decision, typ string) *setpointv1.Condition {
	for _, c := range d.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// proposalStep returns d's explanation step of kind Proposal, nil when none.
func proposalStep(d *setpointv1.Decision) *setpointv1.Step {
	for _, s := range d.GetExplanation().GetSteps() {
		if s.GetKind() == "Proposal" {
			return s
		}
	}
	return nil
}

// A schedule window raises the floor while it is open, and only then: at
// 06:00 UTC the 09:00–17:00 Berlin window (08:00–16:00 UTC in March) is
// closed and the metrics' 4 replicas stand; at 12:00 UTC it is open and
// the decision is its 10, explained by a Proposal step and ScalingActive
// naming the window.
func TestScheduleRaisesFloor(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	windows := []*setpointv1.ScheduleWindow{{
		Name: "business-hours", TimeZone: "Europe/Berlin", Start: "0 9 * * *", End: "0 17 * * *", MinReplicas: 10,
	}}
	for _, st := range []struct {
		name  string
		at    time.Time
		want  int32
		floor bool
	}{
		{"closed: the metrics decide", t0.Add(-6 * time.Hour), 4, false},
		{"open: the window's floor", t0, 10, true},
		{"closed again after 16:00 UTC", t0.Add(4*time.Hour + time.Minute), 4, false},
	} {
		ts.clock.Set(st.at)
		req := request("web", 2, st.at)
		fastUp(req.Spec)
		req.Spec.Schedules = windows
		resp, err := c.Recommend(t.Context(), req)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		d := resp.GetDecision()
		if d.GetDesiredReplicas() != st.want {
			t.Errorf("%s: desired %d, want %d", st.name, d.GetDesiredReplicas(), st.want)
		}
		step := proposalStep(d)
		if !st.floor {
			if step != nil {
				t.Errorf("%s: a proposal step %+v while the window is closed", st.name, step)
			}
			continue
		}
		if step == nil || step.GetReason() != "ScheduleFloor" || step.GetFrom() != 4 || step.GetTo() != 10 || !strings.Contains(step.GetMessage(), "business-hours") {
			t.Errorf("%s: proposal step %+v; want ScheduleFloor 4 → 10 naming business-hours", st.name, step)
		}
		if sa := condition(d, "ScalingActive"); !strings.Contains(sa.GetMessage(), "business-hours") {
			t.Errorf("%s: ScalingActive %+v does not name the window", st.name, sa)
		}
	}
}

// A fallback applies once the metrics have been failing for its
// failure_duration, and stops with the first healthy decision: the clock
// steps through a metrics API outage of a minute.
func TestFallbackThroughOutage(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	type step struct {
		name     string
		after    time.Duration // since t0
		failing  bool
		want     int32
		fallback string // FallbackActive's status; "" when absent
	}
	steps := []step{
		{"healthy: the metrics decide, no fallback condition", 0, false, 4, ""},
		// The controller gives up: no rescale, the status keeps the last
		// desired count (the scale stays at 2).
		{"first failure: the controller gives up", 15 * time.Second, true, 4, ""},
		{"failing for 15s, under failure_duration", 30 * time.Second, true, 4, ""},
		{"failing for 30s, under failure_duration", 45 * time.Second, true, 4, ""},
		{"failing for 45s: the fallback's 7", 60 * time.Second, true, 7, "True"},
		{"still failing: still 7", 75 * time.Second, true, 7, "True"},
		{"healthy again: the metrics decide", 90 * time.Second, false, 4, "False"},
		{"healthy: stays normal", 105 * time.Second, false, 4, "False"},
	}
	for _, st := range steps {
		now := t0.Add(st.after)
		ts.clock.Set(now)
		req := request("api", 2, now)
		fastUp(req.Spec)
		req.Spec.Fallback = &setpointv1.Fallback{FailureDuration: durationpb.New(45 * time.Second), Behavior: "static", Replicas: 7}
		if st.failing {
			req.ResourceMetrics = &setpointv1.ResourceMetrics{Error: "the metrics API is unavailable"}
		}
		resp, err := c.Recommend(t.Context(), req)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		d := resp.GetDecision()
		if d.GetDesiredReplicas() != st.want {
			t.Errorf("%s: desired %d, want %d", st.name, d.GetDesiredReplicas(), st.want)
		}
		if rescale := st.want != 2 && (!st.failing || st.fallback == "True"); d.GetRescale() != rescale {
			t.Errorf("%s: rescale %v, want %v", st.name, d.GetRescale(), rescale)
		}
		fa := condition(d, "FallbackActive")
		switch {
		case st.fallback == "" && fa != nil:
			t.Errorf("%s: FallbackActive %+v; want none", st.name, fa)
		case st.fallback != "" && fa.GetStatus() != st.fallback:
			t.Errorf("%s: FallbackActive %+v; want status %s", st.name, fa, st.fallback)
		}
		if st.fallback == "True" {
			if s := proposalStep(d); s == nil || s.GetReason() != "FallbackActive" || s.GetTo() != 7 {
				t.Errorf("%s: proposal step %+v; want FallbackActive to 7", st.name, s)
			}
		} else if s := proposalStep(d); s != nil {
			t.Errorf("%s: proposal step %+v; want none", st.name, s)
		}
	}
}

// Each invalid fallback or schedule field is InvalidArgument naming it.
func TestAheadValidationNamesField(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	window := func() *setpointv1.ScheduleWindow {
		return &setpointv1.ScheduleWindow{Name: "w", TimeZone: "Europe/Berlin", Start: "0 9 * * 1-5", End: "0 17 * * 1-5", MinReplicas: 3}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*setpointv1.HorizontalPodAutoscalerSpec)
		field string
	}{
		{"unknown time zone", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].TimeZone = "Mars/Olympus_Mons" }, "spec.schedules[0].time_zone"},
		{"Local time zone", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].TimeZone = "Local" }, "spec.schedules[0].time_zone"},
		{"bad cron start", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].Start = "61 9 * * *" }, "spec.schedules[0].start"},
		{"@every start", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].Start = "@every 1h" }, "spec.schedules[0].start"},
		{"bad cron end", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].End = "0 25 * * *" }, "spec.schedules[0].end"},
		{"zero duration", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			s.Schedules[0].End, s.Schedules[0].Duration = "", durationpb.New(0)
		}, "spec.schedules[0].duration"},
		{"negative duration", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			s.Schedules[0].End, s.Schedules[0].Duration = "", durationpb.New(-time.Hour)
		}, "spec.schedules[0].duration"},
		{"neither end nor duration", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].End = "" }, "spec.schedules[0].duration"},
		{"both end and duration", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].Duration = durationpb.New(time.Hour) }, "spec.schedules[0].duration"},
		{"duration over 8 days", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			s.Schedules[0].End, s.Schedules[0].Duration = "", durationpb.New(9*24*time.Hour)
		}, "spec.schedules[0].duration"},
		{"negative min_replicas", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].MinReplicas = -1 }, "spec.schedules[0].min_replicas"},
		{"min_replicas above max_replicas", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].MinReplicas = 101 }, "spec.schedules[0].min_replicas"},
		{"no name", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules[0].Name = "" }, "spec.schedules[0].name"},
		{"duplicate name, second window", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Schedules = append(s.Schedules, window()) }, "spec.schedules[1].name"},
		{"bad zone of the second window", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			w := window()
			w.Name, w.TimeZone = "w2", "Europe/Atlantis"
			s.Schedules = append(s.Schedules, w)
		}, "spec.schedules[1].time_zone"},
		{"unknown fallback behavior", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Fallback.Behavior = "sometimes" }, "spec.fallback.behavior"},
		{"negative fallback replicas", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Fallback.Replicas = -2 }, "spec.fallback.replicas"},
		{"fallback replicas above max_replicas", func(s *setpointv1.HorizontalPodAutoscalerSpec) { s.Fallback.Replicas = 1000 }, "spec.fallback.replicas"},
		{"negative failure_duration", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			s.Fallback.FailureDuration = durationpb.New(-time.Second)
		}, "spec.fallback.failure_duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request("valid", 2, t0)
			req.Spec.Schedules = []*setpointv1.ScheduleWindow{window()}
			req.Spec.Fallback = &setpointv1.Fallback{FailureDuration: durationpb.New(time.Minute), Behavior: "currentReplicasIfHigher", Replicas: 5}
			if _, err := c.Recommend(t.Context(), proto.Clone(req).(*setpointv1.RecommendRequest)); err != nil {
				t.Fatalf("the valid request is refused: %v", err)
			}
			tc.edit(req.Spec)
			_, err := c.Recommend(t.Context(), req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("Recommend = %v; want InvalidArgument", err)
			}
			checkBadRequest(t, err, tc.field)
			sim := &setpointv1.SimulateRequest{Spec: req.Spec, Steps: []*setpointv1.SimulateStep{{Time: req.Pods[0].StartTime, Scale: req.Scale}}}
			_, err = c.Simulate(t.Context(), sim)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("Simulate = %v; want InvalidArgument", err)
			}
			checkBadRequest(t, err, tc.field)
		})
	}
}
