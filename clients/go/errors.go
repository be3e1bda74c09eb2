package setpointclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors a call's error can be matched against with errors.Is. The error
// itself says, in the caller's terms, which address or target and what to
// do next; it still carries the gRPC status, so status.Code and
// FieldViolations read it as before.
var (
	// ErrUnreachable: no server answers at the dialed address (connection
	// refused, unknown host, network unreachable).
	ErrUnreachable = errors.New("setpointclient: no server answers at the address")
	// ErrTLSMismatch: the client and the server disagree on TLS (plaintext
	// to a TLS server, or TLS to a plaintext one).
	ErrTLSMismatch = errors.New("setpointclient: the client and the server disagree on TLS")
	// ErrTargetNotFound: the service keeps no record of the target named
	// in the request.
	ErrTargetNotFound = errors.New("setpointclient: target not found")
	// ErrFleetNotFound: the service keeps no fleet of the key named in the
	// request.
	ErrFleetNotFound = errors.New("setpointclient: fleet not found")
	// ErrBadKey: a string is not a key: a target's CLUSTER/NAMESPACE/NAME
	// (ParseKey) or a fleet's NAMESPACE/NAME (ParseFleetKey).
	ErrBadKey = errors.New("setpointclient: not a key")
)

// callError is a failed call's error in the caller's terms; it wraps the
// call's gRPC status error and one of the sentinels above.
type callError struct {
	msg       string
	err, kind error
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() []error {
	if e.err == nil {
		return []error{e.kind}
	}
	return []error{e.err, e.kind}
}

// userTerms rewrites the error of a call to addr with req (which may name
// a target) when the gRPC status alone would read like internals.
func userTerms(addr string, req any, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		switch {
		case strings.Contains(msg, "first record does not look like a TLS handshake"):
			return &callError{fmt.Sprintf("the server at %s speaks plaintext, not TLS (a development server started with -insecure-dev?)", addr), err, ErrTLSMismatch}
		case strings.Contains(msg, "connection closed before server preface received"), strings.Contains(msg, "server preface"):
			return &callError{fmt.Sprintf("the server at %s closed the connection before answering: it probably expects TLS", addr), err, ErrTLSMismatch}
		}
		if cause := dialFailure(msg); cause != "" {
			return &callError{fmt.Sprintf("no Setpoint server answers at %s (%s): is it running (setpoint-server), and is the address right?", addr, cause), err, ErrUnreachable}
		}
	case codes.NotFound:
		if k := targetOf(req); k != nil {
			return &callError{fmt.Sprintf("target %s not found: the service keeps no record of it (it was never decided, or was deleted)", KeyString(k)), err, ErrTargetNotFound}
		}
		if k := fleetOf(req); k != nil {
			return &callError{fmt.Sprintf("fleet %s not found: the service keeps no such fleet (it was never put, or was deleted)", FleetKeyString(k)), err, ErrFleetNotFound}
		}
	}
	return err
}

// dialFailure is why a connection could not be made, in a few words, or
// "" when msg is not a dial failure.
func dialFailure(msg string) string {
	for _, cause := range []string{"connection refused", "no such host", "network is unreachable", "no route to host", "i/o timeout", "connection reset by peer"} {
		if strings.Contains(msg, cause) {
			return cause
		}
	}
	if strings.Contains(msg, "Error while dialing") {
		return "cannot connect"
	}
	return ""
}

// targetOf is the target a request names: its target, or the target a
// simulation is seeded from.
func targetOf(req any) *setpointv1.TargetKey {
	if r, ok := req.(interface{ GetTarget() *setpointv1.TargetKey }); ok && r.GetTarget() != nil {
		return r.GetTarget()
	}
	if r, ok := req.(interface{ GetSeedFrom() *setpointv1.TargetKey }); ok && r.GetSeedFrom() != nil {
		return r.GetSeedFrom()
	}
	return nil
}

// fleetOf is the fleet a request names: its fleet, or the fleet a
// simulation is seeded from.
func fleetOf(req any) *setpointv1.FleetKey {
	if r, ok := req.(interface{ GetFleet() *setpointv1.FleetKey }); ok && r.GetFleet() != nil {
		return r.GetFleet()
	}
	if r, ok := req.(interface{ GetSeedFrom() *setpointv1.FleetKey }); ok && r.GetSeedFrom() != nil {
		return r.GetSeedFrom()
	}
	return nil
}

// userTermsInterceptors rewrite the errors of calls to addr (unary calls,
// and the opening of streams) with userTerms.
func userTermsInterceptors(addr string) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return userTerms(addr, req, invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, userTerms(addr, nil, err)
			}
			return &userTermsStream{ClientStream: s, addr: addr}, nil
		}),
	}
}

// userTermsStream rewrites the errors a stream's messages end with.
type userTermsStream struct {
	grpc.ClientStream
	addr string
}

func (s *userTermsStream) RecvMsg(m any) error {
	return userTerms(s.addr, nil, s.ClientStream.RecvMsg(m))
}
