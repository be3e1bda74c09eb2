package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// Errors returned by a Store. Callers test them with errors.Is.
var (
	// ErrNotFound: no record exists for the key.
	ErrNotFound = errors.New("store: target not found")
	// ErrCorrupt: the target's stored record could not be decoded; other
	// targets are unaffected.
	ErrCorrupt = errors.New("store: record cannot be decoded")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store: closed")
	// ErrInvalid: an argument cannot be used: a key too long to store, a
	// malformed page token, a Query with Namespace but no Cluster, a
	// negative page size.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrSchemaVersion: the file's layout is not one this binary can use
	// (written by a newer version, or not a Setpoint store at all).
	ErrSchemaVersion = errors.New("store: unsupported schema version")
)

// CorruptError is the error for a record that cannot be decoded. It
// matches ErrCorrupt with errors.Is.
type CorruptError struct {
	// Key identifies the record.
	Key Key
	// Err is what the decoder reported.
	Err error
}

// Error describes the corrupt record.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrCorrupt, e.Key, e.Err)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the decoder's error.
func (e *CorruptError) Unwrap() error { return e.Err }

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

// TargetRef is the autoscaler's scale target reference.
type TargetRef struct {
	// APIVersion is the target's group/version, e.g. "apps/v1".
	APIVersion string
	// Kind is the target's kind, e.g. "Deployment".
	Kind string
	// Name is the target's name.
	Name string
}

// EventKind says what an Observe call reported.
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

// LastDecision is the most recent decision made for a target.
type LastDecision struct {
	// ID identifies the decision; Observe calls refer to it.
	ID string
	// At is the server time the decision was made.
	At time.Time
	// Decision is the engine's outcome; its History field is left empty
	// (Record.History holds the current history).
	Decision engine.Decision
	// Before is the status the decision started from (Record.Status before
	// the decision). Observe needs it when the decision's rescale failed:
	// engine.RescaleFailed(Before, Decision, …) restores its desired
	// replicas, last scale time and ScaledToZero condition. Encoders must
	// persist it like Record.Status. Added by the server (issue "Service").
	Before engine.Status
}

// Record is everything kept for one target.
type Record struct {
	// Key identifies the target.
	Key Key
	// TargetRef is the scale target reference last seen.
	TargetRef TargetRef
	// Spec is the resolved spec last seen (defaults applied).
	Spec engine.Spec
	// Settings are the resolved controller settings last seen.
	Settings engine.Settings
	// Status is the autoscaler status left by the last decision or
	// observation; the next decision starts from it.
	Status engine.Status
	// History is the engine's history for the target.
	History engine.History
	// Last is the most recent decision; nil before the first one.
	Last *LastDecision
	// Events are the most recent observed events, oldest first, bounded by
	// the store.
	Events []Event
	// LastSeen is the server time of the last Recommend or Observe.
	LastSeen time.Time
}

// Query selects records for List.
type Query struct {
	// Cluster, when set, keeps only records of that cluster.
	Cluster string
	// Namespace, when set, keeps only records of that namespace (requires
	// Cluster).
	Namespace string
	// PageSize is the maximum number of records returned; 0 means the
	// store's default.
	PageSize int
	// PageToken continues a previous List; empty starts from the first key.
	PageToken string
}

// Store keeps per-target records durably. Implementations are safe for
// concurrent use.
type Store interface {
	// Update loads the record for key (a zero Record with only Key set when
	// none exists), passes it to fn, and stores what fn leaves in it, all in
	// one transaction. The change is durable when Update returns nil; the
	// stored record is returned. If fn returns an error nothing is stored
	// and that error is returned. fn may run more than once (for example
	// when concurrent updates share a commit) and must depend only on its
	// argument. When ctx ends first, Update returns ctx.Err(); the change
	// may or may not have been stored.
	Update(ctx context.Context, key Key, fn func(rec *Record) error) (Record, error)
	// Get returns the record for key, ErrNotFound or ErrCorrupt.
	Get(ctx context.Context, key Key) (Record, error)
	// List returns records in key order and the token of the next page
	// (empty after the last page). Undecodable records are left out of the
	// page and reported by an error matching ErrCorrupt, returned together
	// with the page; any other error comes without records.
	List(ctx context.Context, q Query) (records []Record, nextPageToken string, err error)
	// Delete removes the record for key; ErrNotFound when there is none.
	Delete(ctx context.Context, key Key) error
	// Expire removes the records last seen before cutoff and returns how
	// many were removed.
	Expire(ctx context.Context, cutoff time.Time) (int, error)
	// Close releases the store; later calls return ErrClosed.
	Close() error
}
