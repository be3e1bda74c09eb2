package admission

import (
	"context"
	"testing"

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
