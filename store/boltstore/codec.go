package boltstore

// The bbolt backend's use of package store/record, which encodes what
// every backend stores: records, change-feed entries, decision-log entries
// and keys.

import (
	"fmt"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// decodeRecord parses the stored form of the record of k. Any failure is a
// *store.CorruptError.
func decodeRecord(k target.Key, b []byte) (target.Record, error) {
	rec, err := record.Decode(k, b)
	if err != nil {
		return target.Record{}, &store.CorruptError{Key: k, Err: err}
	}
	return rec, nil
}

// decodeRecordFor is decodeRecord, and with forDecision of the record's
// last decision only its ID and At (see store.Store.Decide).
func decodeRecordFor(k target.Key, b []byte, forDecision bool) (target.Record, error) {
	if !forDecision {
		return decodeRecord(k, b)
	}
	rec, err := record.DecodeForDecision(k, b)
	if err != nil {
		return target.Record{}, &store.CorruptError{Key: k, Err: err}
	}
	return rec, nil
}

// entryOf is the stored form of c (its revision is the key).
func entryOf(c *store.Change) record.Entry {
	return record.Entry{Key: c.Key, Decision: c.Decision, Event: c.Event, Deleted: c.Kind == store.ChangeDeleted, At: c.At, Created: c.Created}
}

// encodeChanges returns the stored form of each change.
func encodeChanges(cs []store.Change) ([][]byte, error) {
	vals := make([][]byte, len(cs))
	for i := range cs {
		e := entryOf(&cs[i])
		var err error
		if vals[i], err = record.EncodeEntry(&e); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// decodeChange parses the stored change of revision rev; its error
// matches store.ErrCorrupt.
func decodeChange(rev uint64, b []byte) (store.Change, error) {
	e, err := record.DecodeEntry(b)
	if err != nil {
		return store.Change{}, fmt.Errorf("%w: change %d: %v", store.ErrCorrupt, rev, err)
	}
	c := changeOf(&e)
	c.Revision = rev
	return c, nil
}

// changeOf is the change e records, without a revision.
func changeOf(e *record.Entry) store.Change {
	c := store.Change{Key: e.Key, Decision: e.Decision, Event: e.Event, Created: e.Created}
	switch {
	case e.Decision != nil:
		c.Kind = store.ChangeDecision
	case e.Event != nil:
		c.Kind = store.ChangeObservation
	default:
		c.Kind, c.At = store.ChangeDeleted, e.At
	}
	return c
}

// changesOf is changeOf of each of es; none gives nil.
func changesOf(es []record.Entry) []store.Change {
	if len(es) == 0 {
		return nil
	}
	out := make([]store.Change, len(es))
	for i := range es {
		out[i] = changeOf(&es[i])
	}
	return out
}
