package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fleetExample is the fleet of testdata/fleet.yaml.
const fleetExample = "testdata/fleet.yaml"

// fleetSimulateExample is the what-if of testdata/fleet-simulate.json.
const fleetSimulateExample = "testdata/fleet-simulate.json"

// memberReport is member's report at now: n ready pods requesting 100m
// cpu each, each using util millicores (util% of its request).
func memberReport(member string, now time.Time, n int32, util int64) *setpointv1.FleetReport {
	r := &setpointv1.FleetReport{
		Member:          member,
		Scale:           &setpointv1.Scale{Replicas: n, StatusReplicas: n, Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	started := timestamppb.New(now.Add(-time.Hour))
	for i := range n {
		pod := fmt.Sprintf("web-%s-%d", member, i)
		r.Pods = append(r.Pods, &setpointv1.Pod{
			Name: pod, Phase: "Running", StartTime: started,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: started},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "100m"}}},
		})
		r.ResourceMetrics.Items = append(r.ResourceMetrics.Items, &setpointv1.PodMetrics{
			Pod: pod, Timestamp: timestamppb.New(now.Add(-10 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": fmt.Sprintf("%dm", util)}}},
		})
	}
	return r
}

// load is what one member reports at one step: its replicas and their
// cpu utilization in percent.
type load struct {
	replicas int32
	util     int64
}

// fleetStory is the example's story, one entry per 15 s sync: the members
// that report and what. a, b and c run 4 pods each at the target; c's
// agent stops, the load moves to a and b, c is left out once its last
// report is 45 s old and a and b carry the total; c comes back and takes
// its share back one pod per minute. The replicas each member reports
// are the shares the fleet gave it (what its agent applied).
var fleetStory = []map[string]load{
	{"a": {4, 60}, "b": {4, 60}, "c": {4, 60}},
	{"a": {4, 60}, "b": {4, 60}, "c": {4, 60}},
	{"a": {4, 70}, "b": {4, 70}},
	{"a": {4, 80}, "b": {4, 80}},
	{"a": {4, 90}, "b": {4, 90}},
	{"a": {4, 90}, "b": {4, 90}},
	{"a": {6, 60}, "b": {6, 60}},
	{"a": {6, 60}, "b": {6, 60}, "c": {0, 0}},
	{"a": {5, 60}, "b": {5, 60}, "c": {2, 60}},
	{"a": {5, 60}, "b": {5, 60}, "c": {2, 60}},
	{"a": {5, 60}, "b": {5, 60}, "c": {2, 60}},
	{"a": {5, 60}, "b": {5, 60}, "c": {2, 60}},
	{"a": {5, 60}, "b": {5, 60}, "c": {2, 60}},
}

// storyStart is the instant of the story's first step.
var storyStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// storyReports are the reports of step i of fleetStory, received at now.
func storyReports(i int, now time.Time) []*setpointv1.FleetReport {
	var out []*setpointv1.FleetReport
	for _, m := range []string{"a", "b", "c"} {
		if l, ok := fleetStory[i][m]; ok {
			out = append(out, memberReport(m, now, l.replicas, l.util))
		}
	}
	return out
}

// readFleetExample is testdata/fleet.yaml.
func readFleetExample(t testing.TB) *setpointv1.PutFleetRequest {
	t.Helper()
	req := &setpointv1.PutFleetRequest{}
	if err := readMessage(nil, fleetExample, req); err != nil {
		t.Fatal(err)
	}
	return req
}

// fleetSimulateRequest is the example what-if: the fleet of
// testdata/fleet.yaml through fleetStory.
func fleetSimulateRequest(t testing.TB) *setpointv1.SimulateFleetRequest {
	req := &setpointv1.SimulateFleetRequest{Spec: readFleetExample(t).GetSpec()}
	for i := range fleetStory {
		now := storyStart.Add(time.Duration(i) * 15 * time.Second)
		req.Steps = append(req.Steps, &setpointv1.SimulateFleetStep{Time: timestamppb.New(now), Reports: storyReports(i, now)})
	}
	return req
}

// TestFleetSimulateExample: testdata/fleet-simulate.json is exactly the
// story's what-if (go test -run TestFleetSimulateExample -update rewrites
// it).
func TestFleetSimulateExample(t *testing.T) {
	want := fleetSimulateRequest(t)
	if *update {
		if err := os.WriteFile(fleetSimulateExample, compactSteps(t, want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := &setpointv1.SimulateFleetRequest{}
	if err := readMessage(nil, fleetSimulateExample, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("%s is not the story's what-if (-update rewrites it) (-story +file):\n%s", fleetSimulateExample, diff)
	}
}

// compactSteps writes a SimulateFleetRequest in JSON with its spec
// indented and each report on one line, so the file reads step by step.
func compactSteps(t *testing.T, req *setpointv1.SimulateFleetRequest) []byte {
	t.Helper()
	var spec bytes.Buffer
	if err := printMessage(&spec, "json", req.GetSpec()); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("{\n\"spec\": " + strings.TrimSpace(spec.String()) + ",\n\"steps\": [\n")
	for i, st := range req.GetSteps() {
		fmt.Fprintf(&b, "  {\"time\": %q, \"reports\": [\n", st.GetTime().AsTime().UTC().Format(time.RFC3339))
		for j, r := range st.GetReports() {
			line, err := protojson.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, line); err != nil {
				t.Fatal(err)
			}
			b.WriteString("    " + compact.String())
			if j < len(st.GetReports())-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString("  ]}")
		if i < len(req.GetSteps())-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("]}\n")
	return b.Bytes()
}
