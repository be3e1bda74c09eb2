package wal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// maxFrameBytes bounds a frame's payload on reading: a larger length is
// the garbage of a torn or stale tail, not a frame.
const maxFrameBytes = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errFrame is the error of bytes that are not a whole, intact frame.
var errFrame = errors.New("wal: not a frame")

// Seed returns the checksum seed of the log whose ID is id: every frame's
// CRC-32C starts from it, so a frame reads only in its own log.
func Seed(id []byte) uint32 { return crc32.Checksum(id, castagnoli) }

// appendFrame appends to dst the frame of the entry seq, data, checksummed
// from seed.
func appendFrame(dst []byte, seed uint32, seq uint64, data []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, 8)...)
	dst = binary.AppendUvarint(dst, seq)
	dst = append(dst, data...)
	payload := dst[start+8:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Update(seed, castagnoli, payload))
	return dst
}

// readFrame decodes the frame at the start of b, checksummed from seed,
// and returns its entry and its length in bytes; errFrame when b does not
// start with an intact frame of that log. The entry's data shares memory
// with b.
func readFrame(b []byte, seed uint32) (e Entry, n int, err error) {
	if len(b) < 8 {
		return e, 0, errFrame
	}
	size := binary.LittleEndian.Uint32(b)
	if size == 0 || size > maxFrameBytes || uint64(len(b)-8) < uint64(size) {
		return e, 0, errFrame
	}
	payload := b[8 : 8+size]
	if crc32.Update(seed, castagnoli, payload) != binary.LittleEndian.Uint32(b[4:]) {
		return e, 0, errFrame
	}
	seq, m := binary.Uvarint(payload)
	if m <= 0 {
		return e, 0, errFrame
	}
	return Entry{Seq: seq, Data: payload[m:]}, 8 + int(size), nil
}
