package boltstore_test

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
)

// The store starts a committer goroutine per Bolt; every test must leave
// none behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newPath returns the path of a store file in a fresh test directory.
func newPath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "setpoint.db")
}

// open opens a store at path and, at cleanup, closes it (unless the test
// did) and checks the whole file's consistency with bbolt's tx.Check.
func open(t testing.TB, path string, opts boltstore.Options) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil && err != store.ErrClosed {
			t.Errorf("Close: %v", err)
		}
		checkFile(t, path)
	})
	return st
}

// checkFile runs bbolt's consistency check over the file at path.
func checkFile(t testing.TB, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Errorf("check %s: %v", path, err)
		return
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("check %s: %v", path, err)
		}
		return nil
	}); err != nil {
		t.Errorf("check %s: %v", path, err)
	}
}

// editFile runs fn in a read-write transaction on the (closed) store file
// at path, to plant what a store would never write.
func editFile(t testing.TB, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("edit %s: %v", path, err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatalf("edit %s: %v", path, err)
	}
}
