package boltstore

// The decision log: a compact entry per decision in schema.Decisions, written
// in the transaction of the Update that made the decision, trimmed to
// Options.DecisionRetention by that same write, and removed with the target.

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
	bolt "go.etcd.io/bbolt"
)

// unsafeLogEncoded appends a decision made at `at`, encoded by
// record.EncodeLogged as val (outside the transaction), to the log of the
// target whose record key is rk and removes that target's entries older
// than the retention, in tx (a held write transaction). The caller logs
// nothing when the retention is negative.
func (b *Store) unsafeLogEncoded(tx *bolt.Tx, rk []byte, at time.Time, val []byte) error {
	bucket := tx.Bucket(schema.Decisions)
	bucket.FillPercent = 1 // keys of one target arrive in time order: append-mostly
	cutoff := record.DecisionKey(rk, at.Add(-b.opts.DecisionRetention))
	c := bucket.Cursor()
	for k, _ := c.Seek(rk); k != nil && bytes.HasPrefix(k, rk) && bytes.Compare(k, cutoff) < 0; k, _ = c.Seek(rk) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return bucket.Put(record.DecisionKey(rk, at), val)
}

// unsafeForgetDecisions removes the whole log of the target whose record
// key is rk, in tx (a held write transaction).
func unsafeForgetDecisions(tx *bolt.Tx, rk []byte) error {
	c := tx.Bucket(schema.Decisions).Cursor()
	for k, _ := c.Seek(rk); k != nil && bytes.HasPrefix(k, rk); k, _ = c.Seek(rk) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// Decisions returns one page of key's decision log, oldest first, and the
// token of the next page (empty after the last one). A target without a
// log (unknown, or not decided within the retention) has an empty page. An
// entry that does not decode fails the call with a *store.CorruptError.
func (b *Store) Decisions(ctx context.Context, key target.Key, q store.DecisionQuery) ([]target.LoggedDecision, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	rk, err := schema.RecordKey(key)
	if err != nil {
		return nil, "", err
	}
	start, end, size, err := record.DecisionPage(rk, q)
	if err != nil {
		return nil, "", err
	}
	var out []target.LoggedDecision
	var next string
	err = b.viewLatest(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(schema.Decisions).Cursor()
		for k, v := c.Seek(start); k != nil && len(k) == len(rk)+schema.TimeLength && bytes.HasPrefix(k, rk) && bytes.Compare(k, end) < 0; k, v = c.Next() {
			if len(out) == size {
				next = record.PageToken(k[len(rk):])
				return nil
			}
			d, err := record.DecodeLogged(record.DecisionTime(k), v)
			if err != nil {
				return &store.CorruptError{Key: key, Err: fmt.Errorf("decision log entry: %w", err)}
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}
