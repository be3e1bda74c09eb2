package fleets

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/fleet"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/admission"
	"github.com/setpointhq/setpoint/server/simulate"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Service implements setpointv1.FleetServiceServer. Its fields are set
// by the server that registers it and not changed after.
type Service struct {
	setpointv1.UnimplementedFleetServiceServer

	// Store keeps the fleets' records.
	Store store.Store
	// Now is the server clock: reports are stamped and fleets decide with
	// it.
	Now func() time.Time
	// NewID returns a new decision ID.
	NewID func() string
	// Log receives the errors not sent to callers.
	Log *slog.Logger
	// Authenticated says callers are authenticated: the handlers check
	// the caller's principal against the fleet's members. Without it
	// everyone may do everything.
	Authenticated bool
	// Limits bound SimulateFleet as they bound Simulate.
	Limits simulate.Limits
	// ToStatus maps an error to the status a caller is answered (the
	// server's; *setpointv1.ValidationError becomes InvalidArgument naming
	// the fields).
	ToStatus func(context.Context, *slog.Logger, error) error
	// EngineField names the field of a RecommendRequest that an engine
	// field path ("spec.minReplicas") names ("spec.min_replicas"), "" when
	// none: how engine errors of a fleet's decision are reported.
	EngineField func(string) string
}

// Errors of the handlers' store updates, mapped by status.
var (
	// errDenied: the caller may not touch the fleet (or it does not
	// exist, for a caller who may not know).
	errDenied = errors.New("fleets: permission denied")
	// errNoFleet: no fleet is stored under the key.
	errNoFleet = errors.New("fleets: fleet not found")
)

// status maps a handler's error to the caller's status: the fleet
// package's and the engine's field errors name the request's fields.
func (s *Service) status(ctx context.Context, err error) error {
	var fe *engine.FieldError
	switch {
	case errors.Is(err, errDenied):
		return admission.ErrPermissionDenied
	case errors.Is(err, errNoFleet), errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, "fleet not found")
	case errors.Is(err, fleet.ErrInvalid):
		err = fleetField(err, "")
	case errors.As(err, &fe):
		if f := s.EngineField(fe.Field); f != "" {
			ve := &setpointv1.ValidationError{}
			ve.Add(f, "%s", fe.Reason)
			err = reprefix(ve, map[string]string{"spec": "spec.autoscaler", "settings": "spec.settings"}, "report")
		}
	}
	return s.ToStatus(ctx, s.Log, err)
}

// PutFleet creates a fleet or replaces its spec.
func (s *Service) PutFleet(ctx context.Context, req *setpointv1.PutFleetRequest) (*setpointv1.PutFleetResponse, error) {
	now := s.Now()
	r, err := resolve(req.GetFleet(), req.GetSpec(), now)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	who, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if !who.mayManage(req.GetSpec()) {
		return nil, admission.ErrPermissionDenied
	}
	received, err := req.GetSpec().MarshalVT()
	if err != nil {
		return nil, s.status(ctx, err)
	}
	rec, err := s.Store.Update(ctx, Key(req.GetFleet()), func(rec *target.Record) error {
		old, err := storedSpec(rec)
		if err != nil {
			return err
		}
		if old != nil && !who.mayManage(old) {
			return errDenied
		}
		st, err := decodeState(rec)
		if err != nil {
			return err
		}
		st.keepMembers(&r.fleet)
		if rec.Fleet, err = st.encode(); err != nil {
			return err
		}
		rec.Ref, rec.Spec, rec.Settings, rec.ReceivedSpec = r.ref, r.in.Spec, r.in.Settings, string(received)
		rec.LastSeen = later(now, rec.LastSeen)
		return nil
	})
	if err != nil {
		return nil, s.status(ctx, err)
	}
	f, err := fleetMessage(&rec, req.GetSpec())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &setpointv1.PutFleetResponse{Fleet: f}, nil
}

// GetFleet returns everything kept for one fleet.
func (s *Service) GetFleet(ctx context.Context, req *setpointv1.GetFleetRequest) (*setpointv1.GetFleetResponse, error) {
	rec, spec, err := s.get(ctx, req.GetFleet(), (*caller).mayRead)
	if err != nil {
		return nil, err
	}
	f, err := fleetMessage(&rec, spec)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &setpointv1.GetFleetResponse{Fleet: f}, nil
}

// defaultPageSize is ListFleets' page size when the request sets none.
const defaultPageSize = 100

// ListFleets returns one page of the fleets the caller may read. A page
// may hold fewer fleets than asked, none even, and still be followed by
// others: the store's page is filtered.
func (s *Service) ListFleets(ctx context.Context, req *setpointv1.ListFleetsRequest) (*setpointv1.ListFleetsResponse, error) {
	who, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	q := store.Query{Cluster: Cluster, Namespace: req.GetNamespace(), PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	if q.PageSize == 0 {
		q.PageSize = defaultPageSize
	}
	recs, next, err := s.Store.List(ctx, q)
	if errors.Is(err, store.ErrInvalid) && q.PageToken != "" {
		ve := &setpointv1.ValidationError{}
		ve.Add("page_token", "is not a token of this query's pages")
		err = ve
	}
	if err != nil && len(recs) == 0 {
		return nil, s.status(ctx, err)
	} else if err != nil {
		s.Log.WarnContext(ctx, "list fleets: records left out", "err", err)
	}
	resp := &setpointv1.ListFleetsResponse{NextPageToken: next}
	for i := range recs {
		spec, err := storedSpec(&recs[i])
		if err != nil || spec == nil {
			s.Log.WarnContext(ctx, "list fleets: a fleet's spec cannot be read", "fleet", recs[i].Key.String(), "err", err)
			continue
		}
		if !who.mayRead(spec) {
			continue
		}
		f, err := fleetMessage(&recs[i], spec)
		if err != nil {
			s.Log.WarnContext(ctx, "list fleets: a fleet's state cannot be read", "fleet", recs[i].Key.String(), "err", err)
			continue
		}
		resp.Fleets = append(resp.Fleets, f)
	}
	return resp, nil
}

// DeleteFleet forgets a fleet.
func (s *Service) DeleteFleet(ctx context.Context, req *setpointv1.DeleteFleetRequest) (*setpointv1.DeleteFleetResponse, error) {
	if _, _, err := s.get(ctx, req.GetFleet(), (*caller).mayManage); err != nil {
		return nil, err
	}
	if err := s.Store.Delete(ctx, Key(req.GetFleet())); err != nil {
		return nil, s.status(ctx, err)
	}
	return &setpointv1.DeleteFleetResponse{}, nil
}

// get reads a fleet the caller may touch as may says; a caller who may
// not is answered PermissionDenied whether or not the fleet exists.
func (s *Service) get(ctx context.Context, key *setpointv1.FleetKey, may func(*caller, *setpointv1.FleetSpec) bool) (target.Record, *setpointv1.FleetSpec, error) {
	who, err := s.caller(ctx)
	if err != nil {
		return target.Record{}, nil, err
	}
	rec, err := s.Store.Get(ctx, Key(key))
	if errors.Is(err, store.ErrNotFound) {
		err = errNoFleet
	}
	var spec *setpointv1.FleetSpec
	if err == nil {
		spec, err = storedSpec(&rec)
		if err == nil && spec == nil {
			err = errNoFleet
		}
	}
	if err == nil && !may(who, spec) {
		err = errDenied
	}
	if err != nil {
		return target.Record{}, nil, s.status(ctx, who.hide(err))
	}
	return rec, spec, nil
}

// later returns t, or floor when t is before it: a record's times never
// run backwards.
func later(t, floor time.Time) time.Time {
	if t.Before(floor) {
		return floor
	}
	return t
}
