package server_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Simulate tries a fallback and a schedule on a timeline: the same steps
// with and without them, through a pod model. The metric fails from 15 s
// to 45 s (the fallback's 6 after 30 s of failure), and a one-minute
// window opens at 13:05 Berlin (12:05 UTC) with a floor of 8.
func TestSimulateTriesAhead(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	spec := legacySpec("web")
	fastUp(spec)
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	req := &setpointv1.SimulateRequest{
		Spec:     spec,
		PodModel: &setpointv1.PodModel{InitialReplicas: 2, Requests: map[string]string{"cpu": "500m"}},
		Steps: []*setpointv1.SimulateStep{
			{Time: at(0), MetricValues: []string{"250m"}},                // 50% of 50%: 2
			{Time: at(15 * time.Second), MetricValues: []string{""}},     // failing from here
			{Time: at(30 * time.Second), MetricValues: []string{""}},     // for 15 s
			{Time: at(45 * time.Second), MetricValues: []string{""}},     // for 30 s: the fallback's 6
			{Time: at(60 * time.Second), MetricValues: []string{"125m"}}, // healthy: 25% on 6 pods, 3
			{Time: at(5 * time.Minute), MetricValues: []string{"250m"}},  // the window is open: 8
			{Time: at(7 * time.Minute), MetricValues: []string{"125m"}},  // closed: 25% on 8 pods, 4
		},
	}
	without, err := c.Simulate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	with := proto.Clone(req).(*setpointv1.SimulateRequest)
	with.Spec.Fallback = &setpointv1.Fallback{FailureDuration: durationpb.New(30 * time.Second), Replicas: 6}
	with.Spec.Schedules = []*setpointv1.ScheduleWindow{{Name: "launch", TimeZone: "Europe/Berlin", Start: "5 13 * * *", Duration: durationpb.New(time.Minute), MinReplicas: 8}}
	got, err := c.Simulate(t.Context(), with)
	if err != nil {
		t.Fatal(err)
	}
	desired := func(r *setpointv1.SimulateResponse) []int32 {
		var out []int32
		for _, s := range r.GetSteps() {
			out = append(out, s.GetDecision().GetDesiredReplicas())
		}
		return out
	}
	wantWithout := []int32{2, 2, 2, 2, 1, 1, 1}
	wantWith := []int32{2, 2, 2, 6, 3, 8, 4}
	if g := desired(without); !slices.Equal(g, wantWithout) {
		t.Errorf("without: desired %v, want %v", g, wantWithout)
	}
	if g := desired(got); !slices.Equal(g, wantWith) {
		t.Errorf("with fallback and schedule: desired %v, want %v", g, wantWith)
	}
	if s := got.GetSteps(); len(s) == len(wantWith) {
		if fa := condition(s[3].GetDecision(), "FallbackActive"); fa.GetStatus() != "True" {
			t.Errorf("step 3: FallbackActive %+v; want True", fa)
		}
		if fa := condition(s[4].GetDecision(), "FallbackActive"); fa.GetStatus() != "False" {
			t.Errorf("step 4: FallbackActive %+v; want False", fa)
		}
		if p := proposalStep(s[5].GetDecision()); p == nil || p.GetReason() != "ScheduleFloor" || !strings.Contains(p.GetMessage(), "launch") {
			t.Errorf("step 5: proposal step %+v; want ScheduleFloor naming launch", p)
		}
	}
	// A spec edit turns the schedule off from the step it is made at.
	edited := proto.Clone(with).(*setpointv1.SimulateRequest)
	edited.Steps[5].Spec = proto.Clone(spec).(*setpointv1.HorizontalPodAutoscalerSpec)
	e, err := c.Simulate(t.Context(), edited)
	if err != nil {
		t.Fatal(err)
	}
	if g := desired(e); len(g) != 7 || g[3] != 6 || g[5] != 3 {
		t.Errorf("schedule edited away at step 5: desired %v, want the fallback's 6 at step 3 and 3 at step 5", g)
	}
}
