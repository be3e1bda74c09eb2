package server

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/store"
)

// service implements setpointv1.AutoscalerServiceServer.
type service struct {
	setpointv1.UnimplementedAutoscalerServiceServer

	store store.Store
	now   func() time.Time
	newID func() string
	log   *slog.Logger

	// authenticated says callers are authenticated: a call without a
	// principal is refused by the handlers that filter by permission.
	authenticated bool
	// limits bound Simulate calls.
	limits simulateLimits
	// hub fans the store's change feed out to Watch streams; nil when the
	// store keeps no feed.
	hub *hub
	// metrics are the service's Prometheus metrics.
	metrics *metrics
}

// defaultPageSize is ListTargets' page size when the request sets none.
const defaultPageSize = 100

// Recommend decides and records one decision.
func (s *service) Recommend(ctx context.Context, req *setpointv1.RecommendRequest) (*setpointv1.RecommendResponse, error) {
	start := time.Now()
	in, err := convert.Input(req, s.now())
	if err != nil {
		s.metrics.decided(nil, in.Spec, err, time.Since(start))
		return nil, toStatus(ctx, s.log, err)
	}
	id, ref := s.newID(), convert.TargetRef(req.GetSpec().GetScaleTargetRef())
	rec, err := s.store.Update(ctx, convert.Key(req.GetTarget()), func(rec *store.Record) error {
		return decide(rec, in, ref, id)
	})
	if err != nil {
		s.metrics.decided(nil, in.Spec, err, time.Since(start))
		return nil, toStatus(ctx, s.log, err)
	}
	s.metrics.decided(&rec.Last.Decision, rec.Spec, nil, time.Since(start))
	return &setpointv1.RecommendResponse{Decision: convert.Decision(*rec.Last)}, nil
}

// Observe records what happened after a decision.
func (s *service) Observe(ctx context.Context, req *setpointv1.ObserveRequest) (*setpointv1.ObserveResponse, error) {
	now := s.now()
	rec, err := s.store.Update(ctx, convert.Key(req.GetTarget()), func(rec *store.Record) error {
		return observe(rec, req, now)
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	if n := len(rec.Events); n > 0 {
		s.metrics.observations.WithLabelValues(string(rec.Events[n-1].Kind)).Inc()
	}
	return &setpointv1.ObserveResponse{Status: convert.Status(rec.Status)}, nil
}

// GetTarget returns everything kept for one target.
func (s *service) GetTarget(ctx context.Context, req *setpointv1.GetTargetRequest) (*setpointv1.GetTargetResponse, error) {
	rec, err := s.store.Get(ctx, convert.Key(req.GetTarget()))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	t, err := convert.Target(rec)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &setpointv1.GetTargetResponse{Target: t}, nil
}

// ListTargets returns one page of targets. Records that cannot be decoded
// are logged and left out.
func (s *service) ListTargets(ctx context.Context, req *setpointv1.ListTargetsRequest) (*setpointv1.ListTargetsResponse, error) {
	q := store.Query{Cluster: req.GetCluster(), Namespace: req.GetNamespace(), PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	if q.PageSize == 0 {
		q.PageSize = defaultPageSize
	}
	recs, next, err := s.store.List(ctx, q)
	if errors.Is(err, store.ErrInvalid) && q.PageToken != "" {
		// The only invalid argument Validate cannot see: a page token that
		// is not one this query handed out.
		ve := &setpointv1.ValidationError{}
		ve.Add("page_token", "is not a token of this query's pages")
		err = ve
	}
	if err != nil && len(recs) == 0 {
		return nil, toStatus(ctx, s.log, err)
	} else if err != nil {
		s.log.WarnContext(ctx, "list: records left out", "err", err)
	}
	resp := &setpointv1.ListTargetsResponse{NextPageToken: next}
	for _, rec := range recs {
		t, err := convert.Target(rec)
		if err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		resp.Targets = append(resp.Targets, t)
	}
	return resp, nil
}

// DeleteTarget forgets a target.
func (s *service) DeleteTarget(ctx context.Context, req *setpointv1.DeleteTargetRequest) (*setpointv1.DeleteTargetResponse, error) {
	if err := s.store.Delete(ctx, convert.Key(req.GetTarget())); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &setpointv1.DeleteTargetResponse{}, nil
}

// decide runs the engine on in from the record's status and history and
// records the outcome in rec. It depends only on its arguments, as
// store.Update requires.
func decide(rec *store.Record, in engine.Input, ref store.TargetRef, id string) error {
	in.Status = rec.Status
	d, err := engine.Decide(in, rec.History)
	if err != nil {
		return err
	}
	rec.TargetRef, rec.Spec, rec.Settings = ref, in.Spec, in.Settings
	rec.History, d.History = d.History, engine.History{}
	rec.Last = &store.LastDecision{ID: id, At: in.Now, Decision: d, Before: rec.Status}
	rec.Status = d.Status
	rec.LastSeen = in.Now
	return nil
}

// observe records an observation in rec at now: an applied rescale is
// added to the history (once per decision, so retries are harmless), a
// failed one restores the status the decision started from, an external
// change is only an event. An unknown target is store.ErrNotFound.
func observe(rec *store.Record, req *setpointv1.ObserveRequest, now time.Time) error {
	if rec.Last == nil {
		return store.ErrNotFound
	}
	ev := store.Event{At: now, DecisionID: req.GetDecisionId()}
	switch c := req.GetChange().(type) {
	case *setpointv1.ObserveRequest_Applied:
		ev.Kind, ev.From, ev.To = store.EventApplied, c.Applied.GetFrom(), c.Applied.GetTo()
		if slices.ContainsFunc(rec.Events, func(e store.Event) bool { return e.Kind == store.EventApplied && e.DecisionID == ev.DecisionID }) {
			return nil
		}
		rec.History = engine.RecordScale(rec.History, rec.Spec.Behavior, ev.From, ev.To, now)
	case *setpointv1.ObserveRequest_Failed:
		if req.GetDecisionId() != rec.Last.ID {
			return errStaleDecision
		}
		ev.Kind, ev.From, ev.To, ev.Message = store.EventFailed, rec.Last.Decision.Explanation.CurrentReplicas, c.Failed.GetTo(), c.Failed.GetMessage()
		rec.Status = engine.RescaleFailed(rec.Last.Before, rec.Last.Decision, now, ev.Message)
	case *setpointv1.ObserveRequest_External:
		ev.Kind, ev.From, ev.To = store.EventExternal, c.External.GetFrom(), c.External.GetTo()
	}
	rec.Events = append(rec.Events, ev)
	rec.LastSeen = now
	return nil
}
