package admission

import (
	"context"
	"testing"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"

	"google.golang.org/grpc/stats"
)

// TestRequestBytesIsTheReceivedSize: the fairness budget counts a request
// by the size grpc-go received (the stats handler's InPayload), which is
// known only once the message arrived.
func TestRequestBytesIsTheReceivedSize(t *testing.T) {
	var h calls
	ctx := h.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: "/x/y"})
	if n, ok := requestBytes(ctx); ok {
		t.Errorf("requestBytes before the message = %d, true; want unknown", n)
	}
	h.HandleRPC(ctx, &stats.InPayload{Length: 1234, WireLength: 99})
	if n, ok := requestBytes(ctx); !ok || n != 1234 {
		t.Errorf("requestBytes = %d, %v; want 1234, true (the uncompressed length)", n, ok)
	}
	if n, ok := requestBytes(context.Background()); ok {
		t.Errorf("requestBytes outside a call = %d, true; want unknown", n)
	}
}

// TestWriteAnnouncedUntilItReachesTheStore: the stats handler announces a
// write call to the store (Config.Expect) when it tags the call, keeps it
// announced once its request is read, and takes it off exactly once: when
// its handler hands it to the store (Arrived) or at the call's end,
// whichever comes first. A read is never announced; Arrived outside a
// call does nothing.
func TestWriteAnnouncedUntilItReachesTheStore(t *testing.T) {
	const (
		write = setpointv1.AutoscalerService_Recommend_FullMethodName
		read  = setpointv1.AutoscalerService_GetTarget_FullMethodName
	)
	type step struct {
		do string // "payload" (its request read), "arrived" (Arrived) or "end"
		// announced is how many writes are announced after the step.
		announced int
	}
	for _, tc := range []struct {
		name   string
		method string
		steps  []step
	}{
		{"a write that reaches the store", write, []step{{"payload", 1}, {"arrived", 0}, {"end", 0}}},
		{"a write handed to the store twice (a retry)", write, []step{{"payload", 1}, {"arrived", 0}, {"arrived", 0}, {"end", 0}}},
		{"a write refused, invalid or panicking: it ends unreached", write, []step{{"payload", 1}, {"end", 0}}},
		{"a write that ends before its request is read", write, []step{{"end", 0}}},
		{"Arrived after the call's end", write, []step{{"payload", 1}, {"end", 0}, {"arrived", 0}}},
		{"a read", read, []step{{"payload", 0}, {"arrived", 0}, {"end", 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var announced, told int
			h := calls{expect: func(n int) { announced += n; told++ }}
			ctx := h.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: tc.method})
			want := 0
			if tc.method == write {
				want = 1
			}
			if announced != want {
				t.Fatalf("tagged: %d announced, want %d", announced, want)
			}
			for i, s := range tc.steps {
				switch s.do {
				case "payload":
					h.HandleRPC(ctx, &stats.InPayload{Length: 10})
				case "arrived":
					Arrived(ctx)
				case "end":
					h.HandleRPC(ctx, &stats.End{})
				}
				if announced != s.announced {
					t.Errorf("step %d (%s): %d announced, want %d", i, s.do, announced, s.announced)
				}
			}
			if told != 2*want {
				t.Errorf("Expect called %d times, want %d (once each way for a write)", told, 2*want)
			}
		})
	}
	t.Run("outside a call", func(t *testing.T) {
		Arrived(context.Background()) // does nothing, and does not panic
	})
	t.Run("no Expect", func(t *testing.T) {
		var h calls
		ctx := h.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: write})
		Arrived(ctx)
		h.HandleRPC(ctx, &stats.End{})
	})
}
