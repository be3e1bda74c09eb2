package store

// Schema version 2 stores a record value either as its protobuf message or,
// when that is smaller, as the byte compressedValue followed by the message
// compressed with DEFLATE (RFC 1951). A protobuf message never starts with
// 0x00 (field number 0 does not exist), so the first byte tells the two
// apart. Records are mostly text — condition messages, metric names and
// explanations — and compress to about half, which lets several records
// share a 4 KiB bbolt page where one alone would fill it.

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"sync"
)

const (
	// compressedValue is the first byte of a compressed record value.
	compressedValue = 0x00
	// minCompress is the size below which a value is stored as it is.
	minCompress = 256
	// maxRecordValue bounds a decompressed value, so that a corrupt one
	// cannot exhaust memory.
	maxRecordValue = 64 << 20
)

// errValueTooLarge reports a compressed value that inflates beyond
// maxRecordValue.
var errValueTooLarge = errors.New("decompressed value too large")

var (
	flateWriters = sync.Pool{New: func() any {
		w, _ := flate.NewWriter(nil, flate.BestSpeed) // never fails for a valid level
		return w
	}}
	flateReaders = sync.Pool{New: func() any { return flate.NewReader(nil) }}
)

// compressValue returns the stored form of the marshalled message b: b
// itself, or compressedValue and b deflated when that is smaller.
func compressValue(b []byte) []byte {
	if len(b) < minCompress {
		return b
	}
	var buf bytes.Buffer
	buf.Grow(len(b)/2 + 64)
	buf.WriteByte(compressedValue)
	w := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(b); err != nil { // writes to a bytes.Buffer do not fail
		return b
	}
	if err := w.Close(); err != nil || buf.Len() >= len(b) {
		return b
	}
	return buf.Bytes()
}

// decompressValue returns the marshalled message of the stored value v.
func decompressValue(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != compressedValue {
		return v, nil
	}
	r := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(v[1:]), nil); err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	var out bytes.Buffer
	out.Grow(3 * len(v))
	n, err := io.Copy(&out, io.LimitReader(r, maxRecordValue+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if n > maxRecordValue {
		return nil, errValueTooLarge
	}
	return out.Bytes(), nil
}
