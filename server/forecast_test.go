package server_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Forecasts through a real server over gRPC, on a real bbolt file: a daily
// load fed at 10-minute steps, in virtual time.

// dayStart is midnight before t0: the periodic load's first day.
var dayStart = t0.Truncate(24 * time.Hour)

// dailyDemand is the load of the forecast tests, in replicas needed at the
// target: 4 at night, 20 from 09:00 to 17:00 UTC, ramping over the 10
// minutes before each.
func dailyDemand(at time.Time) float64 {
	h := at.Sub(at.Truncate(24 * time.Hour)).Hours()
	switch {
	case h >= 9 && h < 17:
		return 20
	case h >= 8+5.0/6 && h < 9:
		return 12
	}
	return 4
}

// loadRequest is a Recommend for target name at now: 10 ready pods sharing
// demand (each requests 500m cpu against a 50% target, so a replica of
// demand is 250m), with fastUp's behavior.
func loadRequest(name string, now time.Time, demand float64) *setpointv1.RecommendRequest {
	req := request(name, 10, now)
	fastUp(req.Spec)
	per := fmt.Sprintf("%dm", int(math.Round(demand*250/10)))
	for _, m := range req.ResourceMetrics.Items {
		m.Containers[0].Usage["cpu"] = per
	}
	return req
}

// forecastOn turns spec.forecast on with a 30-minute lead time.
func forecastOn(req *setpointv1.RecommendRequest) *setpointv1.RecommendRequest {
	req.Spec.Forecast = &setpointv1.Forecast{LeadTime: durationpb.New(30 * time.Minute)}
	return req
}

// forecastStep returns d's Proposal step of reason ForecastAhead, nil when
// none.
func forecastStep(d *setpointv1.Decision) *setpointv1.Step {
	if s := proposalStep(d); s != nil && s.GetReason() == "ForecastAhead" {
		return s
	}
	return nil
}

// Two targets get the same daily load for two days and a morning, one
// with spec.forecast and one without. Until the forecast has two days of
// history, both decide alike and the forecast's target has no proposal; on
// the third morning, before the ramp, the forecast raises its decision
// ahead of the load (explained), while the other waits for the load. The
// history survives a restart on the same bbolt file: the decision after
// it still forecasts. A target without forecast stores no history.
func TestForecastAheadOfDailyRamp(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	end := dayStart.Add(48*time.Hour + 8*time.Hour + 20*time.Minute) // day 3, 08:20
	var silentDiffer, forecastBeforeDay3 int
	for now := dayStart; !now.After(end); now = now.Add(10 * time.Minute) {
		ts.clock.Set(now)
		on, err := c.Recommend(t.Context(), forecastOn(loadRequest("fc", now, dailyDemand(now))))
		if err != nil {
			t.Fatalf("forecast at %s: %v", now, err)
		}
		off, err := c.Recommend(t.Context(), loadRequest("plain", now, dailyDemand(now)))
		if err != nil {
			t.Fatalf("plain at %s: %v", now, err)
		}
		if forecastStep(off.GetDecision()) != nil {
			t.Fatalf("plain at %s: a forecast step without spec.forecast", now)
		}
		if now.Before(dayStart.Add(48 * time.Hour)) {
			if forecastStep(on.GetDecision()) != nil {
				forecastBeforeDay3++
			}
			if on.GetDecision().GetDesiredReplicas() != off.GetDecision().GetDesiredReplicas() {
				silentDiffer++
			}
		}
	}
	if forecastBeforeDay3 != 0 || silentDiffer != 0 {
		t.Errorf("with under two days of history: %d forecast steps, %d decisions differing from the plain target; want 0, 0", forecastBeforeDay3, silentDiffer)
	}
	plain, err := ts.store.Get(t.Context(), target.Key{Cluster: "eu1", Namespace: "shop", Name: "plain"})
	if err != nil || len(plain.Forecasts) != 0 {
		t.Errorf("plain target's stored forecasts = %d (err %v); want none", len(plain.Forecasts), err)
	}
	fc, err := ts.store.Get(t.Context(), target.Key{Cluster: "eu1", Namespace: "shop", Name: "fc"})
	if err != nil || len(fc.Forecasts) != 1 || len(fc.Forecasts[0].History) > 4351 {
		t.Fatalf("forecast target's stored forecasts = %+v (err %v); want one history of at most 4,351 bytes", fc.Forecasts, err)
	}

	// Restart on the same file: the history is read back from bbolt.
	path := ts.path
	ts.stop(t)
	ts = start(t, setup{path: path})
	c = ts.client(t)
	now := end.Add(10 * time.Minute) // 08:30, demand still 4; the ramp at 08:50
	ts.clock.Set(now)
	on, err := c.Recommend(t.Context(), forecastOn(loadRequest("fc", now, dailyDemand(now))))
	if err != nil {
		t.Fatal(err)
	}
	off, err := c.Recommend(t.Context(), loadRequest("plain", now, dailyDemand(now)))
	if err != nil {
		t.Fatal(err)
	}
	if got := off.GetDecision().GetDesiredReplicas(); got != 4 {
		t.Errorf("plain at 08:30: desired %d, want the load's 4", got)
	}
	d := on.GetDecision()
	step := forecastStep(d)
	if d.GetDesiredReplicas() < 12 || step == nil {
		t.Fatalf("forecast at 08:30 after a restart: desired %d, step %+v; want at least the 12 the ramp at 08:50 needs, by a ForecastAhead step", d.GetDesiredReplicas(), step)
	}
	t.Logf("08:30: desired %d; %s", d.GetDesiredReplicas(), step.GetMessage())
	for _, want := range []string{"forecast cpu resource utilization", "period daily", "horizon 30m0s", "replicas of demand predicted", "confidence"} {
		if !strings.Contains(step.GetMessage(), want) {
			t.Errorf("forecast step's message %q does not say %q", step.GetMessage(), want)
		}
	}
}

// A request's pod_startup sets the forecast's lead time (pod_startup plus
// a 15 s sync) in place of spec.forecast.lead_time: the explanation's
// horizon shows it.
func TestForecastLeadFromPodStartup(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	var last *setpointv1.Decision
	for now := dayStart; !now.After(dayStart.Add(56*time.Hour + 20*time.Minute)); now = now.Add(10 * time.Minute) {
		ts.clock.Set(now)
		req := forecastOn(loadRequest("fc", now, dailyDemand(now)))
		req.PodStartup = durationpb.New(20 * time.Minute)
		resp, err := c.Recommend(t.Context(), req)
		if err != nil {
			t.Fatalf("at %s: %v", now, err)
		}
		last = resp.GetDecision()
	}
	step := forecastStep(last)
	if step == nil || !strings.Contains(step.GetMessage(), "horizon 20m15s") {
		t.Errorf("at 08:20 with pod_startup 20m: step %+v; want a forecast of horizon 20m15s", step)
	}
}

// Each invalid forecast field, and pod_startup, is InvalidArgument naming
// it.
func TestForecastValidationNamesField(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	for _, tc := range []struct {
		name  string
		edit  func(*setpointv1.RecommendRequest)
		field string
	}{
		{"zero lead_time", func(r *setpointv1.RecommendRequest) { r.Spec.Forecast.LeadTime = durationpb.New(0) }, "spec.forecast.lead_time"},
		{"negative lead_time", func(r *setpointv1.RecommendRequest) { r.Spec.Forecast.LeadTime = durationpb.New(-time.Minute) }, "spec.forecast.lead_time"},
		{"lead_time of a day", func(r *setpointv1.RecommendRequest) { r.Spec.Forecast.LeadTime = durationpb.New(24 * time.Hour) }, "spec.forecast.lead_time"},
		{"max_error above 1", func(r *setpointv1.RecommendRequest) { r.Spec.Forecast.MaxError = 1.5 }, "spec.forecast.max_error"},
		{"negative max_error", func(r *setpointv1.RecommendRequest) { r.Spec.Forecast.MaxError = -0.1 }, "spec.forecast.max_error"},
		{"NaN max_error", func(r *setpointv1.RecommendRequest) { r.Spec.Forecast.MaxError = math.NaN() }, "spec.forecast.max_error"},
		{"negative pod_startup", func(r *setpointv1.RecommendRequest) { r.PodStartup = durationpb.New(-time.Second) }, "pod_startup"},
		{"pod_startup of a day", func(r *setpointv1.RecommendRequest) { r.PodStartup = durationpb.New(24 * time.Hour) }, "pod_startup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := forecastOn(request("valid", 2, t0))
			req.PodStartup = durationpb.New(time.Minute)
			if _, err := c.Recommend(t.Context(), req); err != nil {
				t.Fatalf("the valid request is refused: %v", err)
			}
			tc.edit(req)
			_, err := c.Recommend(t.Context(), req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("Recommend = %v; want InvalidArgument", err)
			}
			checkBadRequest(t, err, tc.field)
		})
	}
}
