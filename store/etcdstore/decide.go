package etcdstore

import (
	"context"
	"fmt"

	"github.com/setpointhq/setpoint/target"
)

// Decide implements store.Store.Decide: Update, refusing a function that
// keeps the previous last decision. Of the previous decision, fn sees
// only ID and At (record.DecodeFor): the rest is never stored
// again, as fn replaces it.
func (s *Store) Decide(ctx context.Context, key target.Key, fn func(rec *target.Record) error) (target.Record, error) {
	return s.update(ctx, key, true, func(rec *target.Record) error {
		prev := rec.Last
		if err := fn(rec); err != nil {
			return err
		}
		if prev != nil && rec.Last == prev {
			return fmt.Errorf("etcdstore: decide %s: the function left the last decision in place", key)
		}
		return nil
	})
}
