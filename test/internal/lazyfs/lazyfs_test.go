package lazyfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCutDropsUnsynced writes through a real mount: what was fsynced
// survives a cut, what was written after is gone, sizes included.
func TestCutDropsUnsynced(t *testing.T) {
	l, dir := mounted(t)
	path := filepath.Join(dir, "f")
	page := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite := func(data []byte, off int64) {
		t.Helper()
		if _, err := f.WriteAt(data, off); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(page('a', 3*pageSize), 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := page('a', 3*pageSize)
	mustWrite(page('b', 10), pageSize+5)         // inside a synced page
	mustWrite(page('c', 2*pageSize), 3*pageSize) // growing the file
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5*pageSize || got[pageSize+5] != 'b' {
		t.Fatalf("before the cut, reads see %d bytes, byte %d = %q", len(got), pageSize+5, got[pageSize+5])
	}
	f.Close()

	cut(t, l, dir)
	got, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, synced) {
		t.Errorf("after the cut: %d bytes, want the %d synced ones (diff of the first 64: %s)", len(got), len(synced), cmp.Diff(synced[:64], got[:min(64, len(got))]))
	}
	if d, _ := l.Durable("f"); !bytes.Equal(d, synced) {
		t.Errorf("Durable: %d bytes, want %d", len(d), len(synced))
	}
	syncs, cuts, dropped := l.Stats()
	if syncs != 1 || cuts != 1 || dropped != 3 {
		t.Errorf("Stats = %d syncs, %d cuts, %d dropped pages; want 1, 1, 3", syncs, cuts, dropped)
	}
}

// TestTruncateIsLazy: a shrink that was not fsynced is undone by a cut.
func TestTruncateIsLazy(t *testing.T) {
	l, dir := mounted(t)
	path := filepath.Join(dir, "f")
	want := bytes.Repeat([]byte("x"), 2*pageSize+7)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cut(t, l, dir)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("after the cut: %d bytes, want %d", len(got), len(want))
	}
}

// mounted returns a filesystem mounted on a new directory, unmounted at
// cleanup.
func mounted(t *testing.T) (*FS, string) {
	t.Helper()
	dir := t.TempDir()
	l := New()
	if err := l.Mount(dir); err != nil {
		t.Fatalf("mount FUSE (needs /dev/fuse and root): %v", err)
	}
	t.Cleanup(func() {
		if err := l.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return l, dir
}

// cut unmounts l, cuts power and mounts it again.
func cut(t *testing.T, l *FS, dir string) {
	t.Helper()
	if err := l.Unmount(); err != nil {
		t.Fatal(err)
	}
	l.Cut()
	if err := l.Mount(dir); err != nil {
		t.Fatal(err)
	}
}
