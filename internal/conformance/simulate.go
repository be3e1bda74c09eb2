package conformance

import (
	"context"
	"fmt"

	"github.com/setpointhq/setpoint/internal/scenario"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// SimulateRequest is the Simulate request that replays scenario sc: its
// spec and controller settings, and one step per scenario step carrying
// that step's spec edit, scale, pods and metrics API answers, built as the
// gRPC replay builds its Recommend requests.
func SimulateRequest(sc *scenario.Scenario) *setpointv1.SimulateRequest {
	out := &setpointv1.SimulateRequest{}
	for i := range sc.Steps {
		req := sc.Request(i)
		if i == 0 {
			out.Spec, out.Settings = req.GetSpec(), req.GetSettings()
		}
		step := &setpointv1.SimulateStep{
			Time:            timestamppb.New(sc.Steps[i].Time),
			Scale:           req.GetScale(),
			Pods:            req.GetPods(),
			ResourceMetrics: req.GetResourceMetrics(),
			Observations:    req.GetObservations(),
		}
		if i > 0 && sc.Steps[i].Spec != nil {
			step.Spec = req.GetSpec()
		}
		out.Steps = append(out.Steps, step)
	}
	return out
}

// Outcome reads a decision of the API as a scenario outcome.
func Outcome(dec *setpointv1.Decision) (scenario.Outcome, error) { return outcome(dec) }

// Simulate replays scenario sc with one Simulate call and compares every
// step's decision with the corpus. It returns the first mismatch (nil when
// all steps agree), or an error when the call failed. A step the corpus
// shows scaled must come back applied, and only such a step.
func Simulate(ctx context.Context, client setpointv1.AutoscalerServiceClient, sc *scenario.Scenario) (*scenario.Mismatch, error) {
	resp, err := client.Simulate(ctx, SimulateRequest(sc))
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	if len(resp.GetSteps()) != len(sc.Steps) {
		return nil, fmt.Errorf("simulate: %d step results for %d steps", len(resp.GetSteps()), len(sc.Steps))
	}
	for i, r := range resp.GetSteps() {
		got, err := outcome(r.GetDecision())
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		if m := scenario.Compare(&sc.Steps[i].Expect, got); m != nil {
			m.Step = i
			return m, nil
		}
		if want := sc.Steps[i].Expect.Scale != nil; r.GetApplied() != want {
			return &scenario.Mismatch{Step: i, Field: "applied", Want: fmt.Sprint(want), Got: fmt.Sprint(r.GetApplied())}, nil
		}
	}
	return nil, nil
}
