package server

// The Session service: who the caller is. The console asks it (through the
// same door and admission as every call) to show its caller's principal;
// any client may ask it. It is written by hand, without a .proto: its
// request is google.protobuf.Empty and its answer a google.protobuf.Struct
// with the fields "principal", "role" and "readable", the clusters a list
// without a cluster shows the caller ([""]: every cluster); without
// authentication only "readable" ([""]).

import (
	"context"

	"github.com/setpointhq/setpoint/server/door"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// SessionWhoFullMethodName is the full name of the Session service's one
// method, Who.
const SessionWhoFullMethodName = door.WhoMethod

// sessionServiceDesc describes the Session service.
var sessionServiceDesc = grpc.ServiceDesc{
	ServiceName: "setpoint.console.v1.Session",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Who", Handler: whoHandler}},
}

// whoHandler decodes Who's request and runs who behind the interceptors.
func whoHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(emptypb.Empty)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return who(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: SessionWhoFullMethodName}, func(ctx context.Context, req any) (any, error) {
		return who(ctx, req.(*emptypb.Empty))
	})
}

// who answers the caller's principal, role and readable clusters.
func who(ctx context.Context, _ *emptypb.Empty) (*structpb.Struct, error) {
	out := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	readable := []string{""}
	if p, ok := PrincipalFrom(ctx); ok {
		out.Fields["principal"] = structpb.NewStringValue(p.Name)
		out.Fields["role"] = structpb.NewStringValue(string(p.Role))
		readable = readableClusters(p)
	}
	l := &structpb.ListValue{}
	for _, c := range readable {
		l.Values = append(l.Values, structpb.NewStringValue(c))
	}
	out.Fields["readable"] = structpb.NewListValue(l)
	return out, nil
}

// readableClusters are the clusters whose targets a list without a
// cluster filter shows p: "" (every cluster) when it may read all, its
// own for a cluster's agent, its clusters for a platform role.
func readableClusters(p Principal) []string {
	if p.CanRead("") {
		return []string{""}
	}
	if own, ok := p.Role.Cluster(); ok {
		return []string{own}
	}
	if p.Role == RolePlatform {
		return p.Clusters
	}
	return nil
}
