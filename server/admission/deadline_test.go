package admission

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// TestCallTimeout: a call without a deadline gets one the timeout away; a
// call with one keeps it, earlier or later; a timeout ≤ 0 adds none.
func TestCallTimeout(t *testing.T) {
	const timeout = time.Minute
	now := time.Now()
	tests := []struct {
		name     string
		timeout  time.Duration
		deadline time.Time // the caller's; zero: none
		// want is the handler's deadline, within a second; zero: none.
		want time.Time
	}{
		{name: "no deadline", timeout: timeout, want: now.Add(timeout)},
		{name: "earlier deadline kept", timeout: timeout, deadline: now.Add(time.Second), want: now.Add(time.Second)},
		{name: "later deadline kept", timeout: timeout, deadline: now.Add(time.Hour), want: now.Add(time.Hour)},
		{name: "no timeout", timeout: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if !tc.deadline.IsZero() {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, tc.deadline)
				defer cancel()
			}
			var got time.Time
			var ok bool
			_, err := callTimeout(tc.timeout)(ctx, nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
				got, ok = ctx.Deadline()
				return nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want.IsZero() && ok:
				t.Errorf("handler's deadline %v, want none", got)
			case !tc.want.IsZero() && (!ok || got.Sub(tc.want).Abs() > time.Second):
				t.Errorf("handler's deadline %v (set: %v), want about %v", got, ok, tc.want)
			}
		})
	}
}
