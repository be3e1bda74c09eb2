package target

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// Errors of the transitions. Callers test them with errors.Is.
var (
	// ErrNoDecision: an observation was reported for a target that has no
	// decision yet.
	ErrNoDecision = errors.New("target: no decision made yet")
	// ErrStaleDecision: a failed rescale was reported for a decision that
	// is no longer the target's last one.
	ErrStaleDecision = errors.New("target: decision is not the target's last decision")
	// ErrUnknownDecision: an applied rescale was reported for a decision
	// that is not the one the target was last given.
	ErrUnknownDecision = errors.New("target: decision was not given to this target")
	// ErrInvalidObservation: an observation of an unknown kind.
	ErrInvalidObservation = errors.New("target: invalid observation")
)

// Input is what one decision is made from.
type Input struct {
	// Ref is the scale target reference received with the spec.
	Ref Ref
	// Engine is the engine's input: the resolved spec and settings, the
	// scale, pods and metrics, and proposals from outside the metrics
	// (schedules, forecasts). Its Now and Status are set by Decide.
	Engine engine.Input
	// Fallback, when set, adds a fallback proposal to the engine's input
	// once the target's metrics have been failing for Fallback.After.
	Fallback *Fallback
	// ReceivedSpec is the spec as received, kept in Record.ReceivedSpec.
	ReceivedSpec string
}

// Decide makes the decision of in at now for the target in rec and records
// it as decision id: rec's Ref, Spec, Settings and ReceivedSpec become in's, the engine
// runs from rec.Status and rec.History, and rec.Last, rec.Status,
// rec.History and rec.LastSeen take the outcome.
//
// A target's clock never runs backwards: when now is before rec.LastSeen
// (another server's clock, or an update retried after a conflict with a
// time taken before it), the decision is made and stamped at rec.LastSeen,
// and never at the previous decision's own time (one nanosecond after it
// instead), so decisions are stamped in the order they are recorded and
// no two of a target's decisions share a stamp (the decision log is kept
// by time).
//
// Decide is pure: equal arguments give equal records. When the engine
// rejects the input (an *engine.FieldError) Decide returns that error and
// leaves rec unchanged.
func Decide(rec *Record, in Input, id string, now time.Time) error {
	now = notBefore(now, rec.LastSeen)
	if rec.Last != nil && !now.After(rec.Last.At) {
		now = rec.Last.At.Add(time.Nanosecond)
	}
	e := in.Engine
	e.Now, e.Status = now, rec.Status
	if f := in.Fallback; f != nil {
		if err := f.validate(); err != nil {
			return err
		}
		if p, ok := FallbackProposal(*f, rec.Status, e.Scale.Replicas, now); ok {
			e.Proposals = append(e.Proposals[:len(e.Proposals):len(e.Proposals)], p)
		}
	}
	d, err := engine.Decide(e, rec.History)
	if err != nil {
		return err
	}
	rec.Ref, rec.Spec, rec.Settings, rec.ReceivedSpec = in.Ref, e.Spec, e.Settings, in.ReceivedSpec
	rec.History, d.History = d.History, engine.History{}
	rec.Last = &LastDecision{ID: id, At: now, Decision: d, Before: rec.Status, From: e.Scale.Replicas}
	rec.Status = d.Status
	rec.LastSeen = now
	return nil
}

// Observation is what a caller reports about a decision.
type Observation struct {
	// Kind says what happened.
	Kind EventKind
	// DecisionID is the decision the change concerns; required for
	// EventApplied (it makes a retried report harmless) and EventFailed
	// (it must be the last decision).
	DecisionID string
	// From and To are the replica counts before and after the change
	// (EventApplied, EventExternal). For EventFailed, To is the count that
	// could not be applied and From is taken from the decision.
	From, To int32
	// Message is the caller's error text for EventFailed.
	Message string
}

// Observe records o at now in rec and appends it to rec.Events:
//   - EventApplied adds a scale event From → To to the history, once per
//     decision: a second report of the same decision changes nothing. It
//     must name the last decision (ErrUnknownDecision otherwise): an id the
//     target was never given records nothing.
//   - EventFailed restores, in rec.Status, what the last decision started
//     from (engine.RescaleFailed); it must name the last decision
//     (ErrStaleDecision otherwise).
//   - EventExternal is only recorded as an event.
//
// As in Decide, a time before rec.LastSeen is taken as rec.LastSeen.
// A target without a decision is ErrNoDecision. Observe is pure; on an
// error it leaves rec unchanged.
func Observe(rec *Record, o Observation, now time.Time) error {
	if rec.Last == nil {
		return ErrNoDecision
	}
	now = notBefore(now, rec.LastSeen)
	ev := Event{Kind: o.Kind, From: o.From, To: o.To, At: now, DecisionID: o.DecisionID}
	switch o.Kind {
	case EventApplied:
		if slices.ContainsFunc(rec.Events, func(e Event) bool { return e.Kind == EventApplied && e.DecisionID == o.DecisionID }) {
			return nil
		}
		if o.DecisionID != rec.Last.ID {
			return ErrUnknownDecision // ids of other targets' or never-made decisions
		}
		rec.History = engine.RecordScale(rec.History, rec.Spec.Behavior, o.From, o.To, now)
	case EventFailed:
		if o.DecisionID != rec.Last.ID {
			return ErrStaleDecision
		}
		ev.From, ev.Message = rec.Last.From, o.Message
		rec.Status = engine.RescaleFailed(rec.Last.Before, rec.Last.Decision, now, o.Message)
	case EventExternal:
	default:
		return fmt.Errorf("%w: kind %q", ErrInvalidObservation, o.Kind)
	}
	rec.Events = append(rec.Events, ev)
	rec.LastSeen = now
	return nil
}

// notBefore returns t, or floor when t is before it.
func notBefore(t, floor time.Time) time.Time {
	if t.Before(floor) {
		return floor
	}
	return t
}
