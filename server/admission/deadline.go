package admission

import (
	"context"
	"time"

	"google.golang.org/grpc"
)

// DefaultCallTimeout is Config.CallTimeout's default: well above a
// healthy call's time (milliseconds) and a failover's (about 2 s), well
// below what a caller would take for a hung server.
const DefaultCallTimeout = 10 * time.Second

// callTimeout gives a unary call that arrives without a deadline one d
// from now, so that a call the store cannot answer (a disk that stalls its
// flushes, a store that cannot reach its quorum) ends with
// DeadlineExceeded within d instead of waiting as long as the stall. A
// call with a deadline keeps its own, even a later one. Streams (Watch,
// Backup) are long by design and keep theirs. d ≤ 0 gives no deadline.
func callTimeout(d time.Duration) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if _, ok := ctx.Deadline(); ok || d <= 0 {
			return handler(ctx, req)
		}
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return handler(ctx, req)
	}
}
