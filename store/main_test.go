package store_test

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
)

// Copy starts goroutines; every test must leave none behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newPath returns the path of a store file in a fresh test directory.
func newPath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "setpoint.db")
}

// open opens a bbolt store at path and closes it at cleanup (unless the
// test did).
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
	})
	return st
}
