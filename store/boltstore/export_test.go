package boltstore

import (
	"time"

	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/target"
)

// Hooks into the package's internals for the black-box tests of store_test.

// SetBeforeCommitHook makes the committer call f with the batch size before
// each batch's transaction. Call it before the store's first write.
func SetBeforeCommitHook(b *Store, f func(n int)) { b.testHookBeforeCommit = f }

// BatchGrace is how long a busy store's committer, with nothing coming,
// holds a batch after its queue last grew.
func BatchGrace(maxBatchDelay time.Duration) time.Duration {
	return maxBatchDelay / batchGraceDivisor
}

// HeavyBatch is the size of a commit after which the next batch is held
// for the whole MaxBatchDelay.
const HeavyBatch = heavyBatch

// QueueLen is the number of writes queued and not yet taken by the
// committer.
func QueueLen(b *Store) int {
	b.batch.mu.Lock()
	defer b.batch.mu.Unlock()
	return len(b.batch.queue)
}

// Expected is the number of writes announced by Expect and not taken off.
func Expected(b *Store) int64 { return b.batch.expected.Load() }

// RecordKey is the records bucket key of k.
func RecordKey(k target.Key) ([]byte, error) { return schema.RecordKey(k) }

// Layout names, for tests that edit a file with bbolt directly.
var (
	BucketMeta           = schema.Meta
	BucketRecords        = schema.Records
	KeyMetaSchemaVersion = schema.MetaSchemaVersion
)

// SetAfterPrepareHook makes Update call f between preparing a write and
// queueing it. Call it before the store's first write, or while no Update
// runs.
func SetAfterPrepareHook(b *Store, f func()) { b.testHookAfterPrepare = f }

// SetFailCommitHook makes each commit call f after its batch's writes; an
// error from f rolls the transaction back. Call it while no write runs.
func SetFailCommitHook(b *Store, f func() error) { b.testHookFailCommit = f }

// PageWrites is the number of page writes (pwrite calls) of b's commits
// since Open.
func PageWrites(b *Store) int64 {
	s := b.db.Stats()
	return s.TxStats.GetWrite()
}

// SetCheckpointHook makes each checkpoint call f in its transaction before
// writing; an error from f fails the checkpoint. Call it before the
// store's first write.
func SetCheckpointHook(b *Store, f func() error) { b.testHookCheckpoint = f }
