package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/setpointhq/setpoint/forecast"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/admission"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/server/simulate"
	"github.com/setpointhq/setpoint/server/watch"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
	limits simulate.Limits
	// watch serves Watch streams (package watch).
	watch *watch.Streams
	// metrics are the service's Prometheus metrics.
	metrics *metrics
	// maxResponseBytes bounds a ListTargets page (listPage).
	maxResponseBytes int
	// clockWarned is when (Unix ns, by the wall clock) aheadOfClock last
	// warned.
	clockWarned atomic.Int64
}

// defaultPageSize is ListTargets' page size when the request sets none.
const defaultPageSize = 100

// Recommend decides and records one decision.
func (s *service) Recommend(ctx context.Context, req *setpointv1.RecommendRequest) (*setpointv1.RecommendResponse, error) {
	start := time.Now()
	d := decisions.Get().(*decision)
	in, err := convert.InputIn(req, s.now(), &d.scratch)
	if err != nil {
		d.release()
		s.metrics.decided(nil, in.Spec, err, time.Since(start))
		return nil, toStatus(ctx, s.log, err)
	}
	d.in, d.id, d.now = target.Input{Ref: convert.TargetRef(req.GetSpec().GetScaleTargetRef()), Engine: in, Fallback: convert.Fallback(req.GetSpec()), ReceivedSpec: convert.ReceivedSpec(req.GetSpec())}, s.newID(), in.Now
	d.forecast = convert.Forecast(req)
	admission.Arrived(ctx) // reaches the store: no longer announced to it (Store.Expect)
	rec, err := s.store.Decide(ctx, convert.Key(req.GetTarget()), d.decide)
	if err != nil {
		// Not released: Store.Decide does not promise that fn has
		// finished when it fails (its ctx ended, say), so d is left to
		// the garbage collector.
		s.metrics.decided(nil, in.Spec, err, time.Since(start))
		return nil, toStatus(ctx, s.log, err)
	}
	if lead := rec.Last.At.Sub(d.now); lead > maxClockLead {
		s.aheadOfClock(rec.Key, lead)
	}
	d.release()
	s.metrics.decided(&rec.Last.Decision, rec.Spec, nil, time.Since(start))
	return convert.RecommendResponse(*rec.Last, admission.ResponseMemory(ctx)), nil
}

// maxClockLead is how far after this server's clock a decision may be
// stamped before the server says another server's clock is ahead of its
// own. A target's clock never runs backwards (target.Decide stamps a
// decision after the target's last one), so a decision lands ahead of the
// clock when another server wrote the target with a clock that is ahead;
// concurrent decisions alone move a stamp by nanoseconds.
const maxClockLead = time.Second

// clockWarnEvery is how often, at most, a server logs that decisions land
// ahead of its clock; the metric counts every one.
const clockWarnEvery = time.Minute

// aheadOfClock counts a decision stamped lead after this server's clock
// and warns, at most once every clockWarnEvery.
func (s *service) aheadOfClock(key target.Key, lead time.Duration) {
	s.metrics.aheadOfClock.Inc()
	now := time.Now().UnixNano()
	last := s.clockWarned.Load()
	if now-last < int64(clockWarnEvery) || !s.clockWarned.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("a decision was stamped after this server's clock: another server that wrote the target has a clock ahead of this one (keep the servers' clocks synchronized, docs/scale-out.md#clocks)",
		"target", key.String(), "lead", lead.String())
}

// decision is what one Recommend call decides from, in memory kept across
// calls (decisions): the engine's input converted into scratch, the
// decision's ID and time, and its forecast settings (nil: no forecast).
type decision struct {
	scratch  convert.Scratch
	in       target.Input
	id       string
	now      time.Time
	forecast *forecast.Config
}

// decide is the store update of the decision. Without a forecast the
// target keeps no forecast history.
func (d *decision) decide(rec *target.Record) error {
	if d.forecast != nil {
		return decideForecast(rec, d.in, *d.forecast, d.id, d.now)
	}
	if err := target.Decide(rec, d.in, d.id, d.now); err != nil {
		return err
	}
	rec.Forecasts = nil
	return nil
}

// decisions keeps the memory of Recommend's decisions. Lifetime: a
// decision is taken at the start of one Recommend call and released by it
// when its input is refused (before any store call) or when the store's
// Decide succeeded: the stored record is then what its fn's last run
// made, no run of it is left to come, and the engine keeps none of the
// input in the decision it makes (convert.TestInputInKeepsNothing), so
// nothing refers to the decision's memory any more. After a failed Decide
// (its ctx ended, a store error, an engine error) it is not released: the
// Store contract does not say that fn has finished then. It is released
// cleared: pooled memory keeps no request alive.
var decisions = sync.Pool{New: func() any { return new(decision) }}

// release clears d and puts it back in decisions.
func (d *decision) release() {
	d.scratch.Reset()
	d.in, d.id, d.now, d.forecast = target.Input{}, "", time.Time{}, nil
	decisions.Put(d)
}

// Observe records what happened after a decision.
func (s *service) Observe(ctx context.Context, req *setpointv1.ObserveRequest) (*setpointv1.ObserveResponse, error) {
	now, o := s.now(), convert.Observation(req)
	admission.Arrived(ctx)
	rec, err := s.store.Update(ctx, convert.Key(req.GetTarget()), func(rec *target.Record) error {
		return target.Observe(rec, o, now)
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

// ListTargets returns one page of targets.
func (s *service) ListTargets(ctx context.Context, req *setpointv1.ListTargetsRequest) (*setpointv1.ListTargetsResponse, error) {
	q := store.Query{Cluster: req.GetCluster(), Namespace: req.GetNamespace(), PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	if q.PageSize == 0 {
		q.PageSize = defaultPageSize
	}
	return s.listPage(ctx, q) // pages sized by bytes
}

// DeleteTarget forgets a target.
func (s *service) DeleteTarget(ctx context.Context, req *setpointv1.DeleteTargetRequest) (*setpointv1.DeleteTargetResponse, error) {
	admission.Arrived(ctx)
	if err := s.store.Delete(ctx, convert.Key(req.GetTarget())); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &setpointv1.DeleteTargetResponse{}, nil
}

// ListDecisions returns one page of a target's decision log.
func (s *service) ListDecisions(ctx context.Context, req *setpointv1.ListDecisionsRequest) (*setpointv1.ListDecisionsResponse, error) {
	q := store.DecisionQuery{PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	if req.GetStartTime() != nil {
		q.From = req.GetStartTime().AsTime()
	}
	if req.GetEndTime() != nil {
		q.To = req.GetEndTime().AsTime()
	}
	logged, next, err := s.store.Decisions(ctx, convert.Key(req.GetTarget()), q)
	if errors.Is(err, store.ErrInvalid) && q.PageToken != "" {
		ve := &setpointv1.ValidationError{}
		ve.Add("page_token", "is not a token of this query's pages")
		err = ve
	}
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &setpointv1.ListDecisionsResponse{NextPageToken: next}
	for _, d := range logged {
		resp.Decisions = append(resp.Decisions, convert.LoggedDecision(d))
	}
	return resp, nil
}

// listPage returns one ListTargets page of at most maxResponseBytes
// encoded (but at least one target): when the store's page is larger, the
// store is asked again for as many targets as fit, with their own next
// page token, so no target is skipped and no client's receive limit is
// exceeded. Records that cannot be decoded are logged and left out.
func (s *service) listPage(ctx context.Context, q store.Query) (*setpointv1.ListTargetsResponse, error) {
	for {
		recs, next, err := s.store.List(ctx, q)
		if errors.Is(err, store.ErrInvalid) && q.PageToken != "" {
			// The only invalid argument Validate cannot see: a page token
			// that is not one this query handed out.
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
		total, taken, full := 0, 0, false // taken: records of recs put in the page or left out
		for _, rec := range recs {
			if strings.HasPrefix(rec.Key.Cluster, "@") {
				taken++
				continue // the service's own records (fleets): not targets
			}
			t, err := convert.Target(rec)
			if err != nil {
				return nil, toStatus(ctx, s.log, err)
			}
			total += proto.Size(t) + 8 // with the field's tag and length
			if total > s.maxResponseBytes && len(resp.Targets) > 0 {
				full = true
				break
			}
			resp.Targets = append(resp.Targets, t)
			taken++
		}
		if !full {
			return resp, nil
		}
		q.PageSize = taken
	}
}

// Simulate runs a what-if through the engine with an in-memory history. It
// never writes the store; with seed_from it reads one record.
func (s *service) Simulate(ctx context.Context, req *setpointv1.SimulateRequest) (*setpointv1.SimulateResponse, error) {
	return s.simulate(ctx, req, nil)
}

// simulate is Simulate, with seed (when not nil) called on the simulation
// before it runs.
func (s *service) simulate(ctx context.Context, req *setpointv1.SimulateRequest, seed func(*simulate.Simulation)) (*setpointv1.SimulateResponse, error) {
	sim, err := simulate.New(req, s.limits)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	if seed != nil {
		seed(sim)
	}
	if seed := req.GetSeedFrom(); seed != nil {
		if err := reserved("seed_from.cluster", seed.GetCluster()); err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		if err := s.mayRead(ctx, seed.GetCluster()); err != nil {
			return nil, err
		}
		rec, err := s.store.Get(ctx, convert.Key(seed))
		if err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		if err := sim.Seed(rec); err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
	}
	resp, err := sim.Run(ctx)
	if err != nil {
		return nil, toStatus(ctx, s.log, simulateError(err))
	}
	return resp, nil
}

// Watch streams the changes recorded after the request's resume point
// that match its filter and that the caller may read (package watch).
func (s *service) Watch(req *setpointv1.WatchRequest, stream grpc.ServerStreamingServer[setpointv1.WatchResponse]) error {
	return s.watch.Watch(req, stream)
}

// mayRead returns nil when the caller may read the targets of cluster, a
// PermissionDenied or Unauthenticated status otherwise. Without
// authentication everyone may read everything.
func (s *service) mayRead(ctx context.Context, cluster string) error {
	if !s.authenticated {
		return nil
	}
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return status.Error(codes.Unauthenticated, "not authenticated")
	}
	if !p.CanRead(cluster) {
		return admission.ErrPermissionDenied
	}
	return nil
}

// reserved returns a *setpointv1.ValidationError naming field when cluster
// starts with "@": such clusters hold the service's own records (its
// fleets, package fleets), which the target methods never read or write.
func reserved(field, cluster string) error {
	if !strings.HasPrefix(cluster, "@") {
		return nil
	}
	ve := &setpointv1.ValidationError{}
	ve.Add(field, "must not start with '@' (reserved for the service's own records)")
	return ve
}
