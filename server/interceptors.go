package server

import (
	"context"
	"log/slog"
	"runtime/debug"
	"strings"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// chain returns the server options installing the interceptor chain, in
// order: metrics, logging, authentication and authorization (when tokens
// are configured), validation, the Recommend in-flight bound, recovery.
func chain(metrics *grpcprom.ServerMetrics, log *slog.Logger, tokens *Tokens, inFlight chan struct{}) []grpc.ServerOption {
	logger := slogAdapter(log)
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	recoverOpts := []recovery.Option{recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})}
	unary := []grpc.UnaryServerInterceptor{
		metrics.UnaryServerInterceptor(),
		logging.UnaryServerInterceptor(logger, logOpts...),
		rejectUndecodable, // codec.go: before anything that may end a call
	}
	if tokens != nil {
		unary = append(unary,
			selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(tokens.authenticate), selector.MatchFunc(ownService)),
			selector.UnaryServerInterceptor(authorize, selector.MatchFunc(ownService)),
		)
	}
	unary = append(unary,
		validate(log),
		limitRecommends(inFlight),
		recovery.UnaryServerInterceptor(recoverOpts...),
	)
	stream := []grpc.StreamServerInterceptor{
		metrics.StreamServerInterceptor(),
		logging.StreamServerInterceptor(logger, logOpts...),
		rejectUndecodableStream, // codec.go: before anything that may end a call
	}
	if tokens != nil {
		// Streams are authenticated; Watch filters by the principal's clusters itself.
		stream = append(stream, selector.StreamServerInterceptor(auth.StreamServerInterceptor(tokens.authenticate), selector.MatchFunc(ownService)))
	}
	stream = append(stream, recovery.StreamServerInterceptor(recoverOpts...))
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...)}
}

// ownService matches the methods of AutoscalerService; health and
// reflection are open to everyone.
func ownService(_ context.Context, c interceptors.CallMeta) bool {
	return strings.HasPrefix(c.FullMethod(), "/"+setpointv1.AutoscalerService_ServiceDesc.ServiceName+"/")
}

// slogAdapter makes a logging.Logger of an slog.Logger.
func slogAdapter(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// validate rejects a request whose Validate method fails, with
// InvalidArgument and a BadRequest detail.
func validate(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if v, ok := req.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return nil, toStatus(ctx, log, err)
			}
		}
		return handler(ctx, req)
	}
}

// limitRecommends bounds the Recommend calls in flight by the capacity of
// slots; a call finding no free slot fails at once with ResourceExhausted.
func limitRecommends(slots chan struct{}) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod != setpointv1.AutoscalerService_Recommend_FullMethodName {
			return handler(ctx, req)
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			return handler(ctx, req)
		default:
			return nil, status.Error(codes.ResourceExhausted, errOverloaded.Error())
		}
	}
}
