package server

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// requestCodec is the server's protobuf codec: Codec, except for
// requests that do not decode (invalid wire format, invalid UTF-8 in a
// string, nesting too deep). grpc-go answers those Internal, which tells
// the caller and every alert that the server is at fault; the caller is.
// requestCodec lets the call go on with the message as far as it decoded
// and notes the error, and rejectUndecodable — early in the interceptor
// chain — answers InvalidArgument before any handler sees the message.
type requestCodec struct{ encoding.CodecV2 }

// newRequestCodec wraps the server's codec (Codec: grpc-go's protobuf
// codec, with Recommend's per-pod parts decoded by hand).
func newRequestCodec() requestCodec {
	return requestCodec{Codec()}
}

// undecodable maps a request message (by pointer) that did not decode to
// the decoder's error, from the codec to rejectUndecodable. Each entry
// lives for the length of one call's decoding and interception.
var undecodable sync.Map

// Unmarshal decodes data into v, noting instead of returning a decoding
// error.
func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err != nil {
		undecodable.Store(v, err)
	}
	return nil
}

// undecodableError returns the InvalidArgument error for req if it did not
// decode, forgetting the note.
func undecodableError(req any) error {
	err, ok := undecodable.LoadAndDelete(req)
	if !ok {
		return nil
	}
	return status.Error(codes.InvalidArgument, "invalid request: the message does not decode: "+undecodableReason(err.(error)))
}

// undecodableReason says, in the project's words, why a request did not
// decode (the decoder's own messages name its package).
func undecodableReason(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "UTF-8"):
		return "a string is not valid UTF-8"
	case strings.Contains(msg, "recursion") || strings.Contains(msg, "depth"):
		return "it nests too deeply"
	default:
		return "it is not valid protobuf wire format"
	}
}

// rejectUndecodable answers InvalidArgument for a request requestCodec
// could not decode. It must run for every call (no interceptor before it
// may end a call without calling on), or notes would stay behind.
func rejectUndecodable(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := undecodableError(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// rejectUndecodableStream is rejectUndecodable for the messages a stream
// receives.
func rejectUndecodableStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, decodeCheckedStream{ss})
}

// decodeCheckedStream fails RecvMsg for a message that did not decode.
type decodeCheckedStream struct{ grpc.ServerStream }

func (s decodeCheckedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return undecodableError(m)
}
