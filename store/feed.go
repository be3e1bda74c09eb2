package store

import (
	"context"
	"errors"
	"time"

	"github.com/setpointhq/setpoint/target"
)

// ErrOutOfRange: a revision is older than the oldest change still kept, or
// newer than the latest change.
var ErrOutOfRange = errors.New("store: revision out of range")

// ChangeKind says what a Change records.
type ChangeKind string

// The kinds of changes.
const (
	// ChangeDecision: a decision was recorded (target.Record.Last changed).
	ChangeDecision ChangeKind = "Decision"
	// ChangeObservation: an event was recorded (target.Record.Events grew).
	ChangeObservation ChangeKind = "Observation"
	// ChangeDeleted: the record was removed by Delete or Expire.
	ChangeDeleted ChangeKind = "Deleted"
	// ChangeGap: Follow's caller missed changes before the next one (a
	// backend whose watch fell behind its own retention); it carries no
	// Revision, Key or value. A follower that must see every change starts
	// over: it reads again what it keeps. Changes still answers for what
	// is kept.
	ChangeGap ChangeKind = "Gap"
)

// Change is one recorded change of one target.
type Change struct {
	// Revision numbers the change: strictly increasing across the whole
	// store, never reused (also across restarts), not necessarily dense.
	Revision uint64
	// Key is the target changed.
	Key target.Key
	// Kind says what was recorded.
	Kind ChangeKind
	// Decision is the decision recorded (ChangeDecision); its
	// Decision.History and its Before are empty: the record keeps the
	// history and the status the decision started from
	// (target.Record.History, target.Record.Last.Before), and the feed
	// keeps only what the decision said.
	Decision *target.LastDecision
	// Event is the event recorded (ChangeObservation).
	Event *target.Event
	// At is when the record was removed (ChangeDeleted), by the store's
	// clock.
	At time.Time
	// Created is true on the first change of a record the write created:
	// with the deletions it keeps a count of targets (Count) current.
	Created bool
}

// Feed is the change feed of a store, part of every Store.
type Feed interface {
	// Revision returns the revision of the latest change, 0 before the
	// first.
	Revision(ctx context.Context) (uint64, error)
	// Changes returns the changes after revision `after`, oldest first, at
	// most limit of them. It fails with ErrOutOfRange when some change
	// after `after` is no longer kept, or `after` is beyond the latest
	// revision.
	Changes(ctx context.Context, after uint64, limit int) ([]Change, error)
	// Follow calls fn with the changes of each commit, in revision order,
	// after the commit and before the commit's writers are answered (so a
	// caller holding its answer never races ahead of the feed), until stop
	// is called; after stop returns fn is not called again. A shared
	// backend whose feed can be held up bounds that wait and says how;
	// its changes still come in order, none missed. fn runs on the store's
	// write path: it must not block and must not call stop; it may keep
	// the slice but not modify it. A backend that can miss changes says
	// so with a ChangeGap change where they were missed.
	Follow(fn func([]Change)) (stop func())
}
