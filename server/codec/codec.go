// Package codec is how the server puts messages on the wire and reads
// them back: with the code generated for each message
// (planetscale/vtprotobuf's SizeVT, MarshalVT, UnmarshalVT), or
// protobuf-go for a message without it (health, reflection). A request
// that does not decode is answered InvalidArgument, naming the string
// field that is not UTF-8 when that is why, instead of grpc-go's
// Internal: the caller is at fault, not the server.
//
// The codec decodes what proto.Unmarshal decodes, into the same message,
// and refuses what it refuses (FuzzDecodeRecommend). The generated
// decoder alone does not: it takes strings that are not UTF-8 and skips
// malformed unknown fields. So the bytes are checked first for what it
// does not check (check), and a message it refuses that proto.Unmarshal
// takes (a known field of another wire type, kept as unknown) is decoded
// by proto.Unmarshal. One difference remains: the generated decoder of a
// google.protobuf.Timestamp or Duration drops the unknown fields inside
// it, which proto.Unmarshal would keep.
//
// A server uses the codec with DecodeOptions (the codec and the
// interceptors RejectUndecodable and RejectUndecodableStream, early in its
// chains) and registers its services through Registrar.
//
// Registrar's handlers decode a request of a message type generated with
// vtprotobuf's pool feature (a Recommend: buf.gen.yaml lists them) into
// one an earlier call of the method handed back, and clear it when the
// call has ended: a method keeps no part of such a request after it
// returns, and copies what it keeps (its strings are its own, not the
// request buffer's).
package codec

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// Name is the codec's name: it replaces grpc-go's protobuf codec.
const Name = "proto"

// generated is what vtprotobuf generates for every Setpoint message.
type generated interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
	UnmarshalVT([]byte) error
}

// Codec returns the protobuf codec that encodes and decodes with the
// generated code. Its Unmarshal returns a *DecodeError for bytes that do
// not decode.
func Codec() encoding.CodecV2 { return codecV2{} }

// codecV2 is Codec.
type codecV2 struct{}

// Name implements encoding.CodecV2.
func (codecV2) Name() string { return Name }

// Marshal encodes v, into a pooled buffer when it is large enough to be
// worth one (as grpc-go's codec does).
func (codecV2) Marshal(v any) (mem.BufferSlice, error) {
	g, ok := v.(generated)
	if !ok {
		return encoding.GetCodecV2(Name).Marshal(v)
	}
	size := g.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := g.MarshalToSizedBufferVT(buf); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := g.MarshalToSizedBufferVT((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes data into v. When v is a request on its way to a
// handler registered through Registrar (a *decoding), the error is kept
// in it instead of returned, for RejectUndecodable.
func (codecV2) Unmarshal(data mem.BufferSlice, v any) error {
	d, ok := v.(*decoding)
	if !ok {
		return unmarshal(data, v, nil)
	}
	d.err = unmarshal(data, d.msg, d.rm)
	return nil
}

// unmarshal decodes data into v; rm is as for decodeKept.
func unmarshal(data mem.BufferSlice, v any, rm *setpointv1.ResourceMetrics) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	if g, ok := v.(generated); ok {
		return decodeKept(b, g, rm)
	}
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("codec: cannot decode into %T, not a protobuf message", v)
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return &DecodeError{}
	}
	return nil
}

// messageOf is v as a protobuf-go message, or nil.
func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	case protoadapt.MessageV2:
		return v
	}
	return nil
}
