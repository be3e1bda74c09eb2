package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/setpointhq/setpoint/target"
)

// This file is the change feed: every write that changes what a target
// records — a new decision, an observed event, a deletion — also appends a
// Change, numbered by a revision, to the changes bucket, in the same
// transaction. The server's Watch reads it to resume a stream and follows
// it for live changes.

// DefaultMaxChanges is the default number of changes kept for Changes.
const DefaultMaxChanges = 10000

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
	// backend whose watch fell behind its own retention, as etcd's
	// compaction); it carries no Revision, Key or value. A follower that
	// must see every change starts over: it reads again what it keeps.
	// Changes still answers for what is kept. The bbolt store never has
	// gaps.
	ChangeGap ChangeKind = "Gap"
)

// Change is one recorded change of one target.
type Change struct {
	// Revision numbers the change: strictly increasing across the whole
	// store, never reused (also across restarts). Bolt numbers 1, 2, 3…;
	// other backends may leave gaps (store/etcdstore does).
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
	// clock (Options.Now).
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
	// from the committer goroutine, right after the commit and before the
	// commit's writers are answered (so a caller holding its answer never
	// races ahead of the feed), until stop is called. A shared backend
	// whose feed can be held up bounds that wait and says how
	// (store/etcdstore: Options.DeliveryWait); its changes still come in
	// order, none missed. fn must not block and must not call stop; it
	// may keep the slice but not modify it. After stop returns fn is not
	// called again. A backend that can miss
	// changes says so with a ChangeGap change where they were missed.
	Follow(fn func([]Change)) (stop func())
}

// deletion is the change recording that key was removed now.
func (b *Bolt) deletion(key target.Key) Change {
	return Change{Key: key, Kind: ChangeDeleted, At: b.opts.Now().UTC()}
}

// appendChanges numbers cs, stores them in tx's changes bucket, and queues
// cs to be published after the commit; the committer drops the changes
// beyond Options.MaxChanges once per transaction (trimChanges). Its error
// leaves tx unusable.
func (b *Bolt) appendChanges(tx *bolt.Tx, cs []Change) error {
	vals, err := encodeChanges(cs)
	if err != nil {
		return err
	}
	return b.appendEncoded(tx, cs, vals)
}

// appendEncoded is appendChanges for changes encoded by encodeChanges
// (vals[i] is cs[i]'s value).
func (b *Bolt) appendEncoded(tx *bolt.Tx, cs []Change, vals [][]byte) error {
	if len(cs) == 0 {
		return nil
	}
	bucket := tx.Bucket(bucketChanges)
	bucket.FillPercent = changesFillPercent
	if !b.revKnown {
		b.rev = 0
		if k, _ := bucket.Cursor().Last(); k != nil {
			b.rev = binary.BigEndian.Uint64(k)
		}
		b.revKnown = true
	}
	for i := range cs {
		rev := b.rev + 1
		cs[i].Revision = rev
		if err := bucket.Put(revisionKey(rev), vals[i]); err != nil {
			return fmt.Errorf("store: append change: %w", err)
		}
		b.rev = rev
	}
	b.pending = append(b.pending, cs...)
	return nil
}

// trimChanges drops the oldest changes of tx's changes bucket beyond
// Options.MaxChanges, when the transaction appended any: once per
// transaction, not per write. Its error leaves tx unusable.
func (b *Bolt) trimChanges(tx *bolt.Tx) error {
	if !b.revKnown {
		return nil
	}
	return b.trimChangesTo(tx, b.rev)
}

// trimChangesTo drops the changes of tx's changes bucket older than the
// newest Options.MaxChanges up to rev, the latest. Its error leaves tx
// unusable.
func (b *Bolt) trimChangesTo(tx *bolt.Tx, rev uint64) error {
	if rev <= uint64(b.opts.MaxChanges) {
		return nil
	}
	bucket := tx.Bucket(bucketChanges)
	cutoff := rev - uint64(b.opts.MaxChanges)
	var old [][]byte
	c := bucket.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= cutoff; k, _ = c.Next() {
		old = append(old, k)
	}
	for _, k := range old {
		if err := bucket.Delete(k); err != nil {
			return fmt.Errorf("store: trim changes: %w", err)
		}
	}
	return nil
}

// publish hands the changes of a commit to the followers.
func (b *Bolt) publish(cs []Change) {
	if len(cs) == 0 {
		return
	}
	b.followMu.Lock()
	defer b.followMu.Unlock()
	for _, f := range b.followers {
		f(cs)
	}
}

// Follow implements Feed.
func (b *Bolt) Follow(fn func([]Change)) (stop func()) {
	b.followMu.Lock()
	defer b.followMu.Unlock()
	if b.followers == nil {
		b.followers = map[*int]func([]Change){}
	}
	id := new(int)
	b.followers[id] = fn
	return func() {
		b.followMu.Lock()
		defer b.followMu.Unlock()
		delete(b.followers, id)
	}
}

// Revision implements Feed.
func (b *Bolt) Revision(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var rev uint64
	err := b.viewLatest(ctx, func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketChanges).Cursor().Last(); k != nil {
			rev = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return rev, err
}

// Count returns the number of records and, read in the same transaction,
// the latest revision: the count is exact as of that revision, and the
// changes after it (Created, ChangeDeleted) keep it current. It reads
// every page of the records bucket.
func (b *Bolt) Count(ctx context.Context) (n int, rev uint64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	err = b.viewLatest(ctx, func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketRecords).Stats().KeyN
		if k, _ := tx.Bucket(bucketChanges).Cursor().Last(); k != nil {
			rev = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return n, rev, err
}

// Changes implements Feed.
func (b *Bolt) Changes(ctx context.Context, after uint64, limit int) ([]Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	var out []Change
	err := b.viewLatest(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketChanges).Cursor()
		var oldest, latest uint64
		if k, _ := c.Last(); k != nil {
			latest = binary.BigEndian.Uint64(k)
		}
		if k, _ := c.First(); k != nil {
			oldest = binary.BigEndian.Uint64(k)
		} else {
			oldest = latest + 1
		}
		switch {
		case after > latest:
			return fmt.Errorf("%w: revision %d is newer than the latest, %d", ErrOutOfRange, after, latest)
		case after+1 < oldest:
			return fmt.Errorf("%w: changes after revision %d are no longer kept (the oldest kept is %d)", ErrOutOfRange, after, oldest)
		}
		for k, v := c.Seek(revisionKey(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			ch, err := decodeChange(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			out = append(out, ch)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
