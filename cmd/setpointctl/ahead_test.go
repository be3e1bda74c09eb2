package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestSimulateAheadExample runs examples/simulate-ahead.yaml with and
// without its schedule and fallback: the table shows the window's floor
// and the fallback (a FALLBACKACTIVE column, the proposal steps in WHY).
func TestSimulateAheadExample(t *testing.T) {
	addr := startServerOpts(t, server.Options{})
	const path = "../../examples/simulate-ahead.yaml"
	out, err := ctl(t.Context(), addr, "simulate", "-f", path, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := desiredColumn(t, out), []string{"4", "8", "4", "4", "4", "6", "6"}; !slices.Equal(got, want) {
		t.Errorf("desired %v, want %v\n%s", got, want, out)
	}
	for _, w := range []string{"FALLBACKACTIVE", "True/FallbackActive", "Proposal 4→8 (ScheduleFloor)", "Proposal 0→6 (FallbackActive)", "False/MetricsHealthy"} {
		if !strings.Contains(out, w) {
			t.Errorf("printed\n%s\nwant it to contain %q", out, w)
		}
	}

	req := &setpointv1.SimulateRequest{}
	if err := readMessage(nil, path, req); err != nil {
		t.Fatal(err)
	}
	req.Spec.Schedules, req.Spec.Fallback = nil, nil
	b, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	c := &cli{stdin: bytes.NewReader(b), stdout: &plain, stderr: io.Discard, now: time.Now}
	if err := c.run(t.Context(), []string{"-addr", addr, "simulate", "-f", "-"}); err != nil {
		t.Fatal(err)
	}
	if got, want := desiredColumn(t, plain.String()), []string{"4", "4", "2", "2", "2", "2", "2"}; !slices.Equal(got, want) {
		t.Errorf("without schedule and fallback: desired %v, want %v (the example's comment)\n%s", got, want, plain.String())
	}
	if strings.Contains(plain.String(), "FALLBACKACTIVE") {
		t.Errorf("a FALLBACKACTIVE column without a fallback:\n%s", plain.String())
	}
}

// TestSimulateForecastNotes: with spec.forecast, simulate -o wide says in
// WHY why the forecast proposed nothing (no history yet at the first step,
// then too little of it); without -o wide it does not.
func TestSimulateForecastNotes(t *testing.T) {
	addr := startServerOpts(t, server.Options{})
	req := &setpointv1.SimulateRequest{}
	if err := readMessage(nil, "../../examples/simulate-ahead.yaml", req); err != nil {
		t.Fatal(err)
	}
	req.Spec.Schedules, req.Spec.Fallback = nil, nil
	req.Spec.Forecast = &setpointv1.Forecast{LeadTime: durationpb.New(5 * time.Minute)}
	b, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, wide := range []bool{true, false} {
		var out bytes.Buffer
		c := &cli{stdin: bytes.NewReader(b), stdout: &out, stderr: io.Discard, now: time.Now}
		args := []string{"-addr", addr, "simulate", "-f", "-"}
		if wide {
			args = append(args, "-o", "wide")
		}
		if err := c.run(t.Context(), args); err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"no forecast: no history yet", "48h0m0s needed"} {
			if strings.Contains(out.String(), w) != wide {
				t.Errorf("wide %v: printed\n%s\nwant it to contain %q: %v", wide, out.String(), w, wide)
			}
		}
	}
}

// desiredColumn returns the DESIRED cells of a simulate table.
func desiredColumn(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	col := slices.Index(strings.Fields(lines[0]), "DESIRED")
	if col < 0 {
		t.Fatalf("no DESIRED column:\n%s", out)
	}
	var got []string
	for _, l := range lines[1:] {
		got = append(got, strings.Fields(l)[col])
	}
	return got
}

// TestExplainProposal: explain says which proposal raised the decision.
func TestExplainProposal(t *testing.T) {
	addr := startServer(t)
	req := readExample(t)
	req.Spec.Schedules = []*setpointv1.ScheduleWindow{{Name: "business-hours", TimeZone: "Europe/Berlin", Start: "0 8 * * *", End: "0 18 * * *", MinReplicas: 7}}
	b, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	c := &cli{stdin: bytes.NewReader(b), stdout: io.Discard, stderr: io.Discard, now: time.Now}
	if err := c.run(t.Context(), []string{"-addr", addr, "recommend", "-f", "-"}); err != nil {
		t.Fatal(err)
	}
	out, err := ctl(t.Context(), addr, "explain", "dev/shop/web")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"raised by a proposal from outside the metrics, 3 → 7 (ScheduleFloor): ", "schedule business-hours", "limited by a scaling policy, 7 → 6", "decided to scale from 2 to 6"} {
		if !strings.Contains(out, w) {
			t.Errorf("explain printed\n%s\nwant it to contain %q", out, w)
		}
	}
}

// explain says a target forecasts, with its settings, and says nothing of
// forecasts for one that does not.
func TestExplainForecast(t *testing.T) {
	addr := startServer(t)
	req := &setpointv1.RecommendRequest{}
	if err := readMessage(nil, example, req); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl(t.Context(), addr, "recommend", "-f", example); err != nil {
		t.Fatal(err)
	}
	out, err := ctl(t.Context(), addr, "explain", "dev/shop/web")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "forecasts") {
		t.Errorf("explain without a forecast:\n%s", out)
	}
	req.Spec.Forecast = &setpointv1.Forecast{LeadTime: durationpb.New(5 * time.Minute), MaxError: 0.2}
	b, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	c := &cli{stdin: bytes.NewReader(b), stdout: io.Discard, stderr: io.Discard, now: time.Now}
	if err := c.run(t.Context(), []string{"-addr", addr, "recommend", "-f", "-"}); err != nil {
		t.Fatal(err)
	}
	out, err = ctl(t.Context(), addr, "explain", "dev/shop/web")
	if err != nil {
		t.Fatal(err)
	}
	if want := "It forecasts its metrics one lead time ahead (the pods' start-up as the agent measures it, plus 15s; 5m0s while not measured), silent while the forecast's backtest error is above 20%."; !strings.Contains(out, want) {
		t.Errorf("explain with a forecast:\n%s\nwant it to contain %q", out, want)
	}
}
