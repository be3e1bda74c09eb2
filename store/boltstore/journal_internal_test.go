package boltstore

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// entryCases are journal entries of every shape a write can take.
var entryCases = []struct {
	name   string
	writes []journalWrite
}{
	{"one new record, no changes", []journalWrite{{rk: []byte("k1"), val: []byte("v"), newIndex: []byte("i1")}}},
	{"a decision with its feed entry and log entry", []journalWrite{{
		rk: []byte("k1"), val: []byte("record"), oldIndex: []byte("i0"), newIndex: []byte("i1"),
		revs: []uint64{41}, changes: [][]byte{[]byte("change")}, logged: []byte("log"), at: time.Unix(1790000000, 123456789).UTC(),
	}}},
	{"a decision logged before 1970", []journalWrite{{
		rk: []byte("k1"), val: []byte("record"), newIndex: []byte("i1"), logged: []byte("log"), at: time.Unix(-5, 7).UTC(),
	}}},
	{"several writes, several changes each", []journalWrite{
		{rk: []byte("a"), val: []byte{0, 1, 2}, newIndex: []byte("ia"), revs: []uint64{1, 2}, changes: [][]byte{{9}, {8, 7}}},
		{rk: []byte("b"), val: make([]byte, 300), oldIndex: []byte("ib0"), newIndex: []byte("ib1"), revs: []uint64{3}, changes: [][]byte{{}}},
	}},
}

var entryOpts = cmp.Options{cmp.AllowUnexported(journalWrite{}), cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })}

// TestJournalEntries: an entry's writes read back as written, and no
// proper prefix of an entry reads as writes.
func TestJournalEntries(t *testing.T) {
	for _, tc := range entryCases {
		t.Run(tc.name, func(t *testing.T) {
			b := appendWrites(nil, tc.writes)
			got, err := readWrites(b)
			if err != nil {
				t.Fatalf("readWrites: %v", err)
			}
			if diff := cmp.Diff(tc.writes, got, entryOpts); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
			for i := range len(b) {
				if _, err := readWrites(b[:i]); err != errEntry {
					t.Fatalf("the first %d of %d bytes read as writes (%v)", i, len(b), err)
				}
			}
		})
	}
}

// FuzzReadWrites: no entry makes readWrites panic, and what it reads,
// written again, reads back the same.
func FuzzReadWrites(f *testing.F) {
	for _, tc := range entryCases {
		f.Add(appendWrites(nil, tc.writes))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		writes, err := readWrites(b)
		if err != nil {
			return
		}
		again, err := readWrites(appendWrites(nil, writes))
		if err != nil {
			t.Fatalf("writes read and written again do not read: %v", err)
		}
		if diff := cmp.Diff(writes, again, entryOpts); diff != "" {
			t.Fatalf("written again and read (-first +again):\n%s", diff)
		}
	})
}
