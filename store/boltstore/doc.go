// Package boltstore is the embedded store.Store: every target's record in
// one bbolt file, with a write-ahead journal (package store/wal) next to it
// while it is open, a committer that shares one flush among concurrent
// writes, and a checkpointer that writes the journal into bbolt behind it.
//
// # Opening
//
//	st, err := boltstore.Open("/var/lib/setpoint/setpoint.db", boltstore.Options{})
//	if err != nil { ... }
//	defer st.Close()
//
// The file and its layout are created on first start; its directory must
// exist. Open waits up to Options.LockTimeout for another process holding
// the file, and refuses a file whose schema version is newer than
// SchemaVersion, or a bbolt file that is not a Setpoint store
// (store.ErrSchemaVersion), leaving it untouched. Migrations go one way: an
// older binary cannot open a file a newer one has migrated, and the way
// back is the backup taken before the upgrade. Open replays the journal
// a crash left (see The journal). Close waits for the writes already queued, writes everything
// journaled to bbolt, removes the journal and closes the file: a closed
// store is one file. Every call after Close returns store.ErrClosed.
//
// # Writing: read, decide, compare
//
// A write is one Update: load the target's record (a target.Record),
// run the caller's function — a transition of package target — on it,
// store the result if the record is still the one the function was given.
// The store knows what a record holds, not how it changes. A decision is
// one Decide, an Update whose function replaces the last decision and reads
// of the previous one only its ID and At, so the store may leave the rest
// of it undecoded:
//
//	rec, err := st.Decide(ctx, key, func(rec *target.Record) error {
//		return target.Decide(rec, in, id, now) // an error: nothing is stored
//	})
//
// Update (and Decide) returns only after the write is durable — in the journal, flushed
// to the disk (see The journal) — so an answer built from rec describes
// durable state.
//
// The function must depend only on its argument and must not keep it: it
// may run more than once (see below), and the record it receives is its own
// copy. If it returns an error, nothing is stored for that call and the
// error is returned; it runs in the caller's goroutine, so a panic is the
// caller's, and nothing is stored. What it leaves in Key is ignored.
//
// Only bytes go through the single writer. Update reads the stored value in
// a read-only transaction, decodes it, runs the function, bounds and
// encodes the record and its change-feed entries — all in the caller's
// goroutine, in parallel with other callers — and queues the new bytes
// with the value it read. The committer journals them only if the stored
// value (the newest journaled one, see The journal) is still that value,
// byte for byte: the value is the record's
// revision (the etcd backend compares a mod revision instead). Otherwise
// the write is a conflict, writes nothing, and Update starts again from the
// new record, running the function again. Updates of one key in this
// process also wait for each other, one at a time from read to commit, so
// that they follow each other instead of conflicting; a conflict then means
// something else (Delete, Expire) wrote the record in between.
//
// A record cache (Options.RecordCacheBytes, cache.go) spares the read and
// the decoding: after a commit, Update keeps a copy of the record it
// wrote, made as decoding the value would give it (times in UTC, empty
// lists nil: storedCopy, checked against the decoder by fuzzing), with the
// value it wrote. The next Update of the
// key takes it out of the cache and runs the function on it without
// reading; its write carries the cached value as the one it read, so if
// the record changed meanwhile (Delete and Expire drop cached records,
// but may race with an Update putting its record back) the write
// conflicts and the update starts over from what is stored. The cache
// holds each record alone: it shares nothing with the record Update
// returns, a function's record is never put back, and nothing of an
// update that did not commit is kept.
//
// # Group commit
//
// Every write (Update, Delete, Expire) is queued to one committer goroutine.
// The committer takes everything queued — up to Options.MaxBatch —,
// appends the batch's Updates to the journal as one frame, flushes it
// (one fsync), and answers each caller with its own result; the batch's
// Deletes and Expires follow in a bbolt transaction of their own. The writes
// that arrive while a commit is being written make up the next batch.
// Before taking a batch, the committer waits while more writes are coming:
// Updates of other keys being prepared (read, decided, encoded — counted
// from their key's lock to their queueing) and, when the server counts
// them in Options.Arrivals, write calls it has received and not yet
// passed to the store (being read, decoded, validated). It commits the
// moment none is coming — or, when its last commit carried more than one
// write (the store is busy), once its queue has also not grown for an
// eighth of the delay: under load, calls the server has accepted but not
// yet started handling (waiting for a processor) are not counted; after a
// commit of sixteen writes or more it holds the whole delay, as so many
// calls in flight keep the processors busy meanwhile — and never waits
// longer than Options.MaxBatchDelay (3 ms) nor past a full batch: with the decision made outside the writer, a committer that took
// each write the moment it was queued committed one or two writes at a
// time at 64 callers, and every commit costs more CPU than a decision. An Update waiting for its
// key's lock (held by a queued write of the same key) is not counted as
// coming. Without Arrivals the committer cannot see calls before they
// reach the store, and when its last commit carried more than one write
// it holds each batch for the whole MaxBatchDelay, which at 64 callers
// leaves the processors idle about an eighth of the time (every call in
// flight queued or being committed) and holds a few callers' writes for
// the whole delay. It never waits for a lone caller (nothing being
// prepared or on its way, one write per commit): its write is committed
// at once. Under load the cost of an fsync is shared by every decision
// waiting for it; without load there is no added latency. (bbolt's own
// DB.Batch is not used: it holds even a lone caller for its
// MaxBatchDelay.) Stats counts commits and writes.
//
// A batch carries writes of different targets (one target's updates follow
// each other, see above); two concurrent Updates of one target are
// serialized and neither loses the other's history entry. A write's error
// (a conflict, a bbolt error) fails only that write. If a write leaves the transaction
// unusable (a bbolt write error), the transaction is rolled back, that
// write is answered with its error, and the rest of the batch is applied
// again. If the commit itself fails, every write of the batch gets the
// error and nothing of it is stored.
//
// If a caller's context ends while it waits, Update (Delete, Expire)
// returns ctx.Err() at once. If the committer had not yet taken the write,
// it is dropped: for an Update the function has already run (on a record
// that is then not stored), but nothing it made is stored, and the next
// Update of the target starts from what is stored. If the committer had
// taken it, the write may still be committed after the call returned —
// with its change-feed and decision-log entries — and an Update of the
// same target that read the record before that commit conflicts and runs
// again on what was committed. A cancelled Update does not say whether it
// happened; a caller that needs to know reads the record with Get.
//
// # The journal
//
// bbolt commits a transaction with two fsyncs (its pages, then its meta
// page), and holds its single writer through both. Written straight to
// bbolt, every batch's answer waited for both, and the next batch for
// them too; and a goroutine blocked in fsync keeps its processor until
// the runtime takes it back, so on two processors every commit left one
// of them idle for much of the flush (a fifth of a core at 64 calls in
// flight, measured as iowait). So the committer appends each batch of
// Updates to a journal, <file>.journal — the write-ahead log of package
// store/wal: a frame per batch, with its length, a CRC-32C and a sequence
// number, whose entry holds, per write, the bytes it puts into bbolt
// (record, last-seen index keys, change-feed entries with their
// revisions, decision-log entry; journal.go) — flushes it with one
// fdatasync, and answers.
//
// A second goroutine, the checkpointer (checkpoint.go), writes the
// journaled frames to bbolt in ordinary bbolt transactions, so the file
// is always consistent: every second, or once 12,000 writes wait, or at
// once when a read or the committer waits for it. Each checkpoint also
// stores the sequence number of its last frame (meta key journal_seq) in
// the same transaction. Open replays the frames after it — up to the
// first one that is short, fails its checksum or breaks the sequence (the
// tail a crash left half written) — in one transaction, then empties the
// journal. Past 32 MiB the committer waits for the checkpointer and
// empties the journal; a power cut that undoes the truncation brings back
// frames already applied, which replay skips. If a checkpoint fails, the
// store refuses further writes and the reads that would miss journaled
// ones, keeps the journal at Close, and the next Open replays it.
//
// Until the checkpointer has written a record, an overlay in memory holds
// its newest journaled value: Update's read and its conflict check, and
// Get, look there first. The reads that walk bbolt — List, Decisions, the
// change feed, Count, Backup — first wait until bbolt has every write
// answered before they began (and wake the checkpointer for it). Delete
// and Expire wait for the same before the committer writes them to bbolt
// directly, as every write was before the journal; their changes take the
// next revisions, so the change feed keeps the order of the answers.
//
// # Reading
//
// Get and List use read-only transactions, concurrently with the
// committer; they see answered writes only. List walks keys in order —
// cluster, then namespace, then name, each compared as bytes — optionally
// restricted to a cluster or to a namespace of a cluster, and returns pages
// (default 100 records, at most 1000) with an opaque next-page token that
// is empty after the last page.
//
// # Corrupt records
//
// A value that does not decode is an error for that target only: Get and
// Update return a *CorruptError (errors.Is(err, ErrCorrupt)) naming the key,
// other targets are unaffected, and nothing panics on bad bytes. List
// returns the page's decodable records and its next-page token together
// with an error joining one *CorruptError per skipped record, so one bad
// record does not hide the rest. Delete removes a corrupt record (the next
// Update starts afresh); Expire removes it by the time of its last write.
//
// # Bounds and retention
//
// Update keeps the newest Options.MaxEvents observed events (default 64).
// The engine bounds History itself, overwriting entries that have left its
// windows as the Kubernetes controller does; the store never trims it by
// time, which would change decisions. It only caps each list at
// Options.MaxHistory entries (default 4096, dropping the oldest) so that a
// target decided more than 4096 times within a window cannot grow its
// record without limit.
//
// Expire(cutoff) removes the targets whose LastSeen is before cutoff. It
// walks a secondary index ordered by the hour of the last-seen time and
// reads the records it finds there, so a pass costs the number of records
// it removes, plus those last seen in cutoff's hour, plus one seek, not a
// scan of the store. The
// caller sets LastSeen in its Update function; a record left with a zero
// LastSeen is removed by the next Expire. The store runs no loop of its
// own: the server calls Expire periodically (server.Options.ExpireAfter,
// ExpireInterval), every server of a shared store alike.
//
// # On-disk layout (schema version 4)
//
// schema.go holds every bucket name, meta key, key builder and migration
// (TestLayoutDoc checks this section against it). The file has five
// top-level buckets (record keys and decision-log keys are built by
// package store/record, which the etcd backend shares):
//
//	meta
//	    "schema_version" → uint64, 8 bytes big-endian (4)
//	    "journal_seq" → uint64, 8 bytes big-endian: the last journal entry applied
//	    "journal_id" → 16 random bytes: the journal's ID
//
//	records
//	    recordKey(cluster, namespace, name) → setpoint.storage.v1.Record
//
//	last_seen
//	    uint64 big-endian(lastSeen rounded down to its hour) ‖ recordKey(...) → empty
//
//	changes
//	    uint64 big-endian(revision) → setpoint.storage.v1.Change
//
//	decisions
//	    recordKey(...) ‖ uint64 big-endian(decision time) → setpoint.storage.v1.LoggedDecision
//
// A record key is the cluster, the namespace and the name, each with every
// 0x00 byte written as 0x00 0xFF and followed by the terminator 0x00 0x01.
// Keys therefore sort by (cluster, namespace, name), and the encoding of a
// cluster, or of a cluster and a namespace, is the prefix of exactly that
// cluster's (namespace's) keys: List filters are prefix scans.
//
// In last_seen, the time is the start of the hour of the record's
// LastSeen, as Unix nanoseconds with the sign bit flipped, so that the bytes
// sort as the times do (the zero time, and times outside 1678–2262,
// saturate at the ends). Each record has exactly one index entry, for its
// current LastSeen's hour; an Update that moves the record to another hour
// moves it (most leave it: a target decided every 15 s changes hours once
// in 240 decisions, which spares each other decision a write to a random
// page of the index), and Delete and Expire remove it in the record's
// transaction. Versions 1 to 3 keyed it by the instant; Open replays the
// journal, written in the file's version, before it rewrites the index.
//
// Values are protobuf messages of proto/setpoint/storage/v1/storage.proto,
// storage-only messages mirroring target.Record and the engine types, so that
// `buf breaking` guards the disk format as it guards the API. Package
// store/record converts records, feed entries and decision-log entries to
// and from them and frames the bytes; the generated code
// (planetscale/vtprotobuf's MarshalVT and UnmarshalVT) marshals and
// unmarshals them, so every field number is written once, in the .proto.
// store/record/FORMAT.md lists every stored message field by field;
// TestFormatDoc renders those tables from the generated descriptors, and
// TestDocsNameRealFields checks each Message.field this doc names.
// Enumerations
// are stored as their Kubernetes spelling in strings; an absent timestamp
// is the zero time; times are read back in UTC; empty and absent lists and
// maps are the same. Strings must be valid UTF-8 (the gRPC API guarantees
// it); a record that could not be read back — an invalid string, a time
// outside the years 1–9999 — is refused by Update, never stored.
//
// Version 2 stores equal statuses once, since statuses are most of a
// record: Record.Last.Decision.Status is left out, with
// LastDecision.decision_status_is_record_status set, when it equals
// Record.Status (as it does until an observation changes the status); and
// each condition of Record.Last.Before equal to one of Record.Status is
// stored as its index in Status.condition_refs (-1 for the next condition
// Before stores itself). A version 2 reader reads version 1 records as
// they are; Open migrates a version 1 file by rewriting its version.
// Version 2 also stored a record value of 256 bytes or more, when that is
// smaller, as the byte 0x00 followed by the message compressed with
// DEFLATE. Version 3 stores such a value as the byte 0x01 followed by the
// message compressed with S2 against the dictionary values.dict
// (store/record/compress.go); it reads 0x00 values as version 2 wrote them, so Open
// migrates a version 2 file by rewriting its version, and each record is
// recompressed by its next write. No protobuf message starts with a byte
// below 0x08. A two-metric target's record of 3.1 KB (version 1) is 2.2 KB
// with shared statuses, about 1 KB with DEFLATE and about 530 bytes with
// S2 and the dictionary, at a sixth of DEFLATE's CPU.
//
// LastDecision.from (the replica count the decision started from, which a
// failed rescale is recorded from) was added within version 2: a record
// without it reads the count from the stored explanation's
// current_replicas, which always held the same number, so no migration
// rewrites the file.
//
// The changes bucket is the change feed (feed.go). Every write that records
// something for a target appends, in its own transaction, one Change per
// thing recorded: a decision (Record.Last has a new ID), an observed event
// (Record.Events grew), a deletion (Delete, Expire). Changes are numbered by
// a revision that increases across the whole file and is never reused —
// the next revision is the last key plus one, so it survives restarts —
// and only the newest Options.MaxChanges (default 10,000) are kept, the
// oldest being removed in the transaction that appends past the bound. A
// decision's entry holds what the decision said — not its history, nor
// the status it started from (Record.Last.Before), which stay in the
// record — and is the record's own message of the decision, marshalled
// after the record (store/record.EncodeWrite), not converted a second
// time; entries written by older versions also carry the status it
// started from, which readers ignore. At about 0.6 KiB per
// decision the default costs some 6 MiB of file. Changes
// reads them from a revision on (ErrOutOfRange when that revision is no
// longer kept, or beyond the latest); Follow hands each commit's changes to
// a callback right after the commit, in revision order, which is how the
// server's Watch streams them live. The bucket was added without a new
// schema version: a reader that does not know it ignores it, and Open
// creates it in a file that lacks it.
//
// The decisions bucket is the decision log (decisionlog.go): the Update
// that records a decision (Record.Last has a new ID) also writes a compact
// LoggedDecision under the target's record key and the decision time
// (ordered like last_seen's), and removes that target's entries older than
// Options.DecisionRetention (default 3 h) counted back from the new one — a
// seek and, at a steady sync, one delete. Delete and Expire remove the
// target's whole log with its record. Decisions pages through one target's
// log by time. A record key is never a proper prefix of another, so the
// record key is the prefix of exactly one target's entries. Like the change
// feed, the bucket was added without a new schema version: an older reader
// ignores it (but would not trim or remove it), and Open creates it.
//
// A change that an existing reader would misread needs a new SchemaVersion
// and a migration step in schema.go; fields added to the storage messages
// do not.
package boltstore
