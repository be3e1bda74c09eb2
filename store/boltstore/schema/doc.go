// Package schema is the whole on-disk layout of store/boltstore's file:
// every bucket name, every meta key, every key builder, the schema version
// and its migrations. Nothing else names a bucket or a meta key or builds
// a key by hand. Bump Version (with a migration in Migrate) when an
// existing reader would misread what a new writer stores.
//
// Migrations go one way: there is no downgrade. Init refuses a file whose
// version is newer than Version (store.ErrSchemaVersion) and leaves it
// untouched; the way back to an older binary is the backup taken before
// the upgrade (docs/reliability.md, "Backup and restore").
//
// # On-disk layout (schema version 6)
//
// TestLayoutDoc checks this section against the package's variables. The
// file has five top-level buckets (record keys and decision-log keys are
// built by package store/record, which the etcd backend shares):
//
//	meta
//	    "schema_version" → uint64, 8 bytes big-endian (6)
//	    "journal_seq" → uint64, 8 bytes big-endian: the last journal entry applied
//	    "journal_id" → 16 random bytes: the journal's ID
//
//	records
//	    RecordKey(cluster, namespace, name) → setpoint.storage.v1.Record
//
//	last_seen
//	    uint64 big-endian(lastSeen rounded down to its hour) ‖ RecordKey(...) → empty
//
//	changes
//	    uint64 big-endian(revision) → setpoint.storage.v1.Change
//
//	decisions
//	    RecordKey(...) ‖ uint64 big-endian(decision time) → setpoint.storage.v1.LoggedDecision
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
// The journal next to the file (package store/wal) holds in each frame a
// setpoint.storage.v1.JournalEntry: the bytes each write puts into the
// buckets above. Versions 1 to 4 wrote a hand-written format instead;
// ReadJournalEntry still reads it, only so that Open can replay the
// journal a crash of such a store left before it migrates the file.
package schema
