package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/store/wal"
	"github.com/setpointhq/setpoint/target"
)

// exactLastSeenKey is an index key as schema versions 1 to 3 wrote it:
// the instant, not its hour.
func exactLastSeenKey(t time.Time, rk []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, record.OrderedTime(t)), rk...)
}

// indexKeys returns the keys of the last-seen index of the closed file at
// path.
func indexKeys(t *testing.T, path string) [][]byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys [][]byte
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(schema.LastSeen).ForEach(func(k, _ []byte) error {
			keys = append(keys, bytes.Clone(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestLastSeenIndexHoldsHours: a record's index entry holds the hour it
// was last seen in; a write in the same hour leaves the entry, a write in
// a later hour moves it.
func TestLastSeenIndexHoldsHours(t *testing.T) {
	path := filepath.Join(t.TempDir(), "setpoint.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	rk, _ := schema.RecordKey(key)
	t0 := time.Date(2026, 3, 1, 12, 10, 0, 0, time.UTC)
	for _, step := range []struct {
		seen time.Time
		want []byte
	}{
		{t0, schema.LastSeenKey(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), rk)},
		{t0.Add(49 * time.Minute), schema.LastSeenKey(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), rk)},
		{t0.Add(50 * time.Minute), schema.LastSeenKey(time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC), rk)},
	} {
		if _, err := st.Update(context.Background(), key, func(r *target.Record) error { r.LastSeen = step.seen; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := st.caughtUp(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		_ = st.view(func(tx *bolt.Tx) error {
			return tx.Bucket(schema.LastSeen).ForEach(func(k, _ []byte) error { got = append(got, bytes.Clone(k)); return nil })
		})
		if diff := gocmp.Diff([][]byte{step.want}, got); diff != "" {
			t.Errorf("seen %v: index (-want +got):\n%s", step.seen, diff)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRekeysLastSeenAfterReplay: a version 3 file, its index keyed by
// instants, with a journal a version 3 server left behind (a write whose
// index keys are instants too): Open replays the journal first, then
// rewrites the index by hours, so each record has exactly its hour's
// entry (a record never seen keeps the zero time's) and Expire removes by
// LastSeen.
func TestOpenRekeysLastSeenAfterReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "setpoint.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := func(h, m int) time.Time { return time.Date(2026, 3, 1, h, m, 7, 123, time.UTC) }
	a, b, z := target.Key{Cluster: "c", Namespace: "n", Name: "a"}, target.Key{Cluster: "c", Namespace: "n", Name: "b"}, target.Key{Cluster: "c", Namespace: "n", Name: "z"}
	ra, _ := schema.RecordKey(a)
	rb, _ := schema.RecordKey(b)
	rz, _ := schema.RecordKey(z)
	for k, seen := range map[target.Key]time.Time{a: at(12, 0), b: at(12, 30), z: {}} { // z: never seen
		if _, err := st.Update(ctx, k, func(r *target.Record) error { r.LastSeen = seen; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// As version 3 left it: its version, instants in the index, and a
	// journal holding a's move to 14:10.
	moved := target.Record{Key: a, LastSeen: at(14, 10)}
	val, err := record.Encode(&moved)
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		entry   []byte
		id      []byte
		applied uint64
	)
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(schema.Meta).Put(schema.MetaSchemaVersion, schema.EncodeVersion(3)); err != nil {
			return err
		}
		if err := tx.DeleteBucket(schema.LastSeen); err != nil {
			return err
		}
		index, err := tx.CreateBucket(schema.LastSeen)
		if err != nil {
			return err
		}
		for _, k := range [][]byte{exactLastSeenKey(at(12, 0), ra), exactLastSeenKey(at(12, 30), rb), exactLastSeenKey(time.Time{}, rz)} {
			if err := index.Put(k, []byte{}); err != nil {
				return err
			}
		}
		id, applied = bytes.Clone(tx.Bucket(schema.Meta).Get(schema.MetaJournalID)), schema.JournalSeq(tx)
		entry = appendV4Entry(nil, []*pb.JournalWrite{{
			RecordKey: ra, Value: val, OldIndexKey: exactLastSeenKey(at(12, 0), ra), NewIndexKey: exactLastSeenKey(at(14, 10), ra),
		}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	log, _, err := wal.Open(path, wal.Options{ID: id, Applied: applied, FileMode: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Reset(applied); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(entry); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := st.SchemaVersion(); err != nil || v != schema.Version {
		t.Errorf("SchemaVersion() = %d, %v; want %d", v, err, schema.Version)
	}
	if got, err := st.Get(ctx, a); err != nil || !got.LastSeen.Equal(at(14, 10)) {
		t.Errorf("Get(a): LastSeen %v, %v; want the journal's %v", got.LastSeen, err, at(14, 10))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	want := [][]byte{exactLastSeenKey(time.Time{}, rz), schema.LastSeenKey(at(12, 0), rb), schema.LastSeenKey(at(14, 0), ra)} // in key order: hour, then key
	if diff := gocmp.Diff(want, indexKeys(t, path)); diff != "" {
		t.Errorf("index after Open (-want +got):\n%s", diff)
	}

	st, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, step := range []struct {
		cutoff time.Time
		want   int
	}{{at(12, 30), 1}, {at(12, 30), 0}, {at(12, 31), 1}, {at(14, 10), 0}, {at(14, 11), 1}} {
		if n, err := st.Expire(ctx, step.cutoff); err != nil || n != step.want {
			t.Errorf("Expire(%v) = %d, %v; want %d", step.cutoff, n, err, step.want)
		}
	}
}

// TestExpireDropsStrayIndexEntries: an index entry that is not its
// record's (a record's entry is always its LastSeen's hour) is dropped by
// the Expire that reaches it, and the record stays until its own entry's
// time.
func TestExpireDropsStrayIndexEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "setpoint.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	rk, _ := schema.RecordKey(key)
	seen := time.Date(2026, 3, 1, 15, 0, 0, 0, time.UTC)
	if _, err := st.Update(ctx, key, func(r *target.Record) error { r.LastSeen = seen; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := st.caughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	stray := schema.LastSeenKey(seen.Add(-3*time.Hour), rk)
	if err := st.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(schema.LastSeen).Put(stray, []byte{}) }); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Expire(ctx, seen.Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("Expire before LastSeen = %d, %v; want 0", n, err)
	}
	var left [][]byte
	_ = st.view(func(tx *bolt.Tx) error {
		return tx.Bucket(schema.LastSeen).ForEach(func(k, _ []byte) error { left = append(left, bytes.Clone(k)); return nil })
	})
	if diff := gocmp.Diff([][]byte{schema.LastSeenKey(seen, rk)}, left); diff != "" {
		t.Errorf("index after Expire (-want +got):\n%s", diff)
	}
	if n, err := st.Expire(ctx, seen.Add(time.Second)); err != nil || n != 1 {
		t.Errorf("Expire after LastSeen = %d, %v; want 1", n, err)
	}
}
