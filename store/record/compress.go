package record

// A record value is stored either as its protobuf message or, when that is
// smaller, as the byte s2Value followed by the message compressed with S2
// (github.com/klauspost/compress/s2, a Snappy extension) against the
// dictionary values2.dict (schema version 6). Earlier versions wrote the
// byte s2Value1 and S2 against values.dict (versions 3 to 5), or the byte
// deflateValue and DEFLATE (RFC 1951; version 2); those values are still
// read, and rewritten by the record's next write. No protobuf message
// starts with a byte below 0x08 (field number 0 does not exist), so the
// first byte tells them apart.
//
// Records are mostly text the engine writes again and again — condition
// messages, reasons, metric names, explanations — so a dictionary trained
// on records (cmd/setpoint-bench -write-dict, make dict) halves what
// DEFLATE leaves, and S2 spends a fraction of DEFLATE's CPU doing it.
// values.dict was trained on the bytes of the hand-written encoder of
// schema versions 3 and 4; the generated encoder lays a record out
// differently, and values2.dict, trained on its bytes, leaves about 10%
// fewer (docs/benchmarks.md, "A dictionary trained on the generated
// encoding"). A dictionary is part of the format: a new one needs a new
// first byte (and schema version), and TestDictionariesArePinned fails
// when an embedded one changes.

import (
	"bytes"
	"compress/flate"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
)

const (
	// deflateValue is the first byte of a value compressed with DEFLATE
	// (schema version 2).
	deflateValue = 0x00
	// s2Value1 is the first byte of a value compressed with S2 and
	// values.dict (schema versions 3 to 5).
	s2Value1 = 0x01
	// s2Value is the first byte of a value compressed with S2 and
	// values2.dict (schema version 6), the one Compress writes.
	s2Value = 0x02
	// MinCompress is the size below which a value is stored as it is:
	// Compress returns a shorter b itself.
	MinCompress = 256
	// maxRecordValue bounds a decompressed value, so that a corrupt one
	// cannot exhaust memory.
	maxRecordValue = 64 << 20
)

// errValueTooLarge reports a compressed value that inflates beyond
// maxRecordValue.
var errValueTooLarge = errors.New("decompressed value too large")

// The serialized S2 dictionaries of record values: of s2Value1 and of
// s2Value.
var (
	//go:embed values.dict
	valuesDict1 []byte
	//go:embed values2.dict
	valuesDict []byte
)

// The dictionaries, parsed once.
var (
	valueDict1 = sync.OnceValue(func() *s2.Dict { return parseDict(valuesDict1) })
	valueDict  = sync.OnceValue(func() *s2.Dict { return parseDict(valuesDict) })
)

// parseDict parses an embedded dictionary.
func parseDict(b []byte) *s2.Dict {
	d := s2.NewDict(b)
	if d == nil {
		panic("record: an embedded dictionary is not an S2 dictionary") // a build error, caught by every test
	}
	return d
}

// compressed reports whether the stored value v is compressed with S2,
// so that decompressInto's result is a buffer of its own.
func compressed(v []byte) bool { return len(v) > 0 && (v[0] == s2Value || v[0] == s2Value1) }

// scratchBuffers hold a record's bytes while they are marshalled or
// unmarshalled: the marshalled bytes are compressed (or copied) before a
// buffer is put back, and unmarshalling copies what it keeps.
var scratchBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxScratch is the largest buffer kept in scratchBuffers.
const maxScratch = 64 << 10

// getScratch returns an empty buffer of scratchBuffers.
func getScratch() *[]byte { return scratchBuffers.Get().(*[]byte) }

// putScratch puts b, whose bytes are no longer used, back as buf.
func putScratch(buf *[]byte, b []byte) {
	if cap(b) <= maxScratch {
		*buf = b[:0]
		scratchBuffers.Put(buf)
	}
}

var flateReaders = sync.Pool{New: func() any { return flate.NewReader(nil) }}

// Compress returns the stored form of the marshalled message b: b itself,
// or a first byte saying S2 and b compressed when that is smaller. The
// result may be b itself.
func Compress(b []byte) []byte {
	if len(b) < MinCompress {
		return b
	}
	d := valueDict()
	// Compressed into a pooled buffer with room for the worst case, then
	// copied out at its size, which is about half of that room.
	buf := getScratch()
	out := *buf
	if n := 1 + s2.MaxEncodedLen(len(b)); cap(out) < n {
		out = make([]byte, n)
	} else {
		out = out[:n]
	}
	enc := d.Encode(out[1:], b)
	if 1+len(enc) >= len(b) {
		putScratch(buf, out)
		return b
	}
	val := make([]byte, 1+len(enc))
	val[0] = s2Value
	copy(val[1:], enc)
	putScratch(buf, out)
	return val
}

// decompressInto returns the marshalled message of the stored value v,
// decompressing an S2 value into buf when it has room.
func decompressInto(buf, v []byte) ([]byte, error) {
	if len(v) == 0 {
		return v, nil
	}
	switch v[0] {
	case s2Value, s2Value1:
		n, err := s2.DecodedLen(v[1:])
		if err != nil {
			return nil, fmt.Errorf("decompress: %w", err)
		}
		if n > maxRecordValue {
			return nil, errValueTooLarge
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		d := valueDict()
		if v[0] == s2Value1 {
			d = valueDict1()
		}
		out, err := d.Decode(buf[:n], v[1:])
		if err != nil {
			return nil, fmt.Errorf("decompress: %w", err)
		}
		return out, nil
	case deflateValue:
		return inflate(v[1:])
	}
	return v, nil
}

// inflate decompresses a DEFLATE stream (schema version 2 values).
func inflate(v []byte) ([]byte, error) {
	r := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(v), nil); err != nil {
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
