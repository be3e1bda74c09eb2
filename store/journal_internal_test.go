package store

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// frameCases are journal frames of every shape a write can take.
var frameCases = []struct {
	name   string
	seq    uint64
	writes []journalWrite
}{
	{"one new record, no changes", 1, []journalWrite{{rk: []byte("k1"), val: []byte("v"), newIndex: []byte("i1")}}},
	{"a decision with its feed entry and log entry", 7, []journalWrite{{
		rk: []byte("k1"), val: []byte("record"), oldIndex: []byte("i0"), newIndex: []byte("i1"),
		revs: []uint64{41}, changes: [][]byte{[]byte("change")}, logged: []byte("log"), at: time.Unix(1790000000, 123456789).UTC(),
	}}},
	{"a decision logged before 1970", 8, []journalWrite{{
		rk: []byte("k1"), val: []byte("record"), newIndex: []byte("i1"), logged: []byte("log"), at: time.Unix(-5, 7).UTC(),
	}}},
	{"several writes, several changes each", 1 << 40, []journalWrite{
		{rk: []byte("a"), val: []byte{0, 1, 2}, newIndex: []byte("ia"), revs: []uint64{1, 2}, changes: [][]byte{{9}, {8, 7}}},
		{rk: []byte("b"), val: make([]byte, 300), oldIndex: []byte("ib0"), newIndex: []byte("ib1"), revs: []uint64{3}, changes: [][]byte{{}}},
	}},
}

// testSeed is the checksum seed of the frames of frameCases.
var testSeed = crc32.Checksum([]byte("a journal ID"), castagnoli)

var frameOpts = cmp.Options{cmp.AllowUnexported(journalWrite{}, journaledBatch{}), cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })}

// TestJournalFrames: a frame reads back as written, and no prefix of it,
// nor any frame with one bit flipped, nor the frame as another journal's,
// reads as a frame.
func TestJournalFrames(t *testing.T) {
	for _, tc := range frameCases {
		t.Run(tc.name, func(t *testing.T) {
			frame := appendFrame(nil, testSeed, tc.seq, tc.writes)
			got, n, err := readFrame(append(frame, "next frame"...), testSeed)
			if err != nil || n != len(frame) {
				t.Fatalf("readFrame: %d bytes, %v; want %d", n, err, len(frame))
			}
			if diff := cmp.Diff(journaledBatch{seq: tc.seq, writes: tc.writes}, got, frameOpts); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
			for i := range len(frame) {
				if _, _, err := readFrame(frame[:i], testSeed); err != errFrame {
					t.Fatalf("the first %d of %d bytes read as a frame (%v)", i, len(frame), err)
				}
			}
			if _, _, err := readFrame(frame, testSeed+1); err != errFrame {
				t.Fatalf("the frame read as one of another journal (%v)", err)
			}
			for bit := range len(frame) * 8 {
				flipped := append([]byte(nil), frame...)
				flipped[bit/8] ^= 1 << (bit % 8)
				if _, _, err := readFrame(flipped, testSeed); err != errFrame {
					t.Fatalf("frame with bit %d flipped read as a frame (%v)", bit, err)
				}
			}
		})
	}
}

// FuzzReadFrame: no payload, under a valid length and checksum, makes
// readFrame panic, and what it reads, written again, reads back the same.
func FuzzReadFrame(f *testing.F) {
	for _, tc := range frameCases {
		f.Add(appendFrame(nil, testSeed, tc.seq, tc.writes)[8:])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		frame := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
		frame = binary.LittleEndian.AppendUint32(frame, crc32.Update(testSeed, castagnoli, payload))
		frame = append(frame, payload...)
		jb, n, err := readFrame(frame, testSeed)
		if err != nil {
			return
		}
		if n != len(frame) {
			t.Fatalf("read %d of the frame's %d bytes", n, len(frame))
		}
		again, _, err := readFrame(appendFrame(nil, testSeed, jb.seq, jb.writes), testSeed)
		if err != nil {
			t.Fatalf("a frame read and written again does not read: %v", err)
		}
		if diff := cmp.Diff(jb, again, frameOpts); diff != "" {
			t.Fatalf("written again and read (-first +again):\n%s", diff)
		}
	})
}
