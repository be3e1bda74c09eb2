package boltstore

// The committer's and the checkpointer's halves of a write's way to the
// file (the package doc, "The journal and the checkpointer").

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
)

// overlayEntry is a journaled value not yet in bbolt: the record's value
// and the frame that carries it.
type overlayEntry struct {
	val []byte
	seq uint64
}

// lookup returns the newest value of record key rk that the checkpointer
// has not yet written to bbolt.
func (b *Store) lookup(rk []byte) ([]byte, bool) {
	b.ovMu.Lock()
	defer b.ovMu.Unlock()
	e, ok := b.overlay[string(rk)]
	return e.val, ok
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

// syncClock holds when the disk writes in progress began, in Unix
// nanoseconds (0: none): the committer's commit of a batch (its journal
// frame and flush, or its direct bbolt transaction) and the
// checkpointer's bbolt transaction.
type syncClock struct{ committer, checkpointer atomic.Int64 }

// SyncAge returns how long the oldest write to disk still in progress has
// been running: a commit that answers writes (the journal's flush, a
// deletion's bbolt transaction) or a checkpoint; 0 when none is. Unlike
// Options.ObserveCommit, which sees a commit when it ends, it shows a disk
// that stalls while it stalls. Safe for concurrent use.
func (b *Store) SyncAge() time.Duration {
	oldest := int64(0)
	for _, at := range []int64{b.syncs.committer.Load(), b.syncs.checkpointer.Load()} {
		if at != 0 && (oldest == 0 || at < oldest) {
			oldest = at
		}
	}
	if oldest == 0 {
		return 0
	}
	return max(time.Since(time.Unix(0, oldest)), 0)
}

// wakeCheckpointer tells the checkpointer to look at the journaled
// batches (and the waiters) again.
func (b *Store) wakeCheckpointer() {
	select {
	case b.ckWake <- struct{}{}:
	default: // a signal is already pending
	}
}

// drain is caughtUp for the committer, which nothing cancels (nothing is
// journaled while it waits).
func (b *Store) drain() error { return b.caughtUp(context.Background()) }

// caughtUp waits until bbolt holds every write answered before the call
// (the reads that walk bbolt need them), a checkpoint failed, or ctx
// ended. The checkpointer does not wait for more writes while someone
// waits.
func (b *Store) caughtUp(ctx context.Context) error {
	seq := b.acked.Load()
	waiting := false
	defer func() {
		if waiting {
			b.ovMu.Lock()
			b.waiters--
			b.ovMu.Unlock()
		}
	}()
	for {
		b.ovMu.Lock()
		applied, ckErr, ch := b.applied, b.ckErr, b.appliedCh
		if !waiting && applied < seq && ckErr == nil {
			waiting = true
			b.waiters++
		}
		b.ovMu.Unlock()
		switch {
		case applied >= seq:
			return nil
		case ckErr != nil:
			return ckErr
		}
		b.wakeCheckpointer()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fail records a failure that leaves the journal and bbolt out of step:
// the store then refuses writes, and the reads that would miss journaled
// writes, until it is opened again (which replays the journal).
func (b *Store) fail(err error) {
	b.ovMu.Lock()
	defer b.ovMu.Unlock()
	if b.ckErr == nil {
		b.ckErr = err
		close(b.appliedCh)
		b.appliedCh = make(chan struct{})
	}
}

// Checkpoint policy: the checkpointer writes the journaled batches once
// the oldest has waited Options.CheckpointInterval (by default
// DefaultCheckpointInterval) or checkpointWrites writes are
// waiting, at once when a read or the committer waits for it, and at
// Close. Rare checkpoints are cheaper (each is a bbolt commit, and its
// writes share the pages they dirty; docs/benchmarks.md); the price is
// the journaled writes held in memory and replayed after a crash.
const (
	// DefaultCheckpointInterval is Options.CheckpointInterval's default.
	DefaultCheckpointInterval = time.Second
	checkpointWrites          = 12000
	// checkpointBatches bounds the journaled batches one checkpoint
	// writes.
	checkpointBatches = 1024
)

// checkpointLoop is the checkpointer: it writes the journaled batches to
// bbolt, as many as are waiting in one transaction (see the checkpoint
// policy), until the store is closed and every batch is written.
func (b *Store) checkpointLoop() {
	defer close(b.ckStopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Closing is looked at before the batches: once it is closed, the
		// committer has exited and journals nothing more.
		closing := false
		select {
		case <-b.ckClosing:
			closing = true
		default:
		}
		b.ovMu.Lock()
		n := min(len(b.batches), checkpointBatches)
		batches, ckErr := b.batches[:n:n], b.ckErr
		urgent := closing || b.waiters > 0 || b.pendingWrites >= checkpointWrites
		b.ovMu.Unlock()
		var wait time.Duration
		switch {
		case (n == 0 || ckErr != nil) && closing:
			return
		case n == 0 || ckErr != nil:
			wait = time.Hour // until woken
		case !urgent:
			wait = time.Until(batches[0].at.Add(b.opts.CheckpointInterval))
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-b.ckWake:
			case <-timer.C:
			case <-b.ckClosing:
			}
			timer.Stop()
			continue
		}
		b.checkpoint(batches)
	}
}

// checkpoint writes batches, the oldest journaled ones, to bbolt in one
// transaction, then drops them and the overlay's values they carried;
// its failure stops the store's writes (fail).
func (b *Store) checkpoint(batches []*journaledBatch) {
	start := time.Now()
	b.syncs.checkpointer.Store(start.UnixNano())
	err := b.db.Update(func(tx *bolt.Tx) error {
		if b.testHookCheckpoint != nil {
			if err := b.testHookCheckpoint(); err != nil {
				return err
			}
		}
		return b.applyBatches(tx, batches)
	})
	b.syncs.checkpointer.Store(0)
	if err != nil {
		b.fail(fmt.Errorf("store: checkpoint: %w", err))
		return
	}
	b.checkpoints.Add(1)
	b.checkpointNanos.Add(int64(time.Since(start)))
	last := batches[len(batches)-1].seq
	b.ovMu.Lock()
	defer b.ovMu.Unlock()
	for _, jb := range batches {
		for _, w := range jb.writes {
			k := string(w.RecordKey)
			if e, ok := b.overlay[k]; ok && e.seq <= last {
				delete(b.overlay, k)
			}
		}
		b.pendingWrites -= len(jb.writes)
	}
	b.batches = b.batches[len(batches):]
	if len(b.batches) == 0 {
		b.batches = nil // lets the array go
	}
	b.applied = last
	close(b.appliedCh)
	b.appliedCh = make(chan struct{})
}
