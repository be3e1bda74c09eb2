package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/store/wal"
	"github.com/setpointhq/setpoint/target"
)

// recordsFillPercent is how full bbolt leaves the records bucket's pages
// when it splits them.
const recordsFillPercent = 0.9

// changesFillPercent is how full bbolt leaves the change feed's pages when
// it splits them. Revisions only grow, so a page once split is never
// written again: bbolt's default (half) would leave every page of the feed
// half empty, and each commit would write about twice the pages its
// entries need.
const changesFillPercent = 1.0

// SchemaVersion is the version of the on-disk layout this package writes
// (package schema). Open refuses a file whose stored version is larger.
const SchemaVersion = schema.Version

// Defaults of Options.
const (
	// DefaultMaxChanges is the default number of changes kept for Changes.
	DefaultMaxChanges = 10000
	// DefaultMaxBatch is the default number of writes that share a commit.
	DefaultMaxBatch = 1000
	// DefaultMaxBatchDelay is Options.MaxBatchDelay's default: about two
	// commits' fsyncs on a virtual disk (docs/benchmarks-archive.md).
	DefaultMaxBatchDelay = 3 * time.Millisecond
	// DefaultLockTimeout is how long Open waits by default for another
	// process to release the file: long enough for a restart's overlap,
	// short enough to say at once that another server holds it.
	DefaultLockTimeout = time.Second
)

// Options configure a Store store. The zero value selects every default.
type Options struct {
	// MaxEvents bounds target.Record.Events: Update keeps the newest MaxEvents.
	// 0 means store.DefaultMaxEvents.
	MaxEvents int
	// MaxHistory bounds each list of target.Record.History: Update keeps
	// the newest MaxHistory entries by time (a guard; the engine bounds
	// history by its windows). 0 means store.DefaultMaxHistory.
	MaxHistory int
	// MaxBatch bounds how many writes share one commit. 0 means
	// DefaultMaxBatch.
	MaxBatch int
	// MaxBatchDelay bounds how long the committer holds a batch open for
	// more writes to share its commit: while writes are coming (Updates
	// being prepared, writes announced by Expect) and, after a commit of
	// several, while the queue keeps growing (batcher.go). A lone
	// caller's write is never held. 0 means DefaultMaxBatchDelay; negative
	// never holds.
	MaxBatchDelay time.Duration
	// LockTimeout is how long Open waits for another process holding the
	// file to release it. 0 means DefaultLockTimeout.
	LockTimeout time.Duration
	// ObserveCommit, when set, is called by the committer after each
	// committed write transaction, before its writers are answered. It
	// must be quick (they and the next commit wait for it) and must not
	// call the store.
	ObserveCommit func(Commit)
	// FileMode is the permission of a file Open creates. 0 means 0o600.
	FileMode os.FileMode
	// MaxChanges bounds the change feed (feed.go): the newest MaxChanges
	// changes are kept for Changes. 0 means DefaultMaxChanges.
	MaxChanges int
	// Now stamps deletions in the change feed; time.Now when nil.
	Now func() time.Time
	// DecisionRetention is how long each decision stays in its target's
	// decision log (decisionlog.go), counted back from the target's newest
	// decision. 0 means store.DefaultDecisionRetention; negative keeps no log.
	DecisionRetention time.Duration
	// CheckpointInterval is how long journaled writes wait, at most, for
	// the checkpointer to write them into the bbolt file: longer costs
	// memory and replay, shorter CPU. 0 means DefaultCheckpointInterval.
	CheckpointInterval time.Duration
	// JournalSegmentBytes is the journal's size past which it starts a new
	// segment (OldJournalSuffix). 0 means DefaultJournalSegmentBytes.
	JournalSegmentBytes int64
}

// withDefaults returns o with zero fields set to their defaults, or an
// error for a negative one.
func (o Options) withDefaults() (Options, error) {
	if o.MaxEvents < 0 || o.MaxHistory < 0 || o.MaxBatch < 0 || o.LockTimeout < 0 || o.MaxChanges < 0 || o.CheckpointInterval < 0 || o.JournalSegmentBytes < 0 {
		return o, fmt.Errorf("%w: negative option in %+v", store.ErrInvalid, o)
	}
	def(&o.MaxEvents, store.DefaultMaxEvents)
	def(&o.MaxHistory, store.DefaultMaxHistory)
	def(&o.MaxBatch, DefaultMaxBatch)
	def(&o.MaxChanges, DefaultMaxChanges)
	def(&o.DecisionRetention, store.DefaultDecisionRetention)
	def(&o.MaxBatchDelay, DefaultMaxBatchDelay)
	def(&o.LockTimeout, DefaultLockTimeout)
	def(&o.FileMode, 0o600)
	def(&o.CheckpointInterval, DefaultCheckpointInterval)
	def(&o.JournalSegmentBytes, DefaultJournalSegmentBytes)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// def sets *v to d when it is zero.
func def[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Stats are counters of a Store store since Open.
type Stats struct {
	// Commits counts the flushes that answered writes: journal frames (a
	// batch's Updates) and bbolt transactions (its Deletes and Expires).
	Commits uint64
	// Writes counts the Update, Delete and Expire calls they carried.
	Writes uint64
	// MaxBatch is the largest number of writes one commit carried.
	MaxBatch uint64
	// CommitTime is the time spent writing and flushing the journal's
	// frames and in bbolt's Tx.Commit of the direct transactions.
	CommitTime time.Duration
	// HeldTime is the time batches were held open for more writes.
	HeldTime time.Duration
	// FileBytes is the size of the store's file when Stats is called; 0
	// when it cannot be read.
	FileBytes int64
	// Checkpoints counts the transactions that wrote journaled writes to
	// bbolt, and CheckpointTime is the time they took.
	Checkpoints    uint64
	CheckpointTime time.Duration
}

// Commit describes one commit that answered writes (Options.ObserveCommit):
// a journal frame or a direct bbolt transaction.
type Commit struct {
	// Writes is the number of writes the commit carried.
	Writes int
	// Held is how long the committer held the batch open for more writes.
	Held time.Duration
	// Duration is the time of the commit: the journal frame's write and
	// flush, or bbolt's Tx.Commit with its fsyncs.
	Duration time.Duration
}

// Store is the store.Store kept in one bbolt file, with a write-ahead journal
// next to it while open. Create it with Open; it is safe for concurrent
// use. Writes go through a single committer goroutine that shares one
// journal flush among all writes queued while the previous one was being
// written, and a checkpointer writes them to bbolt behind it (see the
// package documentation).
type Store struct {
	db   *bolt.DB
	opts Options

	// batch gathers the writes for the committer (batcher.go).
	batch *batcher

	commits, writes, maxBatch atomic.Uint64
	commitNanos, heldNanos    atomic.Int64
	// held is how long the committer held the batch being committed
	// (committer goroutine only).
	held time.Duration

	// pending are the changes of the transaction being built, published
	// after its commit (committer goroutine only).
	pending []store.Change
	// rev is the revision of the newest change in the transaction being
	// built, once revKnown: read from the changes bucket at its first
	// append, then counted (committer goroutine only).
	rev      uint64
	revKnown bool
	// followers receive the changes of each commit (Follow).
	followMu  sync.Mutex
	followers map[*int]func([]store.Change)

	// keys serializes the updates of each key in this process.
	keys keyLocks

	// journal is the write-ahead log (journal.go; committer goroutine
	// only, after Open).
	journal *wal.Log
	// journalBuf is the journal entry being written, reused (committer).
	journalBuf []byte
	// ovMu guards overlay, batches, pendingWrites, applied, appliedCh,
	// ckErr and waiters: the
	// state shared by the committer and the checkpointer (checkpoint.go).
	ovMu sync.Mutex
	// overlay holds, by record key, the newest journaled value of each
	// record the checkpointer has not yet written to bbolt.
	overlay map[string]overlayEntry
	// batches are the journaled batches not yet applied, oldest first;
	// pendingWrites counts their writes.
	batches       []*journaledBatch
	pendingWrites int
	// acked is the sequence number of the last journaled frame, applied
	// that of the last one in bbolt (under ovMu).
	acked   atomic.Uint64
	applied uint64
	// appliedCh is closed, and replaced, when applied grows or ckErr is set.
	appliedCh chan struct{}
	// ckErr is a checkpoint's failure: the store answers no more writes
	// and no reads that need the journaled ones (a restart replays them).
	ckErr error
	// waiters counts the callers of caughtUp waiting.
	waiters int
	// ckWake signals the checkpointer; ckClosing is closed by the
	// committer when it exits, ckStopped by the checkpointer.
	ckWake               chan struct{}
	ckClosing, ckStopped chan struct{}
	checkpoints          atomic.Uint64
	checkpointNanos      atomic.Int64
	// syncs holds when the disk writes in progress began (SyncAge).
	syncs syncClock

	// Test hooks, set only by tests before any write (export_test.go):
	// in each checkpoint's transaction before its writes (an error fails
	// it); in the committer before each direct batch, with its size; in
	// Update between preparing and queueing; in each direct batch's
	// transaction after its writes (an error rolls the batch back).
	testHookCheckpoint   func() error
	testHookBeforeCommit func(n int)
	testHookAfterPrepare func()
	testHookFailCommit   func() error
}

var _ store.Store = (*Store)(nil)

// Open opens the store in the file at path, creating the file and its
// layout when it does not exist (its directory must). It fails with
// store.ErrSchemaVersion for a file of a newer schema version or a bbolt file that
// is not a Setpoint store. The caller must Close the store.
func Open(path string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, opts.FileMode, &bolt.Options{Timeout: opts.LockTimeout, NoSync: false})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("store: %s is locked by another process (another setpoint-server on the same data directory?); stop it, or give this one another directory: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	b := &Store{
		db:        db,
		opts:      opts,
		batch:     newBatcher(opts.MaxBatch, opts.MaxBatchDelay),
		overlay:   map[string]overlayEntry{},
		appliedCh: make(chan struct{}),
		ckWake:    make(chan struct{}, 1),
		ckClosing: make(chan struct{}),
		ckStopped: make(chan struct{}),
	}
	if err := b.recover(path); err != nil {
		if b.journal != nil {
			_ = b.journal.Close()
		}
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	b.applied = b.journal.Seq()
	b.acked.Store(b.journal.Seq())
	go b.commitLoop()
	go b.checkpointLoop()
	return b, nil
}

// Path returns the file's path.
func (b *Store) Path() string { return b.db.Path() }

// Stats returns the store's counters.
func (b *Store) Stats() Stats {
	st := Stats{Commits: b.commits.Load(), Writes: b.writes.Load(), MaxBatch: b.maxBatch.Load(),
		CommitTime: time.Duration(b.commitNanos.Load()), HeldTime: time.Duration(b.heldNanos.Load())}
	st.Checkpoints, st.CheckpointTime = b.checkpoints.Load(), time.Duration(b.checkpointNanos.Load())
	if fi, err := os.Stat(b.db.Path()); err == nil {
		st.FileBytes = fi.Size()
	}
	return st
}

// SchemaVersion returns the schema version stored in the file.
func (b *Store) SchemaVersion() (uint64, error) {
	var v uint64
	err := b.view(func(tx *bolt.Tx) error {
		var err error
		v, err = schema.StoredVersion(tx)
		return err
	})
	return v, err
}

// Healthy reports whether the store is open: its file is local, so an open
// store can serve; store.ErrClosed after Close.
func (b *Store) Healthy(context.Context) error {
	if b.batch.isClosed() {
		return store.ErrClosed
	}
	return nil
}

// Expect implements store.Store: the committer holds a batch open, at most
// Options.MaxBatchDelay, while writes are announced (batcher.go).
func (b *Store) Expect(n int) { b.batch.expect(n) }

// Close waits for the writes already queued to be committed and answered,
// then closes the file. Later calls, Close included, return store.ErrClosed.
func (b *Store) Close() error {
	if !b.batch.close() {
		return store.ErrClosed
	}
	<-b.ckStopped // after the committer
	var errs []error
	b.ovMu.Lock()
	ckErr := b.ckErr
	b.ovMu.Unlock()
	if err := b.journal.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store: close: journal: %w", err))
	}
	if ckErr != nil {
		errs = append(errs, ckErr) // the journal keeps what bbolt lacks
	} else if err := b.journal.Remove(); err != nil {
		// Every frame is applied: a journal left behind is replayed as
		// nothing. A power cut may bring it back for the same reason.
		errs = append(errs, fmt.Errorf("store: close: remove journal: %w", err))
	}
	if err := b.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store: close: %w", err))
	}
	return errors.Join(errs...)
}

// viewLatest is view for the reads that walk bbolt: it first waits for
// the checkpointer to write every Update answered before the call (see
// checkpoint.go), so fn sees them.
func (b *Store) viewLatest(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := b.caughtUp(ctx); err != nil {
		return err
	}
	return b.view(fn)
}

// view runs fn in a read-only transaction, mapping a closed database to
// store.ErrClosed.
func (b *Store) view(fn func(tx *bolt.Tx) error) error {
	if b.batch.isClosed() {
		return store.ErrClosed
	}
	err := b.db.View(fn)
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return store.ErrClosed
	}
	return err
}

// Update implements store.Store.Update, the package doc's way ("Writes"):
// read, decode, run fn and encode in the
// caller's goroutine; the committer journals the bytes only if the stored
// value is still the one read. A record that cannot be decoded fails with
// a *store.CorruptError without running fn; Delete clears it. If ctx ends
// while the update waits for its key or in the queue, Update returns
// ctx.Err() at once: a write the committer had not taken is dropped, one
// it had taken may still be stored, with its feed and log entries.
func (b *Store) Update(ctx context.Context, key target.Key, fn func(rec *target.Record) error) (target.Record, error) {
	return b.update(ctx, key, false, fn)
}

// Decide implements store.Store.Decide: the previous last decision is decoded
// only as far as its ID and At.
func (b *Store) Decide(ctx context.Context, key target.Key, fn func(rec *target.Record) error) (target.Record, error) {
	return b.update(ctx, key, true, fn)
}

// update is Update, and Decide when decision is set.
func (b *Store) update(ctx context.Context, key target.Key, decision bool, fn func(rec *target.Record) error) (target.Record, error) {
	rk, err := schema.RecordKey(key)
	if err != nil {
		return target.Record{}, err
	}
	l, err := b.keys.lock(ctx, string(rk))
	if err != nil {
		return target.Record{}, err
	}
	defer b.keys.unlock(l)
	for {
		w, err := b.prepare(key, rk, decision, fn)
		if err != nil {
			return target.Record{}, err
		}
		if b.testHookAfterPrepare != nil {
			b.testHookAfterPrepare()
		}
		err = b.write(ctx, w, nil)
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return target.Record{}, err
		}
		return w.rec, nil
	}
}

// errConflict is the error of a prepared update whose record changed
// between its read and its write.
var errConflict = errors.New("store: record changed since it was read")

// preparedUpdate is an update decided and encoded outside the write
// transaction: the bytes to write, and the value they replace.
type preparedUpdate struct {
	store    *Store
	rk       []byte
	key      target.Key
	read     []byte // the stored value fn started from; nil when there was none
	val      []byte // the new value
	oldIndex []byte // the record's last-seen index key, nil when new
	newIndex []byte
	changes  []store.Change
	encoded  [][]byte      // the changes' values
	logged   []byte        // the decision log's entry of a new decision, or nil
	rec      target.Record // what is stored, returned by Update; fn's record
}

// prepare reads the record of key, runs fn and encodes the result. It
// counts itself in the batcher's preparing; a prepared update stays counted until write
// queues it, a failed (or panicking) one is taken off at once.
func (b *Store) prepare(key target.Key, rk []byte, decision bool, fn func(*target.Record) error) (*preparedUpdate, error) {
	b.batch.preparing.Add(1)
	prepared := false
	defer func() {
		if !prepared {
			b.batch.preparing.Add(-1)
		}
	}()
	w := &preparedUpdate{store: b, rk: rk, key: key}
	if val, ok := b.lookup(rk); ok {
		w.read = val // journaled, not yet in bbolt; never changed in place
	} else if err := b.view(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(schema.Records).Get(rk); raw != nil {
			w.read = bytes.Clone(raw) // valid only inside the transaction
		}
		return nil
	}); err != nil {
		return nil, err
	}
	rec := &w.rec // fn's record, in w: one allocation fewer
	*rec = target.Record{Key: key}
	if w.read != nil {
		var err error
		if *rec, err = record.DecodeFor(key, w.read, decision); err != nil {
			return nil, err
		}
		w.oldIndex = schema.LastSeenKey(rec.LastSeen, rk)
	}
	partial := rec.Last // with decision, only its ID and At are decoded
	// A panic in fn stays in the caller's goroutine: nothing is queued.
	changes, err := record.Apply(key, rec, w.read != nil, record.Limits{MaxEvents: b.opts.MaxEvents, MaxHistory: b.opts.MaxHistory}, fn)
	if err != nil {
		return nil, err
	}
	if decision && partial != nil && rec.Last == partial {
		return nil, fmt.Errorf("store: update %s: a decision's function left the last decision in place", key)
	}
	w.changes = changes
	// The change feed's entries are encoded with the record: a decision's
	// entry is most of it.
	if w.val, w.encoded, err = record.EncodeWrite(rec, changes, record.Compress); err != nil {
		return nil, err
	}
	if len(w.changes) > 0 && w.changes[0].Kind == store.ChangeDecision && b.opts.DecisionRetention >= 0 {
		if w.logged, err = record.EncodeLogged(rec.Last); err != nil {
			return nil, fmt.Errorf("store: update %s: decision log: %w", key, err)
		}
	}
	w.newIndex = schema.LastSeenKey(rec.LastSeen, rk)
	prepared = true
	return w, nil
}

// Get returns the record of key, store.ErrNotFound, or a *store.CorruptError
// (store.ErrCorrupt).
func (b *Store) Get(ctx context.Context, key target.Key) (target.Record, error) {
	if err := ctx.Err(); err != nil {
		return target.Record{}, err
	}
	rk, err := schema.RecordKey(key)
	if err != nil {
		return target.Record{}, err
	}
	if val, ok := b.lookup(rk); ok {
		return record.Decode(key, val)
	}
	var rec target.Record
	err = b.view(func(tx *bolt.Tx) error {
		raw := tx.Bucket(schema.Records).Get(rk)
		if raw == nil {
			return fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		var err error
		rec, err = record.Decode(key, raw)
		return err
	})
	if err != nil {
		return target.Record{}, err
	}
	return rec, nil
}

// List implements store.Store.List: a prefix scan of the records bucket
// (record.ListPage). Records created or removed between pages are seen or
// not as their keys fall after the token or before it.
func (b *Store) List(ctx context.Context, q store.Query) ([]target.Record, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	prefix, after, size, err := record.ListPage(q)
	if err != nil {
		return nil, "", err
	}

	var (
		records []target.Record
		corrupt []error
		next    string
	)
	err = b.viewLatest(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(schema.Records).Cursor()
		var k, v []byte
		if after != nil {
			k, v = c.Seek(after)
			if bytes.Equal(k, after) {
				k, v = c.Next()
			}
		} else {
			k, v = c.Seek(prefix)
		}
		var last []byte
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(records) == size {
				next = record.PageToken(last)
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			last = k
			key, err := record.ParseKey(k)
			if err != nil {
				corrupt = append(corrupt, &store.CorruptError{Err: err})
				continue
			}
			rec, err := record.Decode(key, v)
			if err != nil {
				corrupt = append(corrupt, err)
				continue
			}
			records = append(records, rec)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return records, next, errors.Join(corrupt...)
}

// Delete removes the record of key, also one that cannot be decoded.
func (b *Store) Delete(ctx context.Context, key target.Key) error {
	rk, err := schema.RecordKey(key)
	if err != nil {
		return err
	}
	return b.write(ctx, nil, func(tx *bolt.Tx) error {
		raw := tx.Bucket(schema.Records).Get(rk)
		if raw == nil {
			return fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		var indexKeys [][]byte
		if rec, err := record.Decode(key, raw); err == nil {
			indexKeys = append(indexKeys, schema.LastSeenKey(rec.LastSeen, rk))
		} else {
			// The index entry's time is in the undecodable value: find the
			// entry by its key suffix. Slow, and only for corrupt records.
			c := tx.Bucket(schema.LastSeen).Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if _, suffix, ok := schema.SplitLastSeenKey(k); ok && bytes.Equal(suffix, rk) {
					indexKeys = append(indexKeys, bytes.Clone(k))
				}
			}
		}
		if err := b.unsafeRemove(tx, rk, indexKeys, &key); err != nil {
			return &abortError{fmt.Errorf("store: delete %s: %w", key, err)}
		}
		return nil
	})
}

// unsafeRemove removes, in tx (a held write transaction), the record
// whose key is rk, its index entries indexKeys and its decision log, and
// appends its deletion to the change feed when its key is known. Its
// error leaves tx unusable.
func (b *Store) unsafeRemove(tx *bolt.Tx, rk []byte, indexKeys [][]byte, key *target.Key) error {
	index := tx.Bucket(schema.LastSeen)
	for _, ik := range indexKeys {
		if err := index.Delete(ik); err != nil {
			return err
		}
	}
	if err := tx.Bucket(schema.Records).Delete(rk); err != nil {
		return err
	}
	if err := unsafeForgetDecisions(tx, rk); err != nil {
		return fmt.Errorf("decision log: %w", err)
	}
	if key == nil {
		return nil
	}
	return b.appendChanges(tx, []store.Change{b.deletion(*key)})
}

// Expire implements store.Store.Expire by the last-seen index (the
// package doc, "On-disk layout"); a record whose LastSeen was left zero goes at
// any Expire, a corrupt one by the hour of its last write.
func (b *Store) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	var removed int
	err := b.write(ctx, nil, func(tx *bolt.Tx) error {
		removed = 0
		records, index := tx.Bucket(schema.Records), tx.Bucket(schema.LastSeen)
		end := record.OrderedTime(cutoff)
		var candidates [][]byte
		c := index.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			ts, _, ok := schema.SplitLastSeenKey(k)
			if ok && ts >= end {
				break
			}
			candidates = append(candidates, bytes.Clone(k))
		}
		for _, ik := range candidates {
			_, rk, ok := schema.SplitLastSeenKey(ik)
			var raw []byte
			if ok {
				raw = records.Get(rk)
			}
			key, keyErr := record.ParseKey(rk)
			stale, seen := raw == nil, false // stale: a malformed index entry, or not its record's
			if !stale && keyErr == nil {
				if rec, err := record.Decode(key, raw); err == nil {
					stale = !bytes.Equal(schema.LastSeenKey(rec.LastSeen, rk), ik)
					seen = !rec.LastSeen.IsZero() && !rec.LastSeen.Before(cutoff) // in cutoff's hour, at or after it
				}
			}
			var err error
			switch {
			case stale: // dropped alone: the record's own entry expires it
				err = index.Delete(ik)
			case seen:
				continue
			case keyErr != nil:
				err = b.unsafeRemove(tx, rk, [][]byte{ik}, nil)
			default:
				err = b.unsafeRemove(tx, rk, [][]byte{ik}, &key)
			}
			if err != nil {
				return &abortError{fmt.Errorf("store: expire: %w", err)}
			}
			if !stale {
				removed++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return removed, nil
}
