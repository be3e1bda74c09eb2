package boltstore

// The committer: the single goroutine that takes each batch of writes
// from the batcher, journals its Updates as one entry (or runs its
// Deletes and Expires in a bbolt transaction), and answers the callers.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
)

// Request states: a request is queued until the committer takes it or its
// caller gives up; exactly one of the two wins.
const (
	stateQueued int32 = iota
	stateTaken
	stateAbandoned
)

// request is one write waiting for the committer.
type request struct {
	state atomic.Int32
	// apply performs the write in tx. An error wrapped in abortError means
	// tx is no longer usable (a bbolt write failed half-way); any other
	// error fails only this request, and apply must then have written
	// nothing.
	apply func(tx *bolt.Tx) error
	// upd, when set, is an Update's prepared write, journaled instead of
	// applied (apply is then unused).
	upd *preparedUpdate
	// err is apply's result, or the commit's error; read after done.
	err  error
	done chan struct{}
}

// abortError marks a failure that leaves the transaction unusable.
type abortError struct{ err error }

func (e *abortError) Error() string { return e.err.Error() }
func (e *abortError) Unwrap() error { return e.err }

// write queues apply (or upd, an Update's prepared write, journaled) for
// the committer and waits for its result. When ctx ends first, write
// returns ctx.Err(): if the committer had not taken the request it never
// runs; otherwise it may still be committed. An Update, counted in the
// batcher's preparing by prepare, is taken off the count when its request
// is queued or refused.
func (b *Store) write(ctx context.Context, upd *preparedUpdate, apply func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		if upd != nil {
			b.batch.preparing.Add(-1)
		}
		return err
	}
	r := &request{apply: apply, upd: upd, done: make(chan struct{})}
	if err := b.batch.push(r); err != nil {
		return err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		r.state.CompareAndSwap(stateQueued, stateAbandoned)
		return ctx.Err()
	}
	return r.err
}

// commitLoop is the committer: it takes each batch the batcher gathers,
// applies it in one transaction, commits once and answers its writes,
// until the store is closed and the queue is empty. Writes that arrive
// during a commit form the next batch.
func (b *Store) commitLoop() {
	defer close(b.ckClosing)
	for {
		batch, held, ok := b.batch.next()
		if !ok {
			return
		}
		b.held = held
		b.commitBatch(batch)
	}
}

// commit applies batch in one transaction and answers every request. A
// request whose apply fails alone is answered with its error while the
// others proceed. If a write breaks the transaction, the transaction is
// rolled back, that request answered with its error, and the rest of the
// batch applied again from the start — so an update function may run more
// than once.
func (b *Store) commit(batch []*request) {
	for len(batch) > 0 {
		if b.testHookBeforeCommit != nil {
			b.testHookBeforeCommit(len(batch))
		}
		broken := -1
		var applied time.Time // when the writes were applied and Tx.Commit began
		err := b.db.Update(func(tx *bolt.Tx) error {
			b.pending, b.revKnown = make([]store.Change, 0, len(batch)), false
			for i, r := range batch {
				r.err = nil
				err := r.apply(tx)
				var ab *abortError
				if errors.As(err, &ab) {
					broken = i
					r.err = ab.err
					return err
				}
				r.err = err
			}
			if b.revKnown {
				if err := b.trimChanges(tx, b.rev); err != nil {
					return err
				}
			}
			if b.testHookFailCommit != nil {
				return b.testHookFailCommit()
			}
			applied = time.Now()
			return nil
		})
		var took time.Duration
		if err == nil {
			took = time.Since(applied)
		}
		if broken >= 0 {
			close(batch[broken].done)
			b.writes.Add(1)
			batch = slices.Delete(batch, broken, broken+1)
			continue
		}
		err = b.account(batch, err, took)
		// Followers see a commit's changes before its writers return, so a
		// caller that has its answer never races ahead of the feed.
		if err == nil {
			b.publish(b.pending)
		}
		b.pending = nil
		for _, r := range batch {
			close(r.done)
		}
		return
	}
}

// account counts a commit of batch that took took, or gives its error
// (wrapped, returned) to every write of the batch without one of its own.
func (b *Store) account(batch []*request, err error, took time.Duration) error {
	b.writes.Add(uint64(len(batch)))
	if err != nil {
		err = fmt.Errorf("store: commit: %w", err)
		for _, r := range batch {
			if r.err == nil {
				r.err = err
			}
		}
		return err
	}
	b.commits.Add(1)
	b.commitNanos.Add(int64(took))
	b.heldNanos.Add(int64(b.held))
	for n := uint64(len(batch)); ; {
		m := b.maxBatch.Load()
		if n <= m || b.maxBatch.CompareAndSwap(m, n) {
			break
		}
	}
	if b.opts.ObserveCommit != nil {
		b.opts.ObserveCommit(Commit{Writes: len(batch), Held: b.held, Duration: took})
	}
	return nil
}

// commitBatch commits a batch the committer took: the Updates through the
// journal, then the other writes (Delete, Expire) in a bbolt transaction
// of their own once everything journaled before them is in bbolt.
func (b *Store) commitBatch(batch []*request) {
	var journaled, direct []*request
	for _, r := range batch {
		if r.upd != nil {
			journaled = append(journaled, r)
		} else {
			direct = append(direct, r)
		}
	}
	b.syncs.committer.Store(time.Now().UnixNano())
	defer b.syncs.committer.Store(0)
	if len(journaled) > 0 {
		b.commitJournaled(journaled)
	}
	if len(direct) > 0 {
		if err := b.drain(); err != nil {
			for _, r := range direct {
				r.err = err
				close(r.done)
			}
			b.writes.Add(uint64(len(direct)))
			return
		}
		b.commit(direct)
		b.revKnown = false // read again from the file by the next journaled batch
	}
}

// commitJournaled checks each prepared Update against the newest value of
// its record (overlay, else bbolt), numbers the changes of those still
// current, appends them to the journal as one frame, makes it durable,
// hands the frame to the checkpointer and answers the batch: a conflict
// with errConflict, the others with nil or the commit's error.
func (b *Store) commitJournaled(batch []*request) {
	if b.testHookBeforeCommit != nil {
		b.testHookBeforeCommit(len(batch))
	}
	start := time.Now()
	err := b.journalBatch(batch)
	err = b.account(batch, err, time.Since(start))
	if err == nil {
		var changes []store.Change
		for _, r := range batch {
			if r.err == nil {
				changes = append(changes, r.upd.changes...)
			}
		}
		// Followers see a commit's changes before its writers return, so
		// a caller that has its answer never races ahead of the feed.
		b.publish(changes)
	}
	for _, r := range batch {
		close(r.done)
	}
	if err == nil {
		b.segmentJournal()
	}
}

// segmentJournal removes the journal's old segment once the checkpointer
// has applied it, and starts a new segment once the current one is past
// its limit; only when the old segment is still needed then does it wait
// for the checkpointer. Called by the committer after a batch's answers.
func (b *Store) segmentJournal() {
	j := b.journal
	if j.OldLast() != 0 {
		b.ovMu.Lock()
		applied := b.applied
		b.ovMu.Unlock()
		if applied < j.OldLast() {
			if j.Size() <= b.opts.JournalSegmentBytes {
				return // the old segment is still needed, and no rotation is due
			}
			if b.drain() != nil {
				return // a failed checkpoint: the store refuses writes
			}
		}
		if err := j.DropOld(); err != nil {
			b.fail(fmt.Errorf("store: remove the journal's old segment: %w", err))
			return
		}
	}
	if j.Size() > b.opts.JournalSegmentBytes {
		if err := j.Rotate(); err != nil {
			b.fail(fmt.Errorf("store: start a journal segment: %w", err))
		}
	}
}

// journalBatch does commitJournaled's work up to the answers; on an error
// nothing is journaled or handed on, and r.err is set only for conflicts.
func (b *Store) journalBatch(batch []*request) error {
	b.ovMu.Lock()
	ckErr, full := b.ckErr, b.pendingWrites >= maxPendingWrites
	b.ovMu.Unlock()
	if ckErr != nil {
		return ckErr
	}
	if full {
		if err := b.drain(); err != nil {
			return err
		}
	}
	// The newest value of each record: the overlay's, else bbolt's.
	cur := make([][]byte, len(batch))
	var missed []int
	b.ovMu.Lock()
	for i, r := range batch {
		if e, ok := b.overlay[string(r.upd.rk)]; ok {
			cur[i] = e.val
		} else {
			missed = append(missed, i)
		}
	}
	b.ovMu.Unlock()
	// What the overlay lacks, bbolt has: the checkpointer drops an entry
	// only after its transaction committed.
	if len(missed) > 0 || !b.revKnown {
		if err := b.db.View(func(tx *bolt.Tx) error {
			records := tx.Bucket(schema.Records)
			for _, i := range missed {
				cur[i] = records.Get(batch[i].upd.rk) // compared inside the transaction
				if cur[i] != nil {
					cur[i] = bytes.Clone(cur[i])
				}
			}
			if !b.revKnown {
				b.rev, b.revKnown = lastRevision(tx), true
			}
			return nil
		}); err != nil {
			return err
		}
	}
	rev := b.rev
	writes := make([]*pb.JournalWrite, 0, len(batch))
	seen := make(map[string]int, len(batch)) // index in batch of a key written earlier in it
	for i, r := range batch {
		w := r.upd
		c := cur[i]
		if j, ok := seen[string(w.rk)]; ok {
			c = batch[j].upd.val
		}
		if (c == nil) != (w.read == nil) || !bytes.Equal(c, w.read) {
			r.err = errConflict
			continue
		}
		r.err = nil
		for k := range w.changes {
			rev++
			w.changes[k].Revision = rev
		}
		seen[string(w.rk)] = i
		writes = append(writes, w.journalEntry())
	}
	if len(writes) == 0 {
		return nil
	}
	if b.testHookFailCommit != nil {
		if err := b.testHookFailCommit(); err != nil {
			return err
		}
	}
	buf, err := appendEntry(b.journalBuf[:0], writes)
	if err != nil {
		return err
	}
	b.journalBuf = buf
	seq, err := b.journal.Append(buf)
	if cap(b.journalBuf) > 4<<20 {
		b.journalBuf = nil // an outsized batch's buffer is not kept
	}
	if err != nil {
		return err
	}
	b.rev = rev
	jb := &journaledBatch{seq: seq, writes: writes, at: time.Now()}
	b.ovMu.Lock()
	for i := range writes {
		b.overlay[string(writes[i].RecordKey)] = overlayEntry{val: writes[i].Value, seq: jb.seq}
	}
	b.batches = append(b.batches, jb)
	b.pendingWrites += len(writes)
	b.acked.Store(jb.seq)
	b.ovMu.Unlock()
	b.wakeCheckpointer()
	return nil
}
