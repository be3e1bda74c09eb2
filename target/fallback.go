package target

import (
	"fmt"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// FallbackBehavior says which replica count a fallback proposes, with
// KEDA's spelling (ScaledObject spec.fallback.behavior).
type FallbackBehavior string

// The fallback behaviors.
const (
	// FallbackStatic proposes Fallback.Replicas.
	FallbackStatic FallbackBehavior = "static"
	// FallbackCurrentReplicas proposes the current replica count: the
	// target stays where it is.
	FallbackCurrentReplicas FallbackBehavior = "currentReplicas"
	// FallbackCurrentReplicasIfHigher proposes the current count when it
	// is higher than Fallback.Replicas, Fallback.Replicas otherwise.
	FallbackCurrentReplicasIfHigher FallbackBehavior = "currentReplicasIfHigher"
	// FallbackCurrentReplicasIfLower proposes the current count when it is
	// lower than Fallback.Replicas, Fallback.Replicas otherwise.
	FallbackCurrentReplicasIfLower FallbackBehavior = "currentReplicasIfLower"
)

// Fallback is what a target does while its metrics fail: once they have
// failed for After, each decision whose metrics fail again is given a
// fallback proposal (engine.ProposalFallback) of the count Behavior
// selects. The engine merges it by max with what the metrics that did not
// fail propose, and ignores it when they are all healthy.
//
// The threshold is a duration, not a count of syncs as in KEDA's
// failureThreshold: the time the metrics started failing is already part
// of every stored status (ScalingActive=False and its transition time), so
// the fallback needs no new state, survives restarts, and means the same
// whichever server or agent made the syncs and however often they came.
// KEDA's failureThreshold n at a sync period p is After = n·p: the
// fallback applies from the (n+1)-th failing sync, as KEDA's does.
type Fallback struct {
	// After is how long the metrics must have been failing before the
	// fallback applies; 0 applies it from the second failing decision.
	After time.Duration
	// Behavior selects the proposed count.
	Behavior FallbackBehavior
	// Replicas is the fallback replica count for FallbackStatic and the
	// bound the current count is compared with for the IfHigher/IfLower
	// behaviors.
	Replicas int32
}

// validate checks f, naming the offending field as the engine does.
func (f *Fallback) validate() error {
	switch f.Behavior {
	case FallbackStatic, FallbackCurrentReplicas, FallbackCurrentReplicasIfHigher, FallbackCurrentReplicasIfLower:
	default:
		return &engine.FieldError{Field: "fallback.behavior", Reason: fmt.Sprintf(
			"must be static, currentReplicas, currentReplicasIfHigher or currentReplicasIfLower, got %q", f.Behavior)}
	}
	if f.Replicas < 0 {
		return &engine.FieldError{Field: "fallback.replicas", Reason: fmt.Sprintf("must be >= 0, got %d", f.Replicas)}
	}
	if f.After < 0 {
		return &engine.FieldError{Field: "fallback.after", Reason: fmt.Sprintf("must be >= 0, got %s", f.After)}
	}
	return nil
}

// FailingSince returns when the metrics of the target whose status is st
// started failing, and false when the last decision's metrics did not
// fail: ScalingActive=False for any reason but ScalingDisabled (a target
// at zero replicas), since its last transition.
func FailingSince(st engine.Status) (time.Time, bool) {
	for _, c := range st.Conditions {
		if c.Type == engine.ScalingActive {
			if c.Status == engine.ConditionFalse && c.Reason != "ScalingDisabled" {
				return c.LastTransitionTime, true
			}
			return time.Time{}, false
		}
	}
	return time.Time{}, false
}

// FallbackProposal returns the proposal f makes at now for a target whose
// status is st and whose scale has current replicas, and false when the
// metrics have not been failing for f.After yet. The engine uses the
// proposal only if this decision's metrics fail too.
func FallbackProposal(f Fallback, st engine.Status, current int32, now time.Time) (engine.Proposal, bool) {
	since, failing := FailingSince(st)
	if !failing || now.Sub(since) < f.After {
		return engine.Proposal{}, false
	}
	n := f.Replicas
	switch f.Behavior {
	case FallbackCurrentReplicas:
		n = current
	case FallbackCurrentReplicasIfHigher:
		n = max(current, f.Replicas)
	case FallbackCurrentReplicasIfLower:
		n = min(current, f.Replicas)
	}
	return engine.Proposal{
		Name:        "fallback",
		Kind:        engine.ProposalFallback,
		Replicas:    n,
		Explanation: fmt.Sprintf("metrics failing since %s (%s, over %s); behavior %s", since.UTC().Format(time.RFC3339), now.Sub(since).Round(time.Second), f.After, f.Behavior),
	}, true
}
