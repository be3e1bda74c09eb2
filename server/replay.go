package server

// The Replay service (setpoint.console.v1.ReplayService, from
// proto/setpoint/console/v1): the console's what-if. The whole replay —
// the target's settings, its log, the simulation — is one call, so the
// admission bounds it as a Simulate (package fairness counts it as one)
// and refuses it before anything is read.

import (
	"context"

	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/server/simulate"
	"github.com/setpointhq/setpoint/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// replayer implements consolev1.ReplayServiceServer with the service's
// store and Simulate.
type replayer struct {
	consolev1.UnimplementedReplayServiceServer
	svc *service
}

// Replay replays the target's logged decisions in the request's range,
// the oldest of them up to the Simulate step limit, with the request's
// spec and the target's settings (simulate.Replay), through Simulate.
func (r replayer) Replay(ctx context.Context, req *consolev1.ReplayRequest) (*consolev1.ReplayResponse, error) {
	s := r.svc
	if err := reserved("target.cluster", req.GetTarget().GetCluster()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	if err := s.mayRead(ctx, req.GetTarget().GetCluster()); err != nil {
		return nil, err // the admission's policy checked it too
	}
	key := convert.Key(req.GetTarget())
	rec, err := s.store.Get(ctx, key)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	q := store.DecisionQuery{PageSize: min(s.limits.MaxSteps, setpointv1.MaxDecisionsPageSize)}
	if t := req.GetStartTime(); t != nil {
		q.From = t.AsTime()
	}
	if t := req.GetEndTime(); t != nil {
		q.To = t.AsTime()
	}
	var logged []*setpointv1.LoggedDecision
	for len(logged) < s.limits.MaxSteps {
		page, next, err := s.store.Decisions(ctx, key, q)
		if err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		for _, d := range page {
			logged = append(logged, convert.LoggedDecision(d))
		}
		if q.PageToken = next; next == "" {
			break
		}
	}
	if len(logged) == 0 {
		return nil, status.Error(codes.FailedPrecondition, "replay: the target has no logged decisions in the range")
	}
	logged = logged[:min(len(logged), s.limits.MaxSteps)]
	sim := simulate.Replay(req.GetSpec(), convert.ControllerSettings(rec.Settings), logged)
	// A forecast in the replayed spec forecasts from the target's stored
	// histories as they stood at the first replayed decision.
	start := logged[0].GetDecisionTime().AsTime()
	resp, err := s.simulate(ctx, sim, func(sim *simulate.Simulation) { sim.SeedForecasts(rec.Forecasts, start) })
	if err != nil {
		return nil, err
	}
	return &consolev1.ReplayResponse{Request: sim, Response: resp}, nil
}
