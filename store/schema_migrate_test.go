package store_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// TestOpenMigratesVersion1 opens a file of schema version 1: it becomes
// version 2 and its records read as before.
func TestOpenMigratesVersion1(t *testing.T) {
	path := newPath(t)
	st := open(t, path, store.Options{})
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	want := put(t, st, fullRecord(key))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	editFile(t, path, setVersion(binary.BigEndian.AppendUint64(nil, 1)))

	st = open(t, path, store.Options{})
	if v, err := st.SchemaVersion(); err != nil || v != 2 {
		t.Fatalf("SchemaVersion() = %d, %v; want 2", v, err)
	}
	got, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record after the migration (-want +got):\n%s", diff)
	}
}
