package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/internal/conformance"
	"github.com/setpointhq/setpoint/internal/scenario"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/protobuf/testing/protocmp"
)

var update = flag.Bool("update", false, "rewrite the examples/ files derived from the conformance corpus")

// simulateExamples are the examples/ files derived from conformance
// scenarios: each is the scenario's inputs as one SimulateRequest.
var simulateExamples = []struct {
	file, corpus, scenario string
}{
	{"simulate-scale-up-limit-then-stabilized.json", "scale-to-zero.json", "scale-to-zero/down-and-up-obj-val/1"},
	{"simulate-cpu-ramp-up.json", "resource-utilization.json", "resource-utilization/cpu-util-ramp-up/0"},
	{"simulate-shorten-scale-down-window.json", "spec-edits.json", "spec-edits/window-obj-avg-drop/38"},
}

// TestSimulateExamples: each example is exactly its scenario's inputs, and
// `setpointctl simulate -f` on it prints the step table of the scenario's
// expectations (the Kubernetes controller's recorded outcomes).
func TestSimulateExamples(t *testing.T) {
	addr := startServerOpts(t, server.Options{})
	for _, ex := range simulateExamples {
		t.Run(ex.file, func(t *testing.T) {
			sc := loadScenario(t, ex.corpus, ex.scenario)
			want := conformance.SimulateRequest(sc)
			path := filepath.Join("../../examples", ex.file)
			if *update {
				var buf bytes.Buffer
				if err := printMessage(&buf, "json", want); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := &setpointv1.SimulateRequest{}
			if err := readMessage(nil, path, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Fatalf("%s is not the inputs of %s (go test ./cmd/setpointctl -run TestSimulateExamples -update rewrites it) (-scenario +file):\n%s", path, ex.scenario, diff)
			}

			out, err := ctl(t.Context(), addr, "simulate", "-f", path)
			if err != nil {
				t.Fatal(err)
			}
			var expected bytes.Buffer
			if err := printSimulation(&expected, expectedSteps(sc), false); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(expected.String(), out); diff != "" {
				t.Errorf("setpointctl simulate -f %s (-conformance expectations +printed):\n%s", path, diff)
			}
		})
	}
}

// expectedSteps are a scenario's recorded outcomes as table rows.
func expectedSteps(sc *scenario.Scenario) []simStep {
	var steps []simStep
	for _, st := range sc.Steps {
		e := st.Expect
		s := simStep{Time: st.Time.UTC(), Current: e.CurrentReplicas, Desired: e.DesiredReplicas, Scale: e.Scale, Failed: !e.OK}
		for _, c := range e.Conditions {
			s.Conditions = append(s.Conditions, simCondition{c.Type, c.Status, c.Reason})
		}
		steps = append(steps, s)
	}
	return steps
}

func loadScenario(t *testing.T, file, name string) *scenario.Scenario {
	t.Helper()
	scs, lerr := scenario.LoadFile(filepath.Join("../../testdata/conformance/scenarios", file))
	if lerr != nil {
		t.Fatal(lerr)
	}
	for i := range scs {
		if scs[i].Name == name {
			return &scs[i]
		}
	}
	t.Fatalf("no scenario %s in %s", name, file)
	return nil
}

// TestSimulatePodModel runs the hand-written what-if example: four pods at
// 90% of their cpu request against a 60% target, then load falling.
func TestSimulatePodModel(t *testing.T) {
	addr := startServerOpts(t, server.Options{})
	out, err := ctl(t.Context(), addr, "simulate", "-f", "../../examples/simulate-pod-model.yaml", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+6 {
		t.Fatalf("want a header and 6 steps, got\n%s", out)
	}
	// Each row: STEP TIME CURRENT DESIRED SCALE ...
	want := [][]string{
		{"0", "4", "6", "→ 6"}, // 90% over 60%: ceil(4 × 1.5) = 6
		{"1", "6", "6", "-"},   // 60%: at the target
		{"2", "6", "6", "-"},   // 30% would give 3, held by the 5-minute window
		{"3", "6", "6", "-"},
		{"4", "6", "6", "-"},
		{"5", "6", "3", "→ 3"}, // the window has passed: ceil(6 × 0.5) = 3
	}
	for i, w := range want {
		f := strings.Fields(lines[1+i])
		got := []string{f[0], f[2], f[3], f[4]}
		if f[4] == "→" {
			got[3] = "→ " + f[5]
		}
		if !cmp.Equal(w, got) {
			t.Errorf("step %d: got %v, want %v\n%s", i, got, w, out)
		}
	}
	if !strings.Contains(out, "ScaleDownStabilized") {
		t.Errorf("no step was held by the stabilization window:\n%s", out)
	}
}

// TestSimulateSeedFrom: --seed-from starts from a stored target's status
// (here: the conditions of its last decision, ScaledToZero among them) and
// fails for a target the service does not keep.
func TestSimulateSeedFrom(t *testing.T) {
	addr := startServer(t)
	if _, err := ctl(t.Context(), addr, "recommend", "-f", example); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "what-if.yaml")
	if err := os.WriteFile(file, []byte(`
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 10
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}}]
podModel: {initialReplicas: 3, requests: {cpu: 500m}}
steps: [{time: "2026-03-01T12:01:00Z", metricValues: ["100m"]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh, err := ctl(t.Context(), addr, "simulate", "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	seeded, err := ctl(t.Context(), addr, "simulate", "-f", file, "--seed-from", "dev/shop/web")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fresh, "SCALEDTOZERO") || !strings.Contains(seeded, "False/NotScaledToZero") {
		t.Errorf("seeding did not carry the stored status over:\nfresh:\n%s\nseeded:\n%s", fresh, seeded)
	}
	if _, err := ctl(t.Context(), addr, "simulate", "-f", file, "--seed-from", "dev/shop/nope"); err == nil {
		t.Error("--seed-from a missing target succeeded")
	}
}
