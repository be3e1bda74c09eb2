package admission

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/codec"
	"github.com/setpointhq/setpoint/server/fairness"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// chainConfig is what the interceptor chain needs.
type chainConfig struct {
	metrics  *grpcprom.ServerMetrics
	log      *slog.Logger
	guard    *guard
	limits   RequestLimits
	inFlight chan struct{}
	fair     *fairness.Fairness
	// refused counts a refusal by its reason.
	refused func(string)
	// callTimeout is the deadline of unary calls that arrive without one.
	callTimeout time.Duration
	// toStatus maps a request's validation error to its status.
	toStatus func(context.Context, *slog.Logger, error) error
}

// chain returns the server options installing the interceptor chain, in
// order: metrics, logging, the rejection of undecodable requests, a
// deadline for unary calls without one (deadline.go), then for
// the guarded services authentication (already done by the tap handle
// before the body was read: see tap.go) and authorization (when an
// Authenticator is configured), then request limits and size budgets, the
// audit of decisions, validation, fairness (package fairness: per-principal queues
// and bounds), the Recommend in-flight bound, recovery.
// Streams pass the same steps; their requests are checked as the handler
// receives them.
func chain(c chainConfig) []grpc.ServerOption {
	unary, stream := chainInterceptors(c)
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...)}
}

// chainInterceptors returns chain's unary and stream interceptors, outermost
// first.
func chainInterceptors(c chainConfig) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	logger := accessLog{log: c.log}
	recoverOpts := []recovery.Option{recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		c.log.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})}
	guarded := selector.MatchFunc(guardedService)
	unary := []grpc.UnaryServerInterceptor{
		c.metrics.UnaryServerInterceptor(),
		logger.unary,               // accesslog.go
		codec.RejectUndecodable,    // before anything that may end a call
		callTimeout(c.callTimeout), // deadline.go: before anything that waits
	}
	stream := []grpc.StreamServerInterceptor{
		c.metrics.StreamServerInterceptor(),
		logger.stream,
		codec.RejectUndecodableStream, // before anything that may end a call
	}
	g := c.guard
	if g.auth != nil {
		unary = append(unary, selector.UnaryServerInterceptor(withTarget(auth.UnaryServerInterceptor(g.authenticate)), guarded))
		stream = append(stream, selector.StreamServerInterceptor(auth.StreamServerInterceptor(g.authenticate), guarded))
	}
	if g.auth != nil {
		unary = append(unary, selector.UnaryServerInterceptor(g.unaryAuthorize, guarded))
		stream = append(stream, selector.StreamServerInterceptor(g.streamAuthorize, guarded))
	}
	unary = append(unary,
		c.limits.unary,
		g.audit.decisions,
		validate(c.log, c.toStatus),
		selector.UnaryServerInterceptor(c.fair.Unary, guarded), // package fairness
		limitRecommends(c.inFlight, c.refused),
		recovery.UnaryServerInterceptor(recoverOpts...),
	)
	stream = append(stream,
		selector.StreamServerInterceptor(c.fair.Stream, guarded), // package fairness
		c.limits.stream,
		recovery.StreamServerInterceptor(recoverOpts...),
	)
	return unary, stream
}

// guardedService matches the methods of the guarded services (tap.go);
// health and reflection are open to everyone.
func guardedService(_ context.Context, c interceptors.CallMeta) bool {
	return isGuarded(c.Service)
}

// validate rejects a request whose Validate method fails, with
// InvalidArgument and a BadRequest detail.
func validate(log *slog.Logger, toStatus func(context.Context, *slog.Logger, error) error) grpc.UnaryServerInterceptor {
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
// slots; a call finding no free slot fails at once with ResourceExhausted
// (and is counted with refused).
func limitRecommends(slots chan struct{}, refused func(string)) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod != setpointv1.AutoscalerService_Recommend_FullMethodName {
			return handler(ctx, req)
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			return handler(ctx, req)
		default:
			refused(refusedOverloaded)
			return nil, status.Error(codes.ResourceExhausted, "too many recommendations in flight; retry later")
		}
	}
}
