package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// arrivalProbe is a store that notes, as each call reaches it, how many
// writes Arrivals counts on their way.
type arrivalProbe struct {
	store.Store
	arrivals *boltstore.Arrivals

	mu   sync.Mutex
	seen map[string]int64 // store method → Coming() as it was called
}

func (p *arrivalProbe) note(method string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[method] = p.arrivals.Coming()
}

func (p *arrivalProbe) Update(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	p.note("Update")
	return p.Store.Update(ctx, k, fn)
}

func (p *arrivalProbe) Decide(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	p.note("Decide")
	return p.Store.Decide(ctx, k, fn)
}

func (p *arrivalProbe) Delete(ctx context.Context, k target.Key) error {
	p.note("Delete")
	return p.Store.Delete(ctx, k)
}

func (p *arrivalProbe) Get(ctx context.Context, k target.Key) (target.Record, error) {
	p.note("Get")
	return p.Store.Get(ctx, k)
}

// TestArrivalsCountWritesOnTheirWay: with Options.Arrivals, each write call
// (Recommend, Observe, DeleteTarget) is counted from the moment the server
// handles it until it reaches the store, a read is never counted, and every
// call is counted off however it ends — also one refused before it reaches
// the store.
func TestArrivalsCountWritesOnTheirWay(t *testing.T) {
	arrivals := new(boltstore.Arrivals)
	probe := &arrivalProbe{arrivals: arrivals, seen: map[string]int64{}}
	ts := start(t, setup{
		opts:      server.Options{Arrivals: arrivals},
		storeOpts: boltstore.Options{Arrivals: arrivals},
		wrap:      func(s store.Store) store.Store { probe.Store = s; return probe },
	})
	c := ts.client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		call     func() error
		wantCode codes.Code
		// wantSeen is what the store saw: its method, and the writes
		// coming at that moment (this one included).
		wantSeen map[string]int64
	}{
		{
			name:     "Recommend",
			call:     func() error { _, err := c.Recommend(ctx, request("web", 2, t0)); return err },
			wantSeen: map[string]int64{"Decide": 1},
		},
		{
			name: "Observe",
			call: func() error {
				_, err := c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("web"), DecisionId: "x",
					Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 2, To: 3}}})
				return err
			},
			wantSeen: map[string]int64{"Update": 1},
		},
		{
			name:     "GetTarget is a read",
			call:     func() error { _, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("web")}); return err },
			wantSeen: map[string]int64{"Get": 0},
		},
		{
			name: "DeleteTarget",
			call: func() error {
				_, err := c.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: key("web")})
				return err
			},
			wantSeen: map[string]int64{"Delete": 1},
		},
		{
			name:     "an invalid Recommend never reaches the store",
			call:     func() error { _, err := c.Recommend(ctx, &setpointv1.RecommendRequest{}); return err },
			wantCode: codes.InvalidArgument,
			wantSeen: map[string]int64{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe.mu.Lock()
			clear(probe.seen)
			probe.mu.Unlock()
			if err := tc.call(); status.Code(err) != tc.wantCode {
				t.Fatalf("call: %v, want %v", err, tc.wantCode)
			}
			probe.mu.Lock()
			if diff := cmp.Diff(tc.wantSeen, probe.seen); diff != "" {
				t.Errorf("the store saw (-want +got):\n%s", diff)
			}
			probe.mu.Unlock()
			// A call that never reached the store is counted off at its
			// end, which grpc-go reports after the answer is sent.
			testkit.Eventually(t, 5*time.Second, "every call counted off", func() error {
				if n := arrivals.Coming(); n != 0 {
					return fmt.Errorf("Coming() = %d", n)
				}
				return nil
			})
		})
	}
}
