package boltstore

// This file is the whole on-disk layout: every bucket name, every meta key,
// every key builder, the schema version and its migrations. Nothing else in
// the package names a bucket or a meta key or builds a key by hand. doc.go
// describes the same layout ("On-disk layout"); TestLayoutDoc holds the
// two together. Bump SchemaVersion (with a migration in migrate) when an
// existing reader would misread what a new writer stores.
//
// Migrations go one way: there is no downgrade. Open refuses a file whose
// version is newer than SchemaVersion (store.ErrSchemaVersion) and leaves it
// untouched; the way back to an older binary is the backup taken before
// the upgrade (docs/reliability.md, "Backup and restore").

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the version of the on-disk layout this package writes.
// Open refuses a file whose stored version is larger.
//
// Version 2 stores a record's statuses once where they are equal (see
// doc.go); version 1 records read the same under it, so the migration from
// 1 rewrites only the version, but a version 1 reader would misread a
// version 2 record. Version 3 compresses record values with S2 and a
// dictionary instead of DEFLATE (compress.go); it still reads DEFLATE
// values, so the migration from 2 also rewrites only the version, and each
// record is recompressed by its next write; a version 2 reader cannot read
// a version 3 value. Version 4 keys the last-seen index by the hour a
// record was last seen in (lastSeenGrain), not the instant, so that a
// target decided every few seconds moves in the index once an hour, not
// at each decision; the migration from 1, 2 or 3 rewrites the index (a
// few seconds for a million targets, once), and a version 3 reader would
// keep a record's old entry when it moves.
const SchemaVersion uint64 = 4

// Bucket names. All buckets live at the top level of the file.
var (
	// bucketMeta holds the file's metadata: allMetaKeys.
	bucketMeta = []byte("meta")
	// bucketRecords maps recordKey(key) to a storage.v1.Record.
	bucketRecords = []byte("records")
	// bucketLastSeen is the expiry index: lastSeenKey(t, recordKey(key))
	// with an empty value, for each record, t being the record's LastSeen
	// (the key holds its hour).
	bucketLastSeen = []byte("last_seen")
	// bucketChanges is the change feed (feed.go): revisionKey(rev) →
	// setpoint.storage.v1.Change. Added without a version bump: readers
	// that do not know it ignore it, and Open creates it in a file that
	// lacks it.
	bucketChanges = []byte("changes")
	// bucketDecisions is the decision log (decisionlog.go):
	// record.DecisionKey(recordKey(key), at) → setpoint.storage.v1.LoggedDecision.
	// Added without a version bump, like bucketChanges: readers that do not
	// know it ignore it, and Open creates it in a file that lacks it.
	bucketDecisions = []byte("decisions")
)

// allBuckets lists every bucket of the layout, created together.
var allBuckets = [][]byte{bucketMeta, bucketRecords, bucketLastSeen, bucketChanges, bucketDecisions}

// Meta keys: the values of bucketMeta.
var (
	// keyMetaSchemaVersion is the meta key whose value is the schema
	// version as an 8-byte big-endian integer.
	keyMetaSchemaVersion = []byte("schema_version")
	// keyMetaJournalSeq is the meta key whose value is the sequence number
	// of the last journal entry applied (journal.go), an 8-byte big-endian
	// integer (absent: 0). Added without a version bump: a reader that
	// does not know it ignores it.
	keyMetaJournalSeq = []byte("journal_seq")
	// keyMetaJournalID is the meta key whose value is the file's journal
	// ID, 16 random bytes written at the first Open that needs them: a
	// journal replays only onto its own file (or a backup of it). Added
	// with keyMetaJournalSeq.
	keyMetaJournalID = []byte("journal_id")
)

// allMetaKeys lists every meta key of the layout.
var allMetaKeys = [][]byte{keyMetaSchemaVersion, keyMetaJournalSeq, keyMetaJournalID}

// Record keys are record.Key's ordered bytes (package store/record owns
// their encoding, which the etcd backend shares).

// tsLength is the length of the time prefix of a lastSeenKey.
const tsLength = record.TimeLength

// recordKey is the key of k's record in bucketRecords (record.Key). It
// fails with store.ErrInvalid when the key is too long for bbolt.
var recordKey = record.Key

// lastSeenGrain is the precision of the last-seen index: an entry holds
// the start of the hour its record was last seen in.
const lastSeenGrain = time.Hour

// lastSeenKey is the key of a record's entry in bucketLastSeen: the 8-byte
// big-endian order-preserving encoding of t rounded down to lastSeenGrain
// (Unix nanoseconds with the sign bit flipped, clamped to the int64 range,
// the zero time sorting first) followed by the record key. Entries
// therefore sort by hour, then by key, and two times of one hour give the
// same key: a write that leaves its record in the same hour leaves the
// index alone.
func lastSeenKey(t time.Time, rk []byte) []byte {
	b := make([]byte, tsLength, tsLength+len(rk))
	binary.BigEndian.PutUint64(b, record.OrderedTime(t.Truncate(lastSeenGrain)))
	return append(b, rk...)
}

// splitLastSeenKey returns the time prefix and the record key of an index
// entry.
func splitLastSeenKey(b []byte) (ts uint64, rk []byte, ok bool) {
	if len(b) <= tsLength {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(b[:tsLength]), b[tsLength:], true
}

// revisionKey is the key of a change in bucketChanges: the revision,
// 8 bytes big-endian, so keys sort by revision.
func revisionKey(rev uint64) []byte { return binary.BigEndian.AppendUint64(nil, rev) }

// encodeVersion is the stored form of a schema version.
func encodeVersion(v uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, v)
}

// initSchema checks the layout of the file open in tx and returns its
// schema version: it creates the layout (at SchemaVersion) in an empty
// file, and the buckets added without a version bump in a file that lacks
// them; it fails with store.ErrSchemaVersion for a newer version or a file that
// is not a Setpoint store. It does not migrate: Open replays the journal,
// written in the file's version, first.
func initSchema(tx *bolt.Tx) (uint64, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		var foreign []byte
		if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			foreign = append([]byte(nil), name...)
			return errStopIteration
		}); err != nil && !errors.Is(err, errStopIteration) {
			return 0, err
		}
		if foreign != nil {
			return 0, fmt.Errorf("%w: the file has bucket %q but no %q bucket: not a setpoint store", store.ErrSchemaVersion, foreign, bucketMeta)
		}
		for _, name := range allBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return 0, fmt.Errorf("store: create bucket %q: %w", name, err)
			}
		}
		return SchemaVersion, tx.Bucket(bucketMeta).Put(keyMetaSchemaVersion, encodeVersion(SchemaVersion))
	}
	v, err := storedVersion(tx)
	switch {
	case err != nil:
		return 0, err
	case v > SchemaVersion:
		return 0, fmt.Errorf("%w: the file has schema version %d, newer than %d, the latest this binary knows", store.ErrSchemaVersion, v, SchemaVersion)
	case v == 0:
		return 0, fmt.Errorf("%w: the file has schema version 0", store.ErrSchemaVersion)
	}
	for _, name := range [][]byte{bucketChanges, bucketDecisions} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return 0, fmt.Errorf("store: create bucket %q: %w", name, err)
		}
	}
	for _, name := range allBuckets {
		if tx.Bucket(name) == nil {
			return 0, fmt.Errorf("%w: bucket %q is missing", store.ErrSchemaVersion, name)
		}
	}
	return v, nil
}

// migrate brings a file of schema version from up to SchemaVersion, in
// one transaction: a case per step, the stored version rewritten last.
func migrate(tx *bolt.Tx, from uint64) error {
	switch from {
	case SchemaVersion:
		return nil
	case 1, 2, 3:
		// Version 2 only adds ways to leave equal statuses out of a record;
		// every version 1 record is a valid version 2 record. Version 3
		// reads version 2's DEFLATE values as they are; the next write of a
		// record stores it with S2. Rewriting every record here would make
		// the first start of a large file slow for nothing. Version 4's
		// index holds hours where the earlier ones held instants: it is
		// rewritten.
		if err := rekeyLastSeen(tx); err != nil {
			return fmt.Errorf("store: migrate from schema version %d: last-seen index: %w", from, err)
		}
		return tx.Bucket(bucketMeta).Put(keyMetaSchemaVersion, encodeVersion(SchemaVersion))
	default:
		return fmt.Errorf("%w: no migration from schema version %d", store.ErrSchemaVersion, from)
	}
}

// rekeyLastSeen rewrites every entry of the last-seen index with its time
// rounded down to lastSeenGrain, in key order (bbolt inserts into a node's
// sorted slice: in any other order a million entries take minutes), its
// pages filled.
func rekeyLastSeen(tx *bolt.Tx) error {
	old := tx.Bucket(bucketLastSeen)
	var keys [][]byte
	if err := old.ForEach(func(k, _ []byte) error {
		keys = append(keys, k) // the file's memory: read before the bucket is deleted below
		return nil
	}); err != nil {
		return err
	}
	rekeyed := make([][]byte, 0, len(keys))
	for _, k := range keys {
		ts, rk, ok := splitLastSeenKey(k)
		if !ok {
			continue // malformed, no record's entry: dropped
		}
		n := int64(ts ^ 1<<63)
		if n == math.MinInt64 || n == math.MaxInt64 { // the zero time, or saturated: rounding keeps it
			rekeyed = append(rekeyed, bytes.Clone(k))
			continue
		}
		rekeyed = append(rekeyed, lastSeenKey(time.Unix(0, n), rk))
	}
	slices.SortFunc(rekeyed, bytes.Compare) // rounding reorders the records of one hour
	if err := tx.DeleteBucket(bucketLastSeen); err != nil {
		return err
	}
	index, err := tx.CreateBucket(bucketLastSeen)
	if err != nil {
		return err
	}
	index.FillPercent = 1
	for _, k := range rekeyed {
		if err := index.Put(k, []byte{}); err != nil {
			return err
		}
	}
	return nil
}

// journalSeq returns the sequence number of the last frame applied in tx.
func journalSeq(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(bucketMeta).Get(keyMetaJournalSeq); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// putJournalSeq records in tx seq as the last journal entry applied.
func putJournalSeq(tx *bolt.Tx, seq uint64) error {
	return tx.Bucket(bucketMeta).Put(keyMetaJournalSeq, binary.BigEndian.AppendUint64(nil, seq))
}

// storedVersion reads the schema version of an open file.
func storedVersion(tx *bolt.Tx) (uint64, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, fmt.Errorf("%w: no %q bucket", store.ErrSchemaVersion, bucketMeta)
	}
	raw := meta.Get(keyMetaSchemaVersion)
	if len(raw) != 8 {
		return 0, fmt.Errorf("%w: stored schema version %x is not an 8-byte integer", store.ErrSchemaVersion, raw)
	}
	return binary.BigEndian.Uint64(raw), nil
}

// errStopIteration ends a ForEach early.
var errStopIteration = errors.New("stop iteration")
