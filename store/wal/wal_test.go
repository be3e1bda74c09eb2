package wal_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/store/wal"
)

var id = []byte("0123456789abcdef")

// open opens the log of path with applied entries applied, checks it
// returns want, and resets it.
func open(t *testing.T, path string, o wal.Options, want []wal.Entry) *wal.Log {
	t.Helper()
	o.FileMode = 0o600
	l, got, err := wal.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("entries after %d (-want +got):\n%s", o.Applied, diff)
	}
	last := o.Applied
	if len(got) > 0 {
		last = got[len(got)-1].Seq
	}
	if err := l.Reset(last); err != nil {
		t.Fatal(err)
	}
	return l
}

// appendN appends entries "e<seq>" and returns them.
func appendN(t *testing.T, l *wal.Log, n int) []wal.Entry {
	t.Helper()
	var es []wal.Entry
	for range n {
		data := fmt.Appendf(nil, "e%d", l.Seq()+1)
		seq, err := l.Append(data)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, wal.Entry{Seq: seq, Data: data})
	}
	return es
}

// TestReplay: Open returns the entries after the applied one, across a
// rotation, and nothing of another log's.
func TestReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	l := open(t, path, wal.Options{ID: id}, nil)
	es := appendN(t, l, 3)
	if err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	if l.OldLast() != 3 || l.Size() != 0 {
		t.Fatalf("after Rotate: OldLast %d, Size %d; want 3, 0", l.OldLast(), l.Size())
	}
	es = append(es, appendN(t, l, 2)...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l2, got, err := wal.Open(path, wal.Options{ID: []byte("another log's ID"), FileMode: 0o600})
	if err != nil || len(got) != 0 {
		t.Fatalf("Open with another ID: %d entries, %v; want none", len(got), err)
	}
	_ = l2.Close()
	l = open(t, path, wal.Options{ID: id, Applied: 2}, es[2:])
	if _, err := os.Stat(path + wal.OldSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old segment after Reset: %v; want gone", err)
	}
	if got := appendN(t, l, 1); got[0].Seq != 6 {
		t.Errorf("first entry after Reset(5): %d; want 6", got[0].Seq)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + wal.Suffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("current segment after Remove: %v; want gone", err)
	}
}

// TestTornTail: a segment cut anywhere in its last frame reads up to the
// frame before, and after Reset the next entries follow the intact ones.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	l := open(t, src, wal.Options{ID: id}, nil)
	es := appendN(t, l, 3)
	before := l.Size()
	es = append(es, appendN(t, l, 1)...)
	full := l.Size()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src + wal.Suffix)
	if err != nil {
		t.Fatal(err)
	}
	for cut := before; cut < full; cut++ {
		path := filepath.Join(dir, fmt.Sprint("cut", cut))
		if err := os.WriteFile(path+wal.Suffix, b[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		l := open(t, path, wal.Options{ID: id}, es[:3])
		again := appendN(t, l, 1)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		_ = open(t, path, wal.Options{ID: id, Applied: 3}, again).Close()
	}
}
