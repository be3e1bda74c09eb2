package store

import (
	"cmp"
	"encoding/binary"
	"time"

	"github.com/setpointhq/setpoint/target"
)

// This file lends the record and change codecs, the key layout and the
// update step to other backends (package store/etcdstore), so that every
// backend stores the same bytes and records the same changes.

// EncodeRecord returns the stored form of rec, the one every backend keeps.
func EncodeRecord(rec *target.Record) ([]byte, error) { return encodeRecord(rec) }

// DecodeRecord parses the stored form of the record of k; its error matches
// ErrCorrupt.
func DecodeRecord(k target.Key, b []byte) (target.Record, error) { return decodeRecord(k, b) }

// EncodeChange returns the stored form of c; its revision is kept apart (in
// the key).
func EncodeChange(c *Change) ([]byte, error) { return encodeChange(c) }

// DecodeChange parses the stored form of the change of revision rev.
func DecodeChange(rev uint64, b []byte) (Change, error) { return decodeChange(rev, b) }

// KeyBytes returns the ordered byte form of k (record keys sort as List
// walks them), or ErrInvalid for a key too long to store.
func KeyBytes(k target.Key) ([]byte, error) { return recordKey(k) }

// ParseKeyBytes is the inverse of KeyBytes.
func ParseKeyBytes(b []byte) (target.Key, error) { return parseRecordKey(b) }

// KeyPrefix returns the common prefix of the KeyBytes of the records a
// Query selects by Cluster and Namespace (empty selects all).
func KeyPrefix(cluster, namespace string) []byte {
	switch {
	case namespace != "":
		return namespacePrefix(cluster, namespace)
	case cluster != "":
		return clusterPrefix(cluster)
	}
	return nil
}

// Limits bound what an update leaves in a record, as Options.MaxEvents and
// Options.MaxHistory do for Bolt.
type Limits struct {
	// MaxEvents bounds target.Record.Events; 0 means DefaultMaxEvents.
	MaxEvents int
	// MaxHistory bounds each list of target.Record.History; 0 means
	// DefaultMaxHistory.
	MaxHistory int
}

// ApplyUpdate runs an Update's fn on rec, the record of key as stored
// (existed says it was), and returns the changes the feed records for it,
// with rec left as it is to be stored: key restored and bounded by l. A
// panic in fn is not recovered.
func ApplyUpdate(key target.Key, rec *target.Record, existed bool, l Limits, fn func(*target.Record) error) ([]Change, error) {
	before := feedMark(rec, existed)
	if err := fn(rec); err != nil {
		return nil, err
	}
	changes := before.changes(key, rec)
	rec.Key = key
	boundRecord(rec, cmp.Or(l.MaxEvents, DefaultMaxEvents), cmp.Or(l.MaxHistory, DefaultMaxHistory))
	return changes, nil
}

// EncodeLoggedDecision returns the stored decision-log entry of last.
func EncodeLoggedDecision(last *target.LastDecision) ([]byte, error) {
	return encodeLoggedDecision(last)
}

// DecodeLoggedDecision parses a decision-log entry made at `at`.
func DecodeLoggedDecision(at time.Time, b []byte) (target.LoggedDecision, error) {
	return decodeLoggedDecision(at, b)
}

// DecisionKey is the decision-log key of a decision made at `at` by the
// target whose KeyBytes are kb: kb then 8 bytes that sort as times do.
func DecisionKey(kb []byte, at time.Time) []byte { return decisionKey(kb, at) }

// DecisionTime is the time in the last 8 bytes of a DecisionKey.
func DecisionTime(k []byte) time.Time {
	return timeOfOrdered(binary.BigEndian.Uint64(k[len(k)-tsLength:]))
}
