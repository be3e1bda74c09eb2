package etcdstore

// The etcd backend's use of package store/record, which encodes what
// every backend stores, so that both keep the same bytes.

import (
	"fmt"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// keyBytes is record.Key, its error matching store.ErrInvalid.
func keyBytes(k target.Key) ([]byte, error) {
	b, err := record.Key(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrInvalid, err)
	}
	return b, nil
}

// decodeRecord is record.Decode, its error a *store.CorruptError.
func decodeRecord(k target.Key, b []byte) (target.Record, error) {
	rec, err := record.Decode(k, b)
	if err != nil {
		return target.Record{}, &store.CorruptError{Key: k, Err: err}
	}
	return rec, nil
}

// entryOf is the stored form of c (its revision is not stored).
func entryOf(c *store.Change) record.Entry {
	return record.Entry{Key: c.Key, Decision: c.Decision, Event: c.Event, Deleted: c.Kind == store.ChangeDeleted, At: c.At, Created: c.Created}
}

// changeOf is the change e records, numbered rev.
func changeOf(rev uint64, e *record.Entry) store.Change {
	c := store.Change{Revision: rev, Key: e.Key, Decision: e.Decision, Event: e.Event, Created: e.Created}
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
