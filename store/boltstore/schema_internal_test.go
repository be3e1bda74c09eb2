package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

func TestRecordKeyTooLong(t *testing.T) {
	_, err := schema.RecordKey(target.Key{Cluster: "c", Namespace: "n", Name: strings.Repeat("x", record.MaxKeyLength)})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("schema.RecordKey of a huge name: %v, want store.ErrInvalid", err)
	}
}

// TestUpdateRetriesAConflict: when the record changes between an update's
// read and its write (here: another write slipped in), the write is a
// conflict, the update runs its function again on the new record, and
// both changes are kept.
func TestUpdateRetriesAConflict(t *testing.T) {
	b, err := Open(filepath.Join(t.TempDir(), "setpoint.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	rk, _ := schema.RecordKey(key)
	add := func(n int32) func(*target.Record) error {
		return func(r *target.Record) error {
			r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: n, At: time.Unix(int64(n), 0).UTC()})
			r.LastSeen = time.Unix(int64(n), 0).UTC()
			return nil
		}
	}
	runs := 0
	slipped := false
	b.testHookAfterPrepare = func() {
		if slipped {
			return
		}
		slipped = true
		w, err := b.prepare(key, rk, false, add(2))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.write(ctx, w, nil); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := b.Update(ctx, key, func(r *target.Record) error { runs++; return add(1)(r) })
	if err != nil {
		t.Fatal(err)
	}
	if runs != 2 {
		t.Errorf("the function ran %d times, want 2 (once more after the conflict)", runs)
	}
	var got []int32
	for _, r := range rec.History.Recommendations {
		got = append(got, r.Replicas)
	}
	if !slices.Equal(got, []int32{2, 1}) {
		t.Errorf("recommendations %v, want [2 1]: the slipped-in write, then the retried one", got)
	}
	stored, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.History.Recommendations) != 2 {
		t.Errorf("stored %d recommendations, want 2", len(stored.History.Recommendations))
	}
}

// TestMetaKeysWritten: a store opened, written and closed holds exactly
// the meta keys of schema.MetaKeys.
func TestMetaKeysWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(context.Background(), target.Key{Cluster: "c", Namespace: "n", Name: "a"}, func(r *target.Record) error {
		r.LastSeen = time.Unix(1790000000, 0).UTC()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got, want []string
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(schema.Meta).ForEach(func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range schema.MetaKeys {
		want = append(want, string(k))
	}
	slices.Sort(want)
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("meta keys in the file (-want +got):\n%s", diff)
	}
}
