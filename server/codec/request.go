package codec

import (
	"context"
	"errors"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// decoding carries a request to the codec and the codec's error back to
// the call: the handlers Registrar registers and the streams
// RejectUndecodableStream receives from decode into one. grpc-go turns an
// error its codec returns into Internal before any interceptor runs; one
// kept in a decoding reaches RejectUndecodable, which answers
// InvalidArgument.
type decoding struct {
	msg any
	err error
	// rm is a kept ResourceMetrics for a Recommend's (decodeKept); nil:
	// none.
	rm *setpointv1.ResourceMetrics
}

// undecodable is the request the interceptor chain sees for one that did
// not decode; RejectUndecodable ends the call there.
type undecodable struct{ err error }

// ServiceRegistrar is what a gRPC server that reflection can describe
// offers to register services with (reflection.GRPCServer).
type ServiceRegistrar interface {
	grpc.ServiceRegistrar
	GetServiceInfo() map[string]grpc.ServiceInfo
}

// Registrar returns r, registering each service's unary methods so that
// the codec keeps a request's decoding error with the call instead of
// returning it to grpc-go: a request that does not decode goes through
// r's interceptor chain as a value RejectUndecodable answers
// InvalidArgument. The server's codec must be Codec.
func Registrar(r ServiceRegistrar) ServiceRegistrar { return registrar{r} }

// registrar is Registrar.
type registrar struct{ ServiceRegistrar }

// RegisterService implements grpc.ServiceRegistrar.
func (r registrar) RegisterService(sd *grpc.ServiceDesc, impl any) {
	wrapped := *sd
	wrapped.Methods = slices.Clone(sd.Methods)
	for i, md := range wrapped.Methods {
		wrapped.Methods[i].Handler = decodeChecked("/"+sd.ServiceName+"/"+md.MethodName, md.Handler)
	}
	r.ServiceRegistrar.RegisterService(&wrapped, impl)
}

// errUndecodable stops a generated handler whose request did not decode.
var errUndecodable = errors.New("codec: the request does not decode")

// decodeChecked is the method handler h of the method fullMethod, its
// request decoded through a decoding. A request of a type vtprotobuf
// pools (reusable) is decoded into one kept from an earlier call of the
// method, handed to the interceptor chain and the method in place of the
// one h made, and kept again when h has returned: the call has ended then,
// and its response is what the method built, not the request. What a call
// needs besides (its decoding, the functions h calls back) is kept with
// the request, so that a call allocates none of it.
func decodeChecked(fullMethod string, h grpc.MethodHandler) grpc.MethodHandler {
	var kept sync.Pool // *keptRequest: cleared requests of this method, each with its call state
	return func(srv any, ctx context.Context, dec func(any) error, chain grpc.UnaryServerInterceptor) (any, error) {
		k, _ := kept.Get().(*keptRequest)
		if k == nil {
			k = newKeptRequest()
		}
		k.dec, k.chain = dec, chain
		resp, err := h(srv, ctx, k.decodeFunc, k.interceptFunc)
		failed := k.failed
		req := k.call.msg
		k.dec, k.chain, k.failed, k.call = nil, nil, nil, decoding{}
		if r, ok := req.(reusable); ok {
			k.req = r
			k.reset()
		}
		kept.Put(k)
		if failed == nil {
			return resp, err
		}
		st := undecodableStatus(failed)
		if chain == nil {
			return nil, st
		}
		return chain(ctx, undecodable{failed}, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod},
			func(context.Context, any) (any, error) { return nil, st })
	}
}

// reusable is a request whose memory is kept across calls: a message
// vtprotobuf generates the pool feature for (buf.gen.yaml lists them).
// ResetVT clears it and keeps its lists and their messages, which the
// next decoding fills again. The methods that receive one convert what
// they keep and keep no part of the message after the call
// (TestRegistrarHandsBackRequest; server's TestReleasedRequestNotStored).
type reusable interface{ ResetVT() }

// keptRequest is a request kept across calls, and the maps of its
// messages while it is cleared; during a call, also what decodeChecked's
// handler needs of the call.
type keptRequest struct {
	req  reusable
	maps []map[string]string
	// rm is a Recommend's resource metrics, cleared, its containers'
	// usage maps kept: the next request that has resource metrics is
	// decoded into it (decodeKept). ResetVT would hand it to vtprotobuf's
	// pool, whose messages come without maps.
	rm *setpointv1.ResourceMetrics

	// During a call: the request's decoder and the interceptor chain
	// grpc-go gave, the decoding (its msg is the call's request), and the
	// error of a request that did not decode.
	dec    func(any) error
	chain  grpc.UnaryServerInterceptor
	call   decoding
	failed error
	// decodeFunc and interceptFunc are k.decode and k.intercept, made
	// once: a method value made for each call would be allocated.
	decodeFunc    func(any) error
	interceptFunc grpc.UnaryServerInterceptor
}

// newKeptRequest returns a keptRequest with no request yet.
func newKeptRequest() *keptRequest {
	k := &keptRequest{}
	k.decodeFunc, k.interceptFunc = k.decode, k.intercept
	return k
}

// decode decodes the call's request: into the kept one when there is one
// and the method's (made) is reusable, into made otherwise.
func (k *keptRequest) decode(made any) error {
	req := made
	if _, ok := made.(reusable); ok && k.req != nil {
		req = k.req
	}
	k.call = decoding{msg: req}
	if req == k.req {
		k.call.rm = k.rm
	}
	if err := k.dec(&k.call); err != nil {
		return err
	}
	if k.call.err != nil {
		k.failed = k.call.err
		return errUndecodable
	}
	return nil
}

// intercept runs the call's interceptor chain on the request decode
// decoded, in place of the one the generated handler passes.
func (k *keptRequest) intercept(ctx context.Context, _ any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if k.chain == nil {
		return handler(ctx, k.call.msg)
	}
	return k.chain(ctx, k.call.msg, info, handler)
}

// reset clears k.req with ResetVT, and gives a Recommend's pods and their
// containers their maps back, cleared: ResetVT lets go of a message's
// maps, which the generated decoder would then make again, and an empty
// map is what an absent one decodes to (a map field has no presence; the
// methods read them with len and range). A Recommend's resource metrics
// are taken out of it first and kept as k.rm, cleared the same way with
// their containers' usage maps.
func (k *keptRequest) reset() {
	r, ok := k.req.(*setpointv1.RecommendRequest)
	if !ok {
		k.req.ResetVT()
		return
	}
	if r.ResourceMetrics != nil {
		k.rm, r.ResourceMetrics = r.ResourceMetrics, nil
	}
	k.maps = k.maps[:0]
	keep := func(m *map[string]string) {
		clear(*m)
		k.maps = append(k.maps, *m)
	}
	podMaps(r, keep)
	usageMaps(k.rm, keep)
	r.ResetVT()
	k.rm.ResetVT()
	i := 0
	giveBack := func(m *map[string]string) {
		*m = k.maps[i]
		i++
	}
	podMaps(r, giveBack)
	usageMaps(k.rm, giveBack)
}

// usageMaps calls f with the usage map of each container of rm's pods, in
// every message their lists hold up to their capacity, as podMaps does.
func usageMaps(rm *setpointv1.ResourceMetrics, f func(*map[string]string)) {
	if rm == nil {
		return
	}
	for _, p := range rm.Items[:cap(rm.Items)] {
		if p == nil {
			continue
		}
		for _, c := range p.Containers[:cap(p.Containers)] {
			if c != nil {
				f(&c.Usage)
			}
		}
	}
}

// podMaps calls f with each map field of r's pods and their containers,
// in one order, in every message their lists hold up to their capacity
// (ResetVT keeps the lists and their messages).
func podMaps(r *setpointv1.RecommendRequest, f func(*map[string]string)) {
	for _, p := range r.Pods[:cap(r.Pods)] {
		if p == nil {
			continue
		}
		f(&p.Requests)
		f(&p.Overhead)
		for _, c := range p.Containers[:cap(p.Containers)] {
			if c != nil {
				f(&c.Requests)
			}
		}
	}
}

// undecodableStatus is the InvalidArgument error of a request that did not
// decode with err.
func undecodableStatus(err error) error {
	return status.Error(codes.InvalidArgument, "invalid request: the message does not decode: "+err.Error())
}

// RejectUndecodable answers InvalidArgument for a request that did not
// decode (Registrar), before any interceptor after it or the handler sees
// it. It belongs early in the chain: the interceptors before it see such a
// request as a value of a type of this package.
func RejectUndecodable(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if u, ok := req.(undecodable); ok {
		return nil, undecodableStatus(u.err)
	}
	return handler(ctx, req)
}

// RejectUndecodableStream is RejectUndecodable for the messages a stream
// receives: RecvMsg fails InvalidArgument for one that does not decode.
// The server's codec must be Codec.
func RejectUndecodableStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, decodeCheckedStream{ss})
}

// decodeCheckedStream receives messages through a decoding.
type decodeCheckedStream struct{ grpc.ServerStream }

func (s decodeCheckedStream) RecvMsg(m any) error {
	d := decoding{msg: m}
	if err := s.ServerStream.RecvMsg(&d); err != nil {
		return err
	}
	if d.err != nil {
		return undecodableStatus(d.err)
	}
	return nil
}

// DecodeOptions are the gRPC server options that decode requests as the
// server does: Codec, and the interceptors that answer a request that did
// not decode. The server's services must be registered through
// Registrar. setpoint-bench's no-op baseline is served so, to pay what
// the server pays to decode.
func DecodeOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(Codec()),
		grpc.ChainUnaryInterceptor(RejectUndecodable), grpc.ChainStreamInterceptor(RejectUndecodableStream)}
}
