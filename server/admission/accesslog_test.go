package admission

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// TestAccessLog: every finished call is logged once, with the fields and
// the level by code of go-grpc-middleware's logging interceptor, and not
// at all below the logger's level.
func TestAccessLog(t *testing.T) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4242}})
	deadline, cancel := context.WithDeadline(ctx, time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	defer cancel()
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		err       error
		minLevel  slog.Level
		stream    *grpc.StreamServerInfo
		addSource bool
		want      []string
		wantEmpty bool
	}{
		{name: "ok", ctx: ctx, want: []string{"level=INFO", `msg="finished call"`, "protocol=grpc", "grpc.component=server",
			"grpc.service=setpoint.v1.AutoscalerService", "grpc.method=Recommend", "grpc.method_type=unary",
			"peer.address=10.0.0.7:4242", "grpc.start_time=", "grpc.code=OK", "grpc.time_ms="}},
		{name: "deadline", ctx: deadline, want: []string{"grpc.request.deadline=2030-01-02T03:04:05Z"}},
		{name: "invalid argument is info", ctx: ctx, err: status.Error(codes.InvalidArgument, "bad"),
			want: []string{"level=INFO", "grpc.code=InvalidArgument", `grpc.error="rpc error: code = InvalidArgument desc = bad"`}},
		{name: "resource exhausted is warn", ctx: ctx, err: status.Error(codes.ResourceExhausted, "busy"), want: []string{"level=WARN", "grpc.code=ResourceExhausted"}},
		{name: "internal is error", ctx: ctx, err: status.Error(codes.Internal, "x"), want: []string{"level=ERROR", "grpc.code=Internal"}},
		{name: "below the level", ctx: ctx, minLevel: slog.LevelWarn, wantEmpty: true},
		{name: "source", ctx: ctx, addSource: true, want: []string{"source=", "server/admission/accesslog.go:", `msg="finished call"`}},
		{name: "server stream ended by EOF", ctx: ctx, err: io.EOF, stream: &grpc.StreamServerInfo{FullMethod: "/setpoint.v1.AutoscalerService/Watch", IsServerStream: true},
			want: []string{"grpc.method=Watch", "grpc.method_type=server_stream", "grpc.code=OK"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			a := accessLog{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.minLevel, AddSource: tc.addSource}))}
			if tc.stream != nil {
				_ = a.stream(nil, ctxStream{ctx: tc.ctx}, tc.stream, func(any, grpc.ServerStream) error { return tc.err })
			} else {
				_, _ = a.unary(tc.ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/setpoint.v1.AutoscalerService/Recommend"},
					func(context.Context, any) (any, error) { return nil, tc.err })
			}
			line := buf.String()
			if tc.wantEmpty {
				if line != "" {
					t.Fatalf("logged %q", line)
				}
				return
			}
			if strings.Count(line, "\n") != 1 {
				t.Fatalf("want one line, got %q", line)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q lacks %q", line, w)
				}
			}
		})
	}
}

// ctxStream is a grpc.ServerStream with a context and nothing else.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }
