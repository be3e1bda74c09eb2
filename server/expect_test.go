package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// expectProbe is a store that notes, in order, the writes announced to it
// (Expect) and the calls that reach it.
type expectProbe struct {
	store.Store

	mu       sync.Mutex
	seen     []string // "+1", "-1", or a store method
	expected int
}

func (p *expectProbe) note(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, what)
}

func (p *expectProbe) Expect(n int) {
	p.mu.Lock()
	p.expected += n
	p.mu.Unlock()
	p.note(fmt.Sprintf("%+d", n))
	p.Store.Expect(n)
}

func (p *expectProbe) Update(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	p.note("Update")
	return p.Store.Update(ctx, k, fn)
}

func (p *expectProbe) Decide(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	p.note("Decide")
	return p.Store.Decide(ctx, k, fn)
}

func (p *expectProbe) Delete(ctx context.Context, k target.Key) error {
	p.note("Delete")
	return p.Store.Delete(ctx, k)
}

func (p *expectProbe) Get(ctx context.Context, k target.Key) (target.Record, error) {
	p.note("Get")
	return p.Store.Get(ctx, k)
}

// TestWritesAreAnnouncedToTheStore: each write call (Recommend, Observe,
// DeleteTarget) is announced to the store (Expect) from the moment the
// server handles it and taken off once its request is read, before it
// reaches the store; a read is never announced; a call refused after its
// request was read is taken off too, and nothing stays announced.
func TestWritesAreAnnouncedToTheStore(t *testing.T) {
	probe := &expectProbe{}
	ts := start(t, setup{
		wrap: func(s store.Store) store.Store { probe.Store = s; return probe },
	})
	c := ts.client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		call     func() error
		wantCode codes.Code
		// wantSeen is what the store saw, in order.
		wantSeen []string
	}{
		{
			name:     "Recommend",
			call:     func() error { _, err := c.Recommend(ctx, request("web", 2, t0)); return err },
			wantSeen: []string{"+1", "-1", "Decide"},
		},
		{
			name: "Observe",
			call: func() error {
				_, err := c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("web"), DecisionId: "x",
					Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 2, To: 3}}})
				return err
			},
			wantSeen: []string{"+1", "-1", "Update"},
		},
		{
			name:     "GetTarget is a read",
			call:     func() error { _, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("web")}); return err },
			wantSeen: []string{"Get"},
		},
		{
			name: "DeleteTarget",
			call: func() error {
				_, err := c.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: key("web")})
				return err
			},
			wantSeen: []string{"+1", "-1", "Delete"},
		},
		{
			name:     "an invalid Recommend never reaches the store",
			call:     func() error { _, err := c.Recommend(ctx, &setpointv1.RecommendRequest{}); return err },
			wantCode: codes.InvalidArgument,
			wantSeen: []string{"+1", "-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe.mu.Lock()
			probe.seen = nil
			probe.mu.Unlock()
			if err := tc.call(); status.Code(err) != tc.wantCode {
				t.Fatalf("call: %v, want %v", err, tc.wantCode)
			}
			probe.mu.Lock()
			defer probe.mu.Unlock()
			if diff := cmp.Diff(tc.wantSeen, probe.seen); diff != "" {
				t.Errorf("the store saw (-want +got):\n%s", diff)
			}
			if probe.expected != 0 {
				t.Errorf("%d writes still announced after the call", probe.expected)
			}
		})
	}
}
