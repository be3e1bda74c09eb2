package boltstore_test

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"

	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// TestOpenMigrates opens files of older schema versions, with the record
// value as that version wrote it: each becomes the current version, its
// record reads as before, and the record's next write stores it with S2
// against the second dictionary (first byte 0x02).
func TestOpenMigrates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		version  uint64
		compress func(t *testing.T, msg []byte) []byte // the value as that version stored it; nil: as it is
	}{
		{"version 1", 1, nil},
		{"version 2, DEFLATE value", 2, deflate},
		{"version 2, plain value", 2, nil},
		{"version 5, first dictionary's value", 5, firstDictionary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			st := open(t, path, boltstore.Options{})
			key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
			want := put(t, st, fullRecord(key))
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			rk, err := boltstore.RecordKey(key)
			if err != nil {
				t.Fatal(err)
			}
			editFile(t, path, func(tx *bolt.Tx) error {
				if err := setVersion(binary.BigEndian.AppendUint64(nil, tc.version))(tx); err != nil {
					return err
				}
				msg, err := record.Marshal(&want)
				if err != nil {
					return err
				}
				if tc.compress != nil {
					msg = tc.compress(t, msg)
				}
				return tx.Bucket(boltstore.BucketRecords).Put(rk, msg)
			})

			st = open(t, path, boltstore.Options{})
			if v, err := st.SchemaVersion(); err != nil || v != boltstore.SchemaVersion {
				t.Fatalf("SchemaVersion() = %d, %v; want %d", v, err, boltstore.SchemaVersion)
			}
			got, err := st.Get(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("record after the migration (-want +got):\n%s", diff)
			}
			put(t, st, got)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			editFile(t, path, func(tx *bolt.Tx) error {
				if v := tx.Bucket(boltstore.BucketRecords).Get(rk); len(v) == 0 || v[0] != 0x02 {
					t.Errorf("value after the next write starts % x, want 02 (S2, the second dictionary)", v[:min(len(v), 2)])
				}
				return nil
			})
		})
	}
}

// firstDictionary is a value as schema versions 3 to 5 stored it: 0x01 and
// the message compressed with S2 against store/record/values.dict.
func firstDictionary(t *testing.T, msg []byte) []byte {
	t.Helper()
	raw, err := os.ReadFile("../record/values.dict")
	if err != nil {
		t.Fatal(err)
	}
	d := s2.NewDict(raw)
	if d == nil {
		t.Fatal("values.dict is not an S2 dictionary")
	}
	return append([]byte{0x01}, d.Encode(nil, msg)...)
}

// deflate is a value as schema version 2 stored it: 0x00 and the message
// compressed with DEFLATE.
func deflate(t *testing.T, msg []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteByte(0x00)
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
