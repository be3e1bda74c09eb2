package conformance

import (
	"context"
	"fmt"

	"github.com/setpointhq/setpoint/internal/scenario"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// SimulateRequest is the Simulate request that replays scenario sc: its
// spec and controller settings, and one step per scenario step carrying
// that step's scale, pods and metrics API answers, built as the gRPC
// replay builds its Recommend requests.
func SimulateRequest(sc *scenario.Scenario) (*setpointv1.SimulateRequest, error) {
	ref := target.Ref{APIVersion: sc.HPA.Spec.ScaleTargetRef.APIVersion, Kind: sc.HPA.Spec.ScaleTargetRef.Kind, Name: sc.HPA.Spec.ScaleTargetRef.Name}
	out := &setpointv1.SimulateRequest{}
	for i := range sc.Steps {
		in, err := sc.Input(i)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		req, err := convert.Request(nil, ref, in)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		if i == 0 {
			out.Spec, out.Settings = req.GetSpec(), req.GetSettings()
		}
		out.Steps = append(out.Steps, &setpointv1.SimulateStep{
			Time:            timestamppb.New(in.Now),
			Scale:           req.GetScale(),
			Pods:            req.GetPods(),
			ResourceMetrics: req.GetResourceMetrics(),
			Observations:    req.GetObservations(),
		})
	}
	return out, nil
}

// Outcome reads a decision of the API as a scenario outcome.
func Outcome(dec *setpointv1.Decision) (scenario.Outcome, error) { return outcome(dec) }

// Simulate replays scenario sc with one Simulate call and compares every
// step's decision with the corpus. It returns the first mismatch (nil when
// all steps agree), or an error when the call failed. A step the corpus
// shows scaled must come back applied, and only such a step.
func Simulate(ctx context.Context, client setpointv1.AutoscalerServiceClient, sc *scenario.Scenario) (*scenario.Mismatch, error) {
	req, err := SimulateRequest(sc)
	if err != nil {
		return nil, err
	}
	resp, err := client.Simulate(ctx, req)
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
