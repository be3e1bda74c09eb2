package boltstore

// The checkpointer: it writes the journaled batches into bbolt behind the
// committer; meanwhile the overlay serves their values, and the reads
// that walk bbolt wait for it (the package doc, "The journal and the
// checkpointer").

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
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
