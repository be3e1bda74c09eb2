package slowfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFsyncWaitsForTheDelay syncs a file in a subdirectory of a real
// mount: at once without a delay, no sooner than the delay with one, and
// at once when the delay is lifted while a sync waits; what was written is
// in the backing directory.
func TestFsyncWaitsForTheDelay(t *testing.T) {
	backing, mnt := t.TempDir(), t.TempDir()
	d, err := Mount(backing, mnt)
	if err != nil {
		t.Fatalf("mount slowfs (needs /dev/fuse and root): %v", err)
	}
	defer func() {
		if err := d.Unmount(); err != nil {
			t.Error(err)
		}
	}()
	if err := os.Mkdir(filepath.Join(mnt, "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(mnt, "wal", "0.wal"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sync := func() time.Duration {
		t.Helper()
		if _, err := f.WriteString("entry\n"); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		return time.Since(began)
	}
	sync()
	const delay = 300 * time.Millisecond
	d.SetDelay(delay)
	if took := sync(); took < delay {
		t.Errorf("a sync with a %v delay took %v", delay, took)
	}
	// A sync waiting on a long delay proceeds once it is lifted.
	// It cannot end before the lift, 200ms after the timer was armed (the
	// sync itself starts a little later, after its write).
	d.SetDelay(time.Hour)
	armed := time.Now()
	time.AfterFunc(200*time.Millisecond, func() { d.SetDelay(0) })
	if took := sync(); time.Since(armed) < 200*time.Millisecond || took > time.Minute {
		t.Errorf("a sync whose hour-long delay was lifted 200ms after the timer was armed ended %v after it (took %v)", time.Since(armed), took)
	}
	if syncs, delayed := d.Stats(); syncs != 3 || delayed != 2 {
		t.Errorf("Stats = %d syncs, %d delayed; want 3, 2", syncs, delayed)
	}
	got, err := os.ReadFile(filepath.Join(backing, "wal", "0.wal"))
	if err != nil || string(got) != "entry\nentry\nentry\n" {
		t.Errorf("the backing file holds %q (%v), want three entries", got, err)
	}
}
