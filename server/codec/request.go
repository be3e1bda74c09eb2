// Package codec is how the server decodes requests: grpc-go's protobuf
// codec, with Recommend's per-pod parts decoded by hand into memory kept
// across calls (Codec), and a request codec (Request) that turns a request
// that does not decode into InvalidArgument — answered by
// RejectUndecodable early in the interceptor chain — instead of grpc-go's
// Internal.
package codec

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

// Request is the server's protobuf codec: Codec, except for two
// things.
//
// Requests that do not decode (invalid wire format, invalid UTF-8 in a
// string, nesting too deep): grpc-go answers those Internal, which tells
// the caller and every alert that the server is at fault; the caller is.
// Request lets the call go on with the message as far as it decoded
// and notes the error, and RejectUndecodable — early in the interceptor
// chain — answers InvalidArgument before any handler sees the message.
//
// Recommend's per-pod parts are decoded into memory kept across calls
// (decodeMemory), noted with the request; RejectUndecodable gives it back
// when the call is over.
type Request struct{ fastCodec }

// NewRequest wraps the server's codec (Codec: grpc-go's protobuf
// codec, with Recommend's per-pod parts decoded by hand).
func NewRequest() Request {
	return Request{Codec().(fastCodec)}
}

// DecodeOptions are the gRPC server options that decode requests as the
// server does: its codec, with Recommend's per-pod parts decoded by hand
// into memory kept across calls, and the interceptor that gives the memory
// back when a call is over (and answers an undecodable request). A server
// built with them pays what this one pays to decode: setpoint-bench's
// no-op baseline is.
func DecodeOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(NewRequest()), grpc.ChainUnaryInterceptor(RejectUndecodable)}
}

// notes maps a request message (by pointer) to what Request noted
// about it for RejectUndecodable: the decoder's error when it did not
// decode, or the *decodeMemory it was decoded into. Each entry lives for
// the length of one call's decoding and interception.
var notes sync.Map

// Unmarshal decodes data into v, noting instead of returning a decoding
// error.
func (c Request) Unmarshal(data mem.BufferSlice, v any) error {
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

// RejectUndecodable answers InvalidArgument for a request Request
// could not decode, and gives back the memory a request was decoded into
// when its call is over: the handler and the interceptors after this one
// have returned, and none keeps the request (decodeMemory). It must run
// for every call (no interceptor before it may end a call without calling
// on), or notes would stay behind.
func RejectUndecodable(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	note, _ := notes.LoadAndDelete(req)
	switch n := note.(type) {
	case error:
		return nil, undecodableStatus(n)
	case *decodeMemory:
		defer n.release()
	}
	return handler(ctx, req)
}

// RejectUndecodableStream is RejectUndecodable for the messages a stream
// receives.
func RejectUndecodableStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
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
