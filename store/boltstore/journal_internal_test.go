package boltstore

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
)

// entryCases are journal entries of every shape a write can take.
var entryCases = []struct {
	name   string
	writes []*pb.JournalWrite
}{
	{"one new record, no changes", []*pb.JournalWrite{{RecordKey: []byte("k1"), Value: []byte("v"), NewIndexKey: []byte("i1")}}},
	{"a decision with its feed entry and log entry", []*pb.JournalWrite{{
		RecordKey: []byte("k1"), Value: []byte("record"), OldIndexKey: []byte("i0"), NewIndexKey: []byte("i1"),
		FirstRevision: 41, Changes: [][]byte{[]byte("change")}, Logged: []byte("log"), LoggedAt: timestamppb.New(time.Unix(1790000000, 123456789)),
	}}},
	{"a decision logged before 1970", []*pb.JournalWrite{{
		RecordKey: []byte("k1"), Value: []byte("record"), NewIndexKey: []byte("i1"), Logged: []byte("log"), LoggedAt: timestamppb.New(time.Unix(-5, 7)),
	}}},
	{"several writes, several changes each", []*pb.JournalWrite{
		{RecordKey: []byte("a"), Value: []byte{0, 1, 2}, NewIndexKey: []byte("ia"), FirstRevision: 1, Changes: [][]byte{{9}, {8, 7}}},
		{RecordKey: []byte("b"), Value: make([]byte, 300), OldIndexKey: []byte("ib0"), NewIndexKey: []byte("ib1"), FirstRevision: 3, Changes: [][]byte{{}}},
	}},
}

var entryOpts = cmp.Options{protocmp.Transform(), cmpopts.EquateEmpty()}

// appendV4Entry appends writes to dst in the journal format of schema
// versions 1 to 4, as the store wrote it before its entries were
// generated messages (schema.ReadJournalEntry documents it): for tests
// that need such a journal.
func appendV4Entry(dst []byte, writes []*pb.JournalWrite) []byte {
	bytes := func(b []byte) { dst = append(binary.AppendUvarint(dst, uint64(len(b))), b...) }
	dst = binary.AppendUvarint(dst, uint64(len(writes)))
	for _, w := range writes {
		bytes(w.RecordKey)
		bytes(w.Value)
		bytes(w.OldIndexKey)
		bytes(w.NewIndexKey)
		dst = binary.AppendUvarint(dst, uint64(len(w.Changes)))
		for i, c := range w.Changes {
			dst = binary.AppendUvarint(dst, w.FirstRevision+uint64(i))
			bytes(c)
		}
		bytes(w.Logged)
		if len(w.Logged) > 0 {
			at := w.LoggedAt.AsTime()
			dst = binary.AppendVarint(dst, at.Unix())
			dst = binary.AppendUvarint(dst, uint64(at.Nanosecond()))
		}
	}
	return dst
}

// TestJournalEntries: an entry's writes read back as written, in the
// current format and in the one of versions 1 to 4; no proper prefix of
// an entry of the old format reads as writes.
func TestJournalEntries(t *testing.T) {
	for _, tc := range entryCases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := appendEntry([]byte("prefix"), tc.writes)
			if err != nil {
				t.Fatal(err)
			}
			got, err := schema.ReadJournalEntry(schema.Version, b[len("prefix"):])
			if err != nil {
				t.Fatalf("ReadJournalEntry: %v", err)
			}
			if diff := cmp.Diff(tc.writes, got.Writes, entryOpts); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}

			old := appendV4Entry(nil, tc.writes)
			got, err = schema.ReadJournalEntry(4, old)
			if err != nil {
				t.Fatalf("ReadJournalEntry(4): %v", err)
			}
			if diff := cmp.Diff(tc.writes, got.Writes, entryOpts); diff != "" {
				t.Errorf("version 4 entry read back (-want +got):\n%s", diff)
			}
			for i := range len(old) {
				if _, err := schema.ReadJournalEntry(4, old[:i]); err != schema.ErrJournalEntry {
					t.Fatalf("the first %d of %d bytes read as writes (%v)", i, len(old), err)
				}
			}
		})
	}
}

// FuzzReadWrites: no entry makes the migration's reader of the journal
// format of versions 1 to 4 panic, and what it reads, written again,
// reads back the same. (The name is the one CI's fuzz-short runs.)
func FuzzReadWrites(f *testing.F) {
	for _, tc := range entryCases {
		f.Add(appendV4Entry(nil, tc.writes))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := schema.ReadJournalEntry(4, b)
		if err != nil {
			return
		}
		again, err := schema.ReadJournalEntry(4, appendV4Entry(nil, e.Writes))
		if err != nil {
			t.Fatalf("writes read and written again do not read: %v", err)
		}
		if diff := cmp.Diff(e.Writes, again.Writes, entryOpts); diff != "" {
			t.Fatalf("written again and read (-first +again):\n%s", diff)
		}
	})
}

// BenchmarkJournalEntry encodes and decodes the journal entry of a batch
// of 16 decisions (record, two feed entries, a decision-log entry each),
// as the generated JournalEntry and in the hand-written format of schema
// versions 1 to 4, in the same run: what the generated code costs on the
// committer's path (encode) and at a replay (decode).
func BenchmarkJournalEntry(b *testing.B) {
	writes := make([]*pb.JournalWrite, 16)
	for i := range writes {
		writes[i] = &pb.JournalWrite{
			RecordKey: make([]byte, 30), Value: make([]byte, 2048), OldIndexKey: make([]byte, 38), NewIndexKey: make([]byte, 38),
			FirstRevision: uint64(1000 + 2*i), Changes: [][]byte{make([]byte, 600), make([]byte, 60)},
			Logged: make([]byte, 400), LoggedAt: timestamppb.New(time.Unix(1790000000+int64(i), 5)),
		}
	}
	gen, err := appendEntry(nil, writes)
	if err != nil {
		b.Fatal(err)
	}
	v4 := appendV4Entry(nil, writes)
	for _, bc := range []struct {
		name    string
		version uint64
		encode  func(dst []byte) []byte
		entry   []byte
	}{
		{"generated", schema.Version, func(dst []byte) []byte { dst, _ = appendEntry(dst, writes); return dst }, gen},
		{"v4", 4, func(dst []byte) []byte { return appendV4Entry(dst, writes) }, v4},
	} {
		b.Run("encode/"+bc.name, func(b *testing.B) {
			var buf []byte
			b.SetBytes(int64(len(bc.entry)))
			b.ReportAllocs()
			for b.Loop() {
				buf = bc.encode(buf[:0])
			}
		})
		b.Run("decode/"+bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.entry)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := schema.ReadJournalEntry(bc.version, bc.entry); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
