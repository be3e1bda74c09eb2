// Package target owns one autoscaler target: what Setpoint remembers of it
// (Record) and the two ways it changes (Decide and Observe).
//
// A target is identified by a Key (cluster, namespace, name). Its Record
// holds the scale target reference and the resolved spec and settings last
// received, the status the next decision starts from, the engine's history
// (recommendations and scale events), the last decision together with what
// it started from (status and replica count), and the observed events.
//
// # Transitions
//
// Decide and Observe are the only functions that change a Record. They are
// pure: they read nothing but their arguments (the time is a parameter),
// start no goroutine and keep no reference to their arguments, so a store
// may run them more than once inside a transaction. The server runs them
// inside store.Store.Update; Simulate and the conformance drivers run them
// on a Record kept in memory. Because all of them call the same two
// functions, a stored target, a simulated one and a replayed scenario
// cannot drift apart.
//
// Decide runs the engine from the record's status and history and records
// the outcome:
//
//	err := target.Decide(&rec, target.Input{Ref: ref, Engine: in}, id, now)
//	// rec.Last.Decision is the engine's answer; rec.Status and
//	// rec.History are what the next decision starts from.
//
// Observe records what the caller did with a decision:
//
//	err := target.Observe(&rec, target.Observation{
//		Kind: target.EventApplied, DecisionID: id, From: 2, To: 3,
//	}, now)
//
// An applied rescale becomes a scale event in the history (once per
// decision, so a retried report is harmless), a failed one restores what
// the decision started from (AbleToScale=False/FailedUpdateScale), a change
// made by someone else is only an event.
//
// # Fallback
//
// Input.Fallback gives a target KEDA's metric-outage fallback: once the
// status says the metrics have been failing (ScalingActive=False) for
// Fallback.After, Decide adds a fallback proposal to the engine's input;
// the engine uses it only if that decision's metrics fail too, and says so
// with the FallbackActive condition. The failure's start is the condition's
// transition time, so the fallback needs no state of its own.
//
// Invariants, kept by every transition:
//   - Record.Last.Decision.History is empty; Record.History is the history.
//   - Record.Status is the status the next decision starts from.
//   - Record.Last.Before and Record.Last.From are the status and replica
//     count the last decision started from; Observe needs nothing else.
//   - Record.Events only grow at the end (a store may trim the oldest).
//   - Record.LastSeen is the time of the last transition that changed the
//     record (a retried applied report changes nothing); it never moves
//     backwards, so decisions and events are stamped in the order they
//     are recorded, whichever server's clock made them.
//   - A transition that returns an error leaves the record unchanged.
//
// The package imports the engine and the standard library only; it knows
// nothing of the wire format or the disk.
package target
