package server_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// loadSteps are the Simulate steps of target name's daily load (loadRequest)
// every 10 minutes from from to to, inclusive, and the spec they share.
func loadSteps(name string, from, to time.Time) (*setpointv1.HorizontalPodAutoscalerSpec, []*setpointv1.SimulateStep) {
	var spec *setpointv1.HorizontalPodAutoscalerSpec
	var steps []*setpointv1.SimulateStep
	for now := from; !now.After(to); now = now.Add(10 * time.Minute) {
		req := loadRequest(name, now, dailyDemand(now))
		spec = req.Spec
		steps = append(steps, &setpointv1.SimulateStep{
			Time: timestamppb.New(now), Scale: req.Scale, Pods: req.Pods,
			ResourceMetrics: req.ResourceMetrics, Observations: req.Observations,
		})
	}
	return spec, steps
}

// desiredOf is the desired count of each step of r.
func desiredOf(r *setpointv1.SimulateResponse) []int32 {
	var out []int32
	for _, s := range r.GetSteps() {
		out = append(out, s.GetDecision().GetDesiredReplicas())
	}
	return out
}

// Simulate with spec.forecast keeps the metric's history through its
// steps as Recommend keeps it in the record: over two days and a morning
// of the daily load, the forecast is silent for the first two days (every
// decision equals the one without forecast) and on the third morning
// raises the decision ahead of the ramp, explained as Recommend's. Without
// spec.forecast the same steps decide as Recommend decides them, step for
// step. Nothing is written: the target named by the steps is not stored.
func TestSimulateForecastAheadOfDailyRamp(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	spec, steps := loadSteps("sim", dayStart, dayStart.Add(48*time.Hour+8*time.Hour+30*time.Minute)) // to day 3, 08:30
	off, err := c.Simulate(t.Context(), &setpointv1.SimulateRequest{Spec: spec, Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	on, err := c.Simulate(t.Context(), &setpointv1.SimulateRequest{Spec: forecastOn(&setpointv1.RecommendRequest{Spec: proto.Clone(spec).(*setpointv1.HorizontalPodAutoscalerSpec)}).Spec, Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	if len(on.GetSteps()) != len(steps) || len(off.GetSteps()) != len(steps) {
		t.Fatalf("got %d and %d step results, want %d", len(on.GetSteps()), len(off.GetSteps()), len(steps))
	}

	// Without forecast: Recommend's decisions on the same inputs.
	var recommended []int32
	for now := dayStart; !now.After(dayStart.Add(56*time.Hour + 30*time.Minute)); now = now.Add(10 * time.Minute) {
		ts.clock.Set(now)
		resp, err := c.Recommend(t.Context(), loadRequest("plain", now, dailyDemand(now)))
		if err != nil {
			t.Fatalf("plain at %s: %v", now, err)
		}
		recommended = append(recommended, resp.GetDecision().GetDesiredReplicas())
	}
	if g := desiredOf(off); !slices.Equal(g, recommended) {
		t.Errorf("without forecast: Simulate desired %v,\nRecommend desired %v", g, recommended)
	}

	day3 := int(48 * time.Hour / (10 * time.Minute))
	var differ, early int
	for i, s := range on.GetSteps() {
		if i >= day3 {
			break
		}
		if forecastStep(s.GetDecision()) != nil {
			early++
		}
		if s.GetDecision().GetDesiredReplicas() != off.GetSteps()[i].GetDecision().GetDesiredReplicas() {
			differ++
		}
	}
	if early != 0 || differ != 0 {
		t.Errorf("with under two days of history: %d forecast steps, %d decisions differing from the forecast's absence; want 0, 0", early, differ)
	}
	// The silence is explained in each step's notes (the closed 10-minute
	// steps of history: the step being filled does not count); without
	// forecast there are none.
	for _, c := range []struct {
		i    int
		want string
	}{{0, "no history yet"}, {6, "50m0s of history, 48h0m0s needed"}, {day3 - 1, "47h40m0s of history, 48h0m0s needed"}} {
		if n := on.GetSteps()[c.i].GetNotes(); len(n) != 1 || !strings.Contains(n[0], c.want) || !strings.HasPrefix(n[0], "forecast cpu resource utilization") {
			t.Errorf("step %d: notes %q; want one naming the metric and saying %q", c.i, n, c.want)
		}
	}
	for i, s := range off.GetSteps() {
		if len(s.GetNotes()) != 0 {
			t.Fatalf("without forecast, step %d: notes %q", i, s.GetNotes())
		}
	}
	last := len(steps) - 1 // 08:30: the load is 4, the ramp at 08:50 needs 12
	if got := off.GetSteps()[last].GetDecision().GetDesiredReplicas(); got != 4 {
		t.Errorf("without forecast at 08:30: desired %d, want the load's 4", got)
	}
	d := on.GetSteps()[last].GetDecision()
	step := forecastStep(d)
	if d.GetDesiredReplicas() < 12 || step == nil {
		t.Fatalf("with forecast at 08:30: desired %d, step %+v; want at least 12 by a ForecastAhead step", d.GetDesiredReplicas(), step)
	}
	for _, want := range []string{"forecast cpu resource utilization", "period daily", "horizon 30m0s", "replicas of demand predicted", "confidence"} {
		if !strings.Contains(step.GetMessage(), want) {
			t.Errorf("forecast step's message %q does not say %q", step.GetMessage(), want)
		}
	}
	if _, err := ts.store.Get(t.Context(), target.Key{Cluster: "eu1", Namespace: "shop", Name: "sim"}); err == nil {
		t.Error("Simulate stored its target")
	}
}

// A Simulate seeded from a target that Recommend fed with forecasts starts
// from its stored history: one step at 08:30 of the third day forecasts
// the ramp, where the same step unseeded (an empty history) does not. The
// seed's stored histories are unchanged by it.
func TestSimulateForecastSeeded(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	end := dayStart.Add(48*time.Hour + 8*time.Hour + 20*time.Minute) // day 3, 08:20
	for now := dayStart; !now.After(end); now = now.Add(10 * time.Minute) {
		ts.clock.Set(now)
		if _, err := c.Recommend(t.Context(), forecastOn(loadRequest("fc", now, dailyDemand(now)))); err != nil {
			t.Fatalf("at %s: %v", now, err)
		}
	}
	k := target.Key{Cluster: "eu1", Namespace: "shop", Name: "fc"}
	before, err := ts.store.Get(t.Context(), k)
	if err != nil || len(before.Forecasts) != 1 {
		t.Fatalf("stored forecasts %d (err %v), want one history", len(before.Forecasts), err)
	}

	at := end.Add(10 * time.Minute)
	spec, steps := loadSteps("fc", at, at)
	spec = forecastOn(&setpointv1.RecommendRequest{Spec: spec}).Spec
	seeded, err := c.Simulate(t.Context(), &setpointv1.SimulateRequest{Spec: spec, Steps: steps, SeedFrom: key("fc")})
	if err != nil {
		t.Fatal(err)
	}
	unseeded, err := c.Simulate(t.Context(), &setpointv1.SimulateRequest{Spec: spec, Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	d := seeded.GetSteps()[0].GetDecision()
	if step := forecastStep(d); d.GetDesiredReplicas() < 12 || step == nil || !strings.Contains(step.GetMessage(), "period daily") {
		t.Errorf("seeded at 08:30: desired %d, step %+v; want at least 12 by a daily ForecastAhead step", d.GetDesiredReplicas(), step)
	}
	if u := unseeded.GetSteps()[0].GetDecision(); forecastStep(u) != nil || u.GetDesiredReplicas() != 4 {
		t.Errorf("unseeded at 08:30: desired %d, forecast step %+v; want the load's 4 and none", u.GetDesiredReplicas(), forecastStep(u))
	}
	if n := unseeded.GetSteps()[0].GetNotes(); len(n) != 1 || !strings.Contains(n[0], "no history yet") {
		t.Errorf("unseeded notes %q; want one saying there is no history yet", n)
	}
	if n := seeded.GetSteps()[0].GetNotes(); len(n) != 0 {
		t.Errorf("seeded notes %q; want none (the forecast proposed)", n)
	}
	after, err := ts.store.Get(t.Context(), k)
	if err != nil || !slices.Equal(after.Forecasts, before.Forecasts) || !after.Last.At.Equal(before.Last.At) {
		t.Errorf("the seed target changed after Simulate (err %v)", err)
	}
}

// TestReplayForecastsFromTheStoredHistory: the console's replay of a
// target's logged decisions with a forecast in the spec forecasts from the
// target's stored history as it stood at the first replayed decision, so a
// replay of a morning forecasts its ramp; without a forecast in the spec
// the replay has no forecast step.
func TestReplayForecastsFromTheStoredHistory(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	end := dayStart.Add(48*time.Hour + 9*time.Hour + 30*time.Minute) // day 3, 09:30
	for now := dayStart; !now.After(end); now = now.Add(10 * time.Minute) {
		ts.clock.Set(now)
		if _, err := c.Recommend(t.Context(), forecastOn(loadRequest("fc", now, dailyDemand(now)))); err != nil {
			t.Fatalf("at %s: %v", now, err)
		}
	}
	replay := consolev1.NewReplayServiceClient(dial(t, ts.addr))
	from, to := dayStart.Add(48*time.Hour+8*time.Hour), end // day 3, 08:00 to 09:30
	spec := forecastOn(loadRequest("fc", from, dailyDemand(from))).GetSpec()
	for _, tc := range []struct {
		name     string
		forecast bool
	}{{"with a forecast", true}, {"without", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := proto.Clone(spec).(*setpointv1.HorizontalPodAutoscalerSpec)
			if !tc.forecast {
				s.Forecast = nil
			}
			resp, err := replay.Replay(t.Context(), &consolev1.ReplayRequest{Target: key("fc"), Spec: s,
				StartTime: timestamppb.New(from), EndTime: timestamppb.New(to)})
			if err != nil {
				t.Fatal(err)
			}
			var ahead []string
			for _, st := range resp.GetResponse().GetSteps() {
				if step := forecastStep(st.GetDecision()); step != nil && st.GetTime().AsTime().Before(dayStart.Add(48*time.Hour+9*time.Hour)) {
					ahead = append(ahead, st.GetTime().AsTime().Format("15:04"))
				}
			}
			if got := len(ahead) > 0; got != tc.forecast {
				t.Errorf("forecast steps before 09:00 at %v; want some: %v", ahead, tc.forecast)
			}
		})
	}
}
