package store

// Schema version 3 stores a record value either as its protobuf message or,
// when that is smaller, as the byte s2Value followed by the message
// compressed with S2 (github.com/klauspost/compress/s2, a Snappy
// extension) against the dictionary values.dict. Schema version 2 wrote
// the byte deflateValue followed by the message compressed with DEFLATE
// (RFC 1951); those values are still read, and rewritten with S2 by the
// record's next write. No protobuf message starts with a byte below 0x08
// (field number 0 does not exist), so the first byte tells the three
// apart.
//
// Records are mostly text the engine writes again and again — condition
// messages, reasons, metric names, explanations — so a dictionary trained
// on records (cmd/setpoint-bench -write-dict, make dict) halves what
// DEFLATE leaves, and S2 spends a fraction of DEFLATE's CPU doing it. The
// dictionary is part of the format: changing values.dict needs a new
// first byte (and schema version) for values written with the new one.

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
	// s2Value is the first byte of a value compressed with S2 and
	// values.dict (schema version 3).
	s2Value = 0x01
	// minCompress is the size below which a value is stored as it is.
	minCompress = 256
	// maxRecordValue bounds a decompressed value, so that a corrupt one
	// cannot exhaust memory.
	maxRecordValue = 64 << 20
)

// errValueTooLarge reports a compressed value that inflates beyond
// maxRecordValue.
var errValueTooLarge = errors.New("decompressed value too large")

// valuesDict is the serialized S2 dictionary of record values.
//
//go:embed values.dict
var valuesDict []byte

// valueDict is valuesDict, parsed once.
var valueDict = sync.OnceValue(func() *s2.Dict {
	d := s2.NewDict(valuesDict)
	if d == nil {
		panic("store: values.dict is not an S2 dictionary") // a build error, caught by every test
	}
	return d
})

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

// compressValue returns the stored form of the marshalled message b: b
// itself, or s2Value and b compressed when that is smaller.
func compressValue(b []byte) []byte {
	if len(b) < minCompress {
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

// decompressValue returns the marshalled message of the stored value v.
func decompressValue(v []byte) ([]byte, error) {
	return decompressValueInto(nil, v)
}

// decompressValueInto is decompressValue, decompressing an S2 value into
// buf when it has room.
func decompressValueInto(buf, v []byte) ([]byte, error) {
	if len(v) == 0 {
		return v, nil
	}
	switch v[0] {
	case s2Value:
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
		out, err := valueDict().Decode(buf[:n], v[1:])
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

// compressors run compressValue for Bolt.Update on goroutines of their
// own. S2's dictionary encoder keeps a 64 KiB hash table on its stack:
// called on an Update's goroutine — deep in gRPC's and the server's
// frames, and shrunk again by each garbage collection — every call grew
// that stack and copied all those frames (3–4% of the process's CPU at 64
// calls in flight). A compressor's stack is shallow, so growing it again
// after a collection copies next to nothing.
type compressors struct {
	jobs chan *compressJob // unbuffered: a job sent is a job taken
	done chan struct{}
	wg   sync.WaitGroup
}

// compressJob is one value to compress and, once ready, its result.
type compressJob struct {
	in, out []byte
	ready   chan struct{}
}

var compressJobs = sync.Pool{New: func() any { return &compressJob{ready: make(chan struct{}, 1)} }}

// startCompressors starts n compressors; stop ends them.
func startCompressors(n int) *compressors {
	c := &compressors{jobs: make(chan *compressJob), done: make(chan struct{})}
	for range n {
		c.wg.Go(func() {
			for {
				select {
				case j := <-c.jobs:
					j.out = compressValue(j.in)
					j.ready <- struct{}{}
				case <-c.done:
					return
				}
			}
		})
	}
	return c
}

// compress returns compressValue(b), computed by a compressor, or in the
// caller's goroutine once the compressors are stopped.
func (c *compressors) compress(b []byte) []byte {
	if len(b) < minCompress {
		return b
	}
	j := compressJobs.Get().(*compressJob)
	j.in = b
	select {
	case c.jobs <- j:
		<-j.ready
	case <-c.done:
		j.out = compressValue(b)
	}
	out := j.out
	j.in, j.out = nil, nil
	compressJobs.Put(j)
	return out
}

// stop ends the compressors; later calls of compress compress in place.
func (c *compressors) stop() {
	close(c.done)
	c.wg.Wait()
}
