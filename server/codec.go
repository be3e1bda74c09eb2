package server

import (
	"context"
	"strings"
	"sync"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// requestCodec is the server's protobuf codec: Codec, except for two
// things.
//
// Requests that do not decode (invalid wire format, invalid UTF-8 in a
// string, nesting too deep): grpc-go answers those Internal, which tells
// the caller and every alert that the server is at fault; the caller is.
// requestCodec lets the call go on with the message as far as it decoded
// and notes the error, and rejectUndecodable — early in the interceptor
// chain — answers InvalidArgument before any handler sees the message.
//
// Recommend's per-pod parts are decoded into memory kept across calls
// (decodeMemory), noted with the request; rejectUndecodable gives it back
// when the call is over.
type requestCodec struct{ fastCodec }

// newRequestCodec wraps the server's codec (Codec: grpc-go's protobuf
// codec, with Recommend's per-pod parts decoded by hand).
func newRequestCodec() requestCodec {
	return requestCodec{Codec().(fastCodec)}
}

// DecodeOptions are the gRPC server options that decode requests as the
// server does: its codec, with Recommend's per-pod parts decoded by hand
// into memory kept across calls, and the interceptor that gives the memory
// back when a call is over (and answers an undecodable request). A server
// built with them pays what this one pays to decode: setpoint-bench's
// no-op baseline is.
func DecodeOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(newRequestCodec()), grpc.ChainUnaryInterceptor(rejectUndecodable)}
}

// notes maps a request message (by pointer) to what requestCodec noted
// about it for rejectUndecodable: the decoder's error when it did not
// decode, or the *decodeMemory it was decoded into. Each entry lives for
// the length of one call's decoding and interception.
var notes sync.Map

// Unmarshal decodes data into v, noting instead of returning a decoding
// error.
func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*setpointv1.RecommendRequest); ok {
		m := decodeMemories.Get().(*decodeMemory)
		if c.recommend(data, r, m) {
			notes.Store(v, m)
			return nil
		}
		m.release() // r was reset: nothing refers to m's memory
	}
	if err := c.CodecV2.Unmarshal(data, v); err != nil {
		notes.Store(v, err)
	}
	return nil
}

// undecodableError returns the InvalidArgument error for req if it did not
// decode, forgetting the note. Memory req was decoded into is left to the
// garbage collector.
func undecodableError(req any) error {
	note, _ := notes.LoadAndDelete(req)
	err, ok := note.(error)
	if !ok {
		return nil
	}
	return undecodableStatus(err)
}

// undecodableStatus is the InvalidArgument error of a request that did not
// decode with err.
func undecodableStatus(err error) error {
	return status.Error(codes.InvalidArgument, "invalid request: the message does not decode: "+undecodableReason(err))
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
// could not decode, and gives back the memory a request was decoded into
// when its call is over: the handler and the interceptors after this one
// have returned, and none keeps the request (decodeMemory). It must run
// for every call (no interceptor before it may end a call without calling
// on), or notes would stay behind.
func rejectUndecodable(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	note, _ := notes.LoadAndDelete(req)
	switch n := note.(type) {
	case error:
		return nil, undecodableStatus(n)
	case *decodeMemory:
		defer n.release()
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
