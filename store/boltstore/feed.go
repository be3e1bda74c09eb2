package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// The bbolt store's change feed: every write that changes a record also
// appends its changes, numbered by a revision, to the changes bucket in
// the same transaction.

// deletion is the change recording that key was removed now.
func (b *Store) deletion(key target.Key) store.Change {
	return store.Change{Key: key, Kind: store.ChangeDeleted, At: b.opts.Now().UTC()}
}

// appendChanges numbers cs, stores them in tx's changes bucket, and queues
// them to be published after the commit; the committer drops the changes
// beyond Options.MaxChanges once per transaction (trimChanges). Its error
// leaves tx unusable.
func (b *Store) appendChanges(tx *bolt.Tx, cs []store.Change) error {
	vals, err := record.EncodeChanges(cs)
	if err != nil {
		return err
	}
	bucket := tx.Bucket(schema.Changes)
	bucket.FillPercent = changesFillPercent
	if !b.revKnown {
		b.rev, b.revKnown = lastRevision(tx), true
	}
	for i := range cs {
		b.rev++
		cs[i].Revision = b.rev
		if err := bucket.Put(schema.RevisionKey(b.rev), vals[i]); err != nil {
			return fmt.Errorf("store: append change: %w", err)
		}
	}
	b.pending = append(b.pending, cs...)
	return nil
}

// lastRevision is the revision of the newest change in tx, 0 when there
// is none.
func lastRevision(tx *bolt.Tx) uint64 {
	if k, _ := tx.Bucket(schema.Changes).Cursor().Last(); k != nil {
		return binary.BigEndian.Uint64(k)
	}
	return 0
}

// trimChanges drops the changes of tx's changes bucket older than the
// newest Options.MaxChanges up to rev, the latest: once per transaction,
// not per write. Its error leaves tx unusable.
func (b *Store) trimChanges(tx *bolt.Tx, rev uint64) error {
	if rev <= uint64(b.opts.MaxChanges) {
		return nil
	}
	bucket := tx.Bucket(schema.Changes)
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
func (b *Store) publish(cs []store.Change) {
	if len(cs) == 0 {
		return
	}
	b.followMu.Lock()
	defer b.followMu.Unlock()
	for _, f := range b.followers {
		f(cs)
	}
}

// Follow implements store.Feed.
func (b *Store) Follow(fn func([]store.Change)) (stop func()) {
	b.followMu.Lock()
	defer b.followMu.Unlock()
	if b.followers == nil {
		b.followers = map[*int]func([]store.Change){}
	}
	id := new(int)
	b.followers[id] = fn
	return func() {
		b.followMu.Lock()
		defer b.followMu.Unlock()
		delete(b.followers, id)
	}
}

// Revision implements store.Feed.
func (b *Store) Revision(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var rev uint64
	err := b.viewLatest(ctx, func(tx *bolt.Tx) error {
		rev = lastRevision(tx)
		return nil
	})
	return rev, err
}

// Count returns the number of records and, read in the same transaction,
// the latest revision: the count is exact as of that revision, and the
// changes after it (Created, store.ChangeDeleted) keep it current. It reads
// every page of the records bucket.
func (b *Store) Count(ctx context.Context) (n int, rev uint64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	err = b.viewLatest(ctx, func(tx *bolt.Tx) error {
		n, rev = tx.Bucket(schema.Records).Stats().KeyN, lastRevision(tx)
		return nil
	})
	return n, rev, err
}

// Changes implements store.Feed.
func (b *Store) Changes(ctx context.Context, after uint64, limit int) ([]store.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	var out []store.Change
	err := b.viewLatest(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(schema.Changes).Cursor()
		latest := lastRevision(tx)
		oldest := latest + 1 // when the bucket is empty
		if k, _ := c.First(); k != nil {
			oldest = binary.BigEndian.Uint64(k)
		}
		switch {
		case after > latest:
			return fmt.Errorf("%w: revision %d is newer than the latest, %d", store.ErrOutOfRange, after, latest)
		case after+1 < oldest:
			return fmt.Errorf("%w: changes after revision %d are no longer kept (the oldest kept is %d)", store.ErrOutOfRange, after, oldest)
		}
		for k, v := c.Seek(schema.RevisionKey(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			ch, err := record.DecodeChange(binary.BigEndian.Uint64(k), v)
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
