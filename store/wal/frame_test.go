package wal

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// frameCases are entries of the shapes a log holds.
var frameCases = []struct {
	name string
	e    Entry
}{
	{"empty data", Entry{Seq: 1, Data: []byte{}}},
	{"a few bytes", Entry{Seq: 7, Data: []byte("one write")}},
	{"a large sequence number", Entry{Seq: 1 << 40, Data: []byte{0, 1, 2, 255}}},
	{"a kilobyte", Entry{Seq: 300, Data: make([]byte, 1024)}},
}

// testSeed is the checksum seed of the frames of frameCases.
var testSeed = Seed([]byte("a journal ID"))

// TestFrames: a frame reads back as written, and no prefix of it, nor any
// frame with one bit flipped, nor the frame as another log's, reads as a
// frame.
func TestFrames(t *testing.T) {
	for _, tc := range frameCases {
		t.Run(tc.name, func(t *testing.T) {
			frame := appendFrame(nil, testSeed, tc.e.Seq, tc.e.Data)
			got, n, err := readFrame(append(frame, "next frame"...), testSeed)
			if err != nil || n != len(frame) {
				t.Fatalf("readFrame: %d bytes, %v; want %d", n, err, len(frame))
			}
			if diff := cmp.Diff(tc.e, got); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
			for i := range len(frame) {
				if _, _, err := readFrame(frame[:i], testSeed); err != errFrame {
					t.Fatalf("the first %d of %d bytes read as a frame (%v)", i, len(frame), err)
				}
			}
			if _, _, err := readFrame(frame, testSeed+1); err != errFrame {
				t.Fatalf("the frame read as one of another log (%v)", err)
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
		f.Add(appendFrame(nil, testSeed, tc.e.Seq, tc.e.Data)[8:])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		frame := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
		frame = binary.LittleEndian.AppendUint32(frame, crc32.Update(testSeed, castagnoli, payload))
		frame = append(frame, payload...)
		e, n, err := readFrame(frame, testSeed)
		if err != nil {
			return
		}
		if n != len(frame) {
			t.Fatalf("read %d of the frame's %d bytes", n, len(frame))
		}
		again, _, err := readFrame(appendFrame(nil, testSeed, e.Seq, e.Data), testSeed)
		if err != nil {
			t.Fatalf("a frame read and written again does not read: %v", err)
		}
		if diff := cmp.Diff(e, again); diff != "" {
			t.Fatalf("written again and read (-first +again):\n%s", diff)
		}
	})
}
