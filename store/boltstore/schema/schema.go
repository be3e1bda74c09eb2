package schema

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	bolt "go.etcd.io/bbolt"
)

// Version is the version of the on-disk layout this package writes.
// Open refuses a file whose stored version is larger.
//
// Version 2 stores a record's equal statuses once; version 3 compresses
// values with S2 and a dictionary (it still reads DEFLATE ones); version 4
// keys the last-seen index by the hour; version 5 writes the journal's
// entries as the generated JournalEntry (journal.proto), where 1 to 4
// wrote a format by hand (ReadJournalEntry); version 6 compresses values
// against a second dictionary (store/record's values2.dict), trained on
// the generated encoding. Each version's reader would misread what the
// next one writes: a version 4 reader would take a version 5 journal that
// a crash left for a torn one and drop its writes, and a version 5 reader
// cannot decompress a version 6 value. Migrate says what each step
// rewrites.
const Version uint64 = 6

// Bucket names. All buckets live at the top level of the file.
var (
	// Meta holds the file's metadata: MetaKeys.
	Meta = []byte("meta")
	// Records maps RecordKey(key) to a storage.v1.Record.
	Records = []byte("records")
	// LastSeen is the expiry index: LastSeenKey(t, RecordKey(key))
	// with an empty value, for each record, t being the record's LastSeen
	// (the key holds its hour).
	LastSeen = []byte("last_seen")
	// Changes is the change feed (feed.go): RevisionKey(rev) →
	// setpoint.storage.v1.Change. Added without a version bump: readers
	// that do not know it ignore it, and Open creates it in a file that
	// lacks it.
	Changes = []byte("changes")
	// Decisions is the decision log (decisionlog.go):
	// record.DecisionKey(RecordKey(key), at) → setpoint.storage.v1.LoggedDecision.
	// Added without a version bump, like Changes: readers that do not
	// know it ignore it, and Open creates it in a file that lacks it.
	Decisions = []byte("decisions")
)

// Buckets lists every bucket of the layout, created together.
var Buckets = [][]byte{Meta, Records, LastSeen, Changes, Decisions}

// Meta keys: the values of Meta.
var (
	// MetaSchemaVersion is the meta key whose value is the schema
	// version as an 8-byte big-endian integer.
	MetaSchemaVersion = []byte("schema_version")
	// MetaJournalSeq is the meta key whose value is the sequence number
	// of the last journal entry applied (journal.go), an 8-byte big-endian
	// integer (absent: 0). Added without a version bump: a reader that
	// does not know it ignores it.
	MetaJournalSeq = []byte("journal_seq")
	// MetaJournalID is the meta key whose value is the file's journal
	// ID, 16 random bytes written at the first Open that needs them: a
	// journal replays only onto its own file (or a backup of it). Added
	// with MetaJournalSeq.
	MetaJournalID = []byte("journal_id")
)

// MetaKeys lists every meta key of the layout.
var MetaKeys = [][]byte{MetaSchemaVersion, MetaJournalSeq, MetaJournalID}

// Record keys are record.Key's ordered bytes (package store/record owns
// their encoding, which the etcd backend shares).

// TimeLength is the length of the time prefix of a LastSeenKey.
const TimeLength = record.TimeLength

// RecordKey is the key of k's record in Records (record.Key). It
// fails with store.ErrInvalid when the key is too long for bbolt.
var RecordKey = record.Key

// lastSeenGrain is the precision of the last-seen index: an entry holds
// the start of the hour its record was last seen in.
const lastSeenGrain = time.Hour

// LastSeenKey is the key of a record's entry in LastSeen: the 8-byte
// big-endian order-preserving encoding of t rounded down to lastSeenGrain
// (Unix nanoseconds with the sign bit flipped, clamped to the int64 range,
// the zero time sorting first) followed by the record key. Entries
// therefore sort by hour, then by key, and two times of one hour give the
// same key: a write that leaves its record in the same hour leaves the
// index alone.
func LastSeenKey(t time.Time, rk []byte) []byte {
	b := make([]byte, TimeLength, TimeLength+len(rk))
	binary.BigEndian.PutUint64(b, record.OrderedTime(t.Truncate(lastSeenGrain)))
	return append(b, rk...)
}

// SplitLastSeenKey returns the time prefix and the record key of an index
// entry.
func SplitLastSeenKey(b []byte) (ts uint64, rk []byte, ok bool) {
	if len(b) <= TimeLength {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(b[:TimeLength]), b[TimeLength:], true
}

// RevisionKey is the key of a change in Changes: the revision,
// 8 bytes big-endian, so keys sort by revision.
func RevisionKey(rev uint64) []byte { return binary.BigEndian.AppendUint64(nil, rev) }

// EncodeVersion is the stored form of a schema version.
func EncodeVersion(v uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, v)
}

// Init checks the layout of the file open in tx and returns its
// schema version: it creates the layout (at Version) in an empty
// file, and the buckets added without a version bump in a file that lacks
// them; it fails with store.ErrSchemaVersion for a newer version or a file that
// is not a Setpoint store. It does not Migrate: Open replays the journal,
// written in the file's version, first.
func Init(tx *bolt.Tx) (uint64, error) {
	meta := tx.Bucket(Meta)
	if meta == nil {
		if foreign, _ := tx.Cursor().First(); foreign != nil {
			return 0, fmt.Errorf("%w: the file has bucket %q but no %q bucket: not a setpoint store", store.ErrSchemaVersion, foreign, Meta)
		}
		for _, name := range Buckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return 0, fmt.Errorf("store: create bucket %q: %w", name, err)
			}
		}
		return Version, tx.Bucket(Meta).Put(MetaSchemaVersion, EncodeVersion(Version))
	}
	v, err := StoredVersion(tx)
	switch {
	case err != nil:
		return 0, err
	case v > Version:
		return 0, fmt.Errorf("%w: the file has schema version %d, newer than %d, the latest this binary knows", store.ErrSchemaVersion, v, Version)
	case v == 0:
		return 0, fmt.Errorf("%w: the file has schema version 0", store.ErrSchemaVersion)
	}
	for _, name := range [][]byte{Changes, Decisions} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return 0, fmt.Errorf("store: create bucket %q: %w", name, err)
		}
	}
	for _, name := range Buckets {
		if tx.Bucket(name) == nil {
			return 0, fmt.Errorf("%w: bucket %q is missing", store.ErrSchemaVersion, name)
		}
	}
	return v, nil
}

// Migrate brings a file of schema version from up to Version, in one
// transaction, the stored version rewritten last. Versions 2, 3, 5 and 6
// change nothing a migration must rewrite: a version 1 record is a valid
// version 2 one, versions 3 and 6 read the values of the compression
// before them (each record is recompressed by its next write), and Open
// has replayed the journal of the old format before it migrates. Version 4's index holds hours
// where the earlier ones held instants: it is rewritten.
func Migrate(tx *bolt.Tx, from uint64) error {
	switch {
	case from == Version:
		return nil
	case from == 0 || from > Version:
		return fmt.Errorf("%w: no migration from schema version %d", store.ErrSchemaVersion, from)
	case from < 4:
		if err := rekeyLastSeen(tx); err != nil {
			return fmt.Errorf("store: Migrate from schema version %d: last-seen index: %w", from, err)
		}
	}
	return tx.Bucket(Meta).Put(MetaSchemaVersion, EncodeVersion(Version))
}

// rekeyLastSeen rewrites every entry of the last-seen index with its time
// rounded down to lastSeenGrain, in key order (bbolt inserts into a node's
// sorted slice: in any other order a million entries take minutes), its
// pages filled.
func rekeyLastSeen(tx *bolt.Tx) error {
	old := tx.Bucket(LastSeen)
	var keys [][]byte
	if err := old.ForEach(func(k, _ []byte) error {
		keys = append(keys, k) // the file's memory: read before the bucket is deleted below
		return nil
	}); err != nil {
		return err
	}
	rekeyed := make([][]byte, 0, len(keys))
	for _, k := range keys {
		ts, rk, ok := SplitLastSeenKey(k)
		if !ok {
			continue // malformed, no record's entry: dropped
		}
		n := int64(ts ^ 1<<63)
		if n == math.MinInt64 || n == math.MaxInt64 { // the zero time, or saturated: rounding keeps it
			rekeyed = append(rekeyed, bytes.Clone(k))
			continue
		}
		rekeyed = append(rekeyed, LastSeenKey(time.Unix(0, n), rk))
	}
	slices.SortFunc(rekeyed, bytes.Compare) // rounding reorders the records of one hour
	if err := tx.DeleteBucket(LastSeen); err != nil {
		return err
	}
	index, err := tx.CreateBucket(LastSeen)
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

// JournalSeq returns the sequence number of the last frame applied in tx.
func JournalSeq(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(Meta).Get(MetaJournalSeq); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// PutJournalSeq records in tx seq as the last journal entry applied.
func PutJournalSeq(tx *bolt.Tx, seq uint64) error {
	return tx.Bucket(Meta).Put(MetaJournalSeq, binary.BigEndian.AppendUint64(nil, seq))
}

// StoredVersion reads the schema version of an open file.
func StoredVersion(tx *bolt.Tx) (uint64, error) {
	meta := tx.Bucket(Meta)
	if meta == nil {
		return 0, fmt.Errorf("%w: no %q bucket", store.ErrSchemaVersion, Meta)
	}
	raw := meta.Get(MetaSchemaVersion)
	if len(raw) != 8 {
		return 0, fmt.Errorf("%w: stored schema version %x is not an 8-byte integer", store.ErrSchemaVersion, raw)
	}
	return binary.BigEndian.Uint64(raw), nil
}
