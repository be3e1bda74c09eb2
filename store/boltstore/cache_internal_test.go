package boltstore

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// TestRecordCacheStaleRecordConflicts: when the stored value is no longer
// the one a cached record was decoded from (here written behind the
// store's back, as a Delete or Expire racing with the cache leaves it),
// the update's write conflicts and its function runs again on the stored
// record; nothing made from the stale record is stored.
func TestRecordCacheStaleRecordConflicts(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "setpoint.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	cached := storetest.FullRecord(target.Key{Cluster: "c", Namespace: "n", Name: "web"})
	for range 2 { // the cache takes a key's record from its second miss on
		if _, err := st.Update(ctx, cached.Key, func(r *target.Record) error { *r = cached; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	stored := storetest.FullRecord(cached.Key)
	stored.History.Recommendations = stored.History.Recommendations[:1]
	val, err := encodeRecord(&stored)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := schema.RecordKey(stored.Key)
	if err != nil {
		t.Fatal(err)
	}
	// As Delete and Expire do: once the journaled writes are in bbolt.
	if err := st.caughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(schema.Records).Put(rk, val) }); err != nil {
		t.Fatal(err)
	}
	var given []int
	got, err := st.Update(ctx, cached.Key, func(r *target.Record) error {
		given = append(given, len(r.History.Recommendations))
		r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: 9, At: r.LastSeen})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{len(cached.History.Recommendations), 1}; !slices.Equal(given, want) {
		t.Errorf("the function was given records of %v recommendations, want %v (the cached one, then the stored one)", given, want)
	}
	if n := len(got.History.Recommendations); n != 2 {
		t.Errorf("stored %d recommendations, want 2", n)
	}
	if back, err := st.Get(ctx, cached.Key); err != nil || len(back.History.Recommendations) != 2 {
		t.Errorf("Get: %d recommendations, %v; want 2", len(back.History.Recommendations), err)
	}
}
