package target

import (
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// Key identifies one autoscaler target across clusters.
type Key struct {
	// Cluster names the cluster the autoscaler lives in.
	Cluster string
	// Namespace is the autoscaler's namespace.
	Namespace string
	// Name is the autoscaler's name.
	Name string
}

// String formats the key as cluster/namespace/name, for messages.
func (k Key) String() string {
	return k.Cluster + "/" + k.Namespace + "/" + k.Name
}

// Ref is the autoscaler's scale target reference.
type Ref struct {
	// APIVersion is the target's group/version, e.g. "apps/v1".
	APIVersion string
	// Kind is the target's kind, e.g. "Deployment".
	Kind string
	// Name is the target's name.
	Name string
}

// EventKind says what an observation reported.
type EventKind string

// The kinds of observed events.
const (
	// EventApplied: the caller applied a rescale (From → To).
	EventApplied EventKind = "Applied"
	// EventFailed: the caller failed to apply a rescale.
	EventFailed EventKind = "Failed"
	// EventExternal: the caller saw the replica count changed by someone
	// else (From → To); it does not count against scaling policies.
	EventExternal EventKind = "External"
)

// Event is one observed change, kept for the read APIs.
type Event struct {
	// Kind says what was observed.
	Kind EventKind
	// From is the replica count before the change.
	From int32
	// To is the replica count after the change (or the count that failed to
	// be applied).
	To int32
	// At is the server time the observation was recorded.
	At time.Time
	// DecisionID is the decision the change applied, when known.
	DecisionID string
	// Message is the caller's error text for EventFailed.
	Message string
}

// LastDecision is the most recent decision made for a target, with what it
// started from.
type LastDecision struct {
	// ID identifies the decision; observations refer to it.
	ID string
	// At is the server time the decision was made.
	At time.Time
	// Decision is the engine's outcome; its History field is empty
	// (Record.History holds the current history).
	Decision engine.Decision
	// Before is the status the decision started from (Record.Status before
	// the decision): a failed rescale restores its desired replicas, last
	// scale time and ScaledToZero condition.
	Before engine.Status
	// From is the replica count of the scale the decision started from: a
	// failed rescale is recorded as From → the count that failed.
	From int32
}

// Record is everything kept for one target.
type Record struct {
	// Key identifies the target.
	Key Key
	// Ref is the scale target reference last received.
	Ref Ref
	// Spec is the spec last received, resolved (defaults applied).
	Spec engine.Spec
	// Settings are the controller settings last received, resolved.
	Settings engine.Settings
	// Status is the autoscaler status left by the last transition; the
	// next decision starts from it.
	Status engine.Status
	// History is the engine's history for the target.
	History engine.History
	// Last is the most recent decision; nil before the first one.
	Last *LastDecision
	// Events are the observed events, oldest first. Transitions only
	// append; a store bounds them by dropping the oldest.
	Events []Event
	// LastSeen is the time of the last Decide or Observe.
	LastSeen time.Time
	// ReceivedSpec is the spec exactly as last received, in the caller's
	// wire form (the service keeps its API message's bytes), so that reads
	// return what was sent rather than a form rebuilt from Spec; empty
	// when none was kept. Only Decide changes it.
	ReceivedSpec string
	// Forecasts are the forecast histories of the target's metrics, one
	// per metric, kept while the target forecasts and empty otherwise.
	// The target package does not read them: they are package forecast's
	// encoding, changed by the caller's decision function around Decide.
	Forecasts []MetricHistory
	// Fleet is the fleet's state when the record is a fleet's (the
	// service's fleets, under a reserved cluster), empty for every other
	// target. Like Forecasts it is opaque to the target package and the
	// store: the service's encoding (a marshalled
	// setpoint.storage.v1.FleetState), changed by the service around
	// Decide and Observe.
	Fleet string
}

// MetricHistory is the forecast history of one metric of a target.
type MetricHistory struct {
	// Metric names the metric as the decision's explanation does.
	Metric string
	// History is the history in package forecast's encoding
	// (forecast.History.MarshalBinary): at most forecast.MaxBytes.
	History string
}

// LoggedDecision is one entry of a target's decision log: what the decision
// decided and how, without the words the engine's vocabulary says again.
// Explanation's metric names and step messages are empty and its ratios 0.
type LoggedDecision struct {
	// At is the server time the decision was made.
	At time.Time
	// DesiredReplicas is the decided replica count.
	DesiredReplicas int32
	// Rescale is true when the decision asked for a rescale.
	Rescale bool
	// Error is the reconcile error, cut to 256 bytes.
	Error string
	// Explanation is the decision's explanation, compacted as above.
	Explanation engine.Explanation
}
