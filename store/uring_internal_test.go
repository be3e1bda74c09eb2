package store

import (
	"os"
	"path/filepath"
	"testing"
)

func TestURingSyncer(t *testing.T) {
	u, err := newUringSyncer()
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	defer u.close()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := f.WriteAt([]byte("frame"), int64(i*5)); err != nil {
			t.Fatal(err)
		}
		if err := u.fdatasync(f); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	r, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := u.fdatasync(r); err != nil {
		t.Logf("read-only file: %v", err)
	}
	f.Close()
	if err := u.fdatasync(f); err == nil {
		t.Error("sync of a closed file succeeded")
	} else {
		t.Log(err)
	}
}
