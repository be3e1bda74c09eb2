// Package boltstore is the embedded store.Store: every target's record in
// one bbolt file, with a write-ahead journal (package store/wal) next to it
// while it is open. It is the default backend of setpoint-server.
//
//	st, err := boltstore.Open("/var/lib/setpoint/setpoint.db", boltstore.Options{})
//	if err != nil { ... }
//	defer st.Close()
//
// Open creates the file and its layout on first start (its directory must
// exist), waits up to Options.LockTimeout for another process holding the
// file, replays the journal a crash left, and migrates the file to
// SchemaVersion. It refuses a file of a newer version, or a bbolt file
// that is not a Setpoint store (store.ErrSchemaVersion), leaving it
// untouched; there is no downgrade (package schema). Close writes
// everything journaled into bbolt and removes the journal: a closed store
// is one file.
//
// # Writes: only bytes go through the single writer
//
// Update reads the stored value, decodes it, runs the caller's function,
// and bounds and encodes the record and its change-feed entries in the
// caller's goroutine, then queues the new bytes with the value it read.
// The committer writes them only if the stored value is still that value,
// byte for byte; otherwise Update starts again on the new record. Updates
// of one key in this process wait for each other from read to commit, so
// a conflict means something else (Delete, Expire) wrote the record.
//
// # Group commit
//
// Every write is queued to one committer goroutine (committer.go). It
// takes what is queued (up to Options.MaxBatch), appends the batch's
// Updates to the journal as one entry, flushes it with one fdatasync, and
// answers each caller with its own result; Deletes and Expires follow in a bbolt
// transaction of their own. The batcher (batcher.go) holds a batch open
// while more writes are coming, never longer than Options.MaxBatchDelay.
// A write whose own apply fails is answered with its error, the rest of
// the batch goes on; a failed commit fails the whole batch. A cancelled
// write that the committer had already taken may still be stored.
//
// # The journal and the checkpointer
//
// bbolt commits with two fsyncs and holds its single writer through both;
// the journal, <file>.journal, takes one. Each entry holds the bytes its
// writes put into bbolt (a JournalEntry of
// proto/setpoint/storage/v1/journal.proto; journal.go). The checkpointer
// (checkpoint.go) writes the journaled entries into bbolt in ordinary
// transactions — every Options.CheckpointInterval, once 12,000 writes
// wait, or at once when a read waits for it — with the sequence number of
// the last entry applied in the same transaction. Open replays the entries
// after it up to the first torn or out-of-sequence one. Until a record is
// checkpointed, an overlay in memory holds its newest journaled value,
// which Update and Get read first; the reads that walk bbolt (List,
// Decisions, the change feed, Count, Backup) first wait until bbolt has
// every write answered before they began. If a checkpoint fails, the store
// refuses further writes and the next Open replays the journal.
//
// # On-disk layout
//
// Package schema owns the file's buckets, keys, version and migrations
// (go doc ./store/boltstore/schema); values are the protobuf messages of
// proto/setpoint/storage/v1, encoded by package store/record, which the
// etcd backend shares (store/record/FORMAT.md). Expire walks an index
// ordered by the hour of each record's LastSeen, so a pass costs the
// records it removes plus those last seen in cutoff's hour. The changes
// bucket is the change feed, its newest Options.MaxChanges kept; the
// decisions bucket is the decision log, each target's trimmed to
// Options.DecisionRetention by its own decisions and removed with it.
package boltstore
