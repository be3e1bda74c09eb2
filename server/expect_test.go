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
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// expectProbe is a store that notes, in order, the writes announced to it
// (Expect) and the calls that reach it. It is also the server's clock,
// which a write's handler reads while it converts the request (after the
// request is read, before the store call): the clock notes how many writes
// are announced at that moment. panicClock and panicStore make the next
// clock read or store write panic.
type expectProbe struct {
	store.Store

	mu                     sync.Mutex
	seen                   []string // "+1", "-1", "clock@N", or a store method
	expected               int
	panicClock, panicStore bool
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

// now is the server's clock.
func (p *expectProbe) now() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, fmt.Sprintf("clock@%d", p.expected))
	if p.panicClock {
		p.panicClock = false
		panic("expectProbe: the clock panics")
	}
	return t0
}

// write notes a store write of method, and panics when told to.
func (p *expectProbe) write(method string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, method)
	if p.panicStore {
		p.panicStore = false
		panic("expectProbe: the store panics")
	}
}

func (p *expectProbe) Update(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	p.write("Update")
	return p.Store.Update(ctx, k, fn)
}

func (p *expectProbe) Decide(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	p.write("Decide")
	return p.Store.Decide(ctx, k, fn)
}

func (p *expectProbe) Delete(ctx context.Context, k target.Key) error {
	p.write("Delete")
	return p.Store.Delete(ctx, k)
}

func (p *expectProbe) Get(ctx context.Context, k target.Key) (target.Record, error) {
	p.note("Get")
	return p.Store.Get(ctx, k)
}

// TestWritesAreAnnouncedToTheStore: each write call (Recommend, Observe,
// DeleteTarget) is announced to the store (Expect) from the moment the
// server handles it until its handler hands it to the store — still
// announced while the handler converts the request (reads the clock) —
// and taken off exactly once, just before the store call; a write that
// never reaches the store (refused by the request limits, invalid, its
// handler panicking) is taken off once at its end, one whose store call
// panics is not taken off twice, a read is never announced, and nothing
// stays announced after any call.
func TestWritesAreAnnouncedToTheStore(t *testing.T) {
	probe := &expectProbe{}
	ts := start(t, setup{
		opts: server.Options{Now: probe.now, MaxPodsPerRequest: 2},
		wrap: func(s store.Store) store.Store { probe.Store = s; return probe },
	})
	c := ts.client(t)
	ctx := context.Background()
	recommend := func(req *setpointv1.RecommendRequest) func() error {
		return func() error { _, err := c.Recommend(ctx, req); return err }
	}
	for _, tc := range []struct {
		name string
		// before sets the probe up for the call.
		before   func()
		call     func() error
		wantCode codes.Code
		// wantSeen is what the store saw, in order.
		wantSeen []string
	}{
		{
			name:     "Recommend",
			call:     recommend(request("web", 2, t0)),
			wantSeen: []string{"+1", "clock@1", "-1", "Decide"},
		},
		{
			name: "Observe",
			call: func() error {
				_, err := c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("web"), DecisionId: "x",
					Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 2, To: 3}}})
				return err
			},
			wantSeen: []string{"+1", "clock@1", "-1", "Update"},
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
			call:     recommend(&setpointv1.RecommendRequest{}),
			wantCode: codes.InvalidArgument,
			wantSeen: []string{"+1", "-1"},
		},
		{
			name:     "a Recommend refused by the request limits never reaches the store",
			call:     recommend(request("web", 3, t0)),
			wantCode: codes.InvalidArgument,
			wantSeen: []string{"+1", "-1"},
		},
		{
			name:     "a Recommend whose handler panics before the store",
			before:   func() { probe.panicClock = true },
			call:     recommend(request("web", 2, t0)),
			wantCode: codes.Internal,
			wantSeen: []string{"+1", "clock@1", "-1"},
		},
		{
			name:     "a Recommend whose store call panics",
			before:   func() { probe.panicStore = true },
			call:     recommend(request("web", 2, t0)),
			wantCode: codes.Internal,
			wantSeen: []string{"+1", "clock@1", "-1", "Decide"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe.mu.Lock()
			probe.seen = nil
			probe.mu.Unlock()
			if tc.before != nil {
				probe.mu.Lock()
				tc.before()
				probe.mu.Unlock()
			}
			if err := tc.call(); status.Code(err) != tc.wantCode {
				t.Fatalf("call: %v, want %v", err, tc.wantCode)
			}
			// The call's end (when an unreached write is taken off) is
			// reported by grpc-go once its answer is sent: the client may
			// have the answer first.
			testkit.Eventually(t, 10*time.Second, "no write announced after the call", func() error {
				probe.mu.Lock()
				defer probe.mu.Unlock()
				if probe.expected != 0 {
					return fmt.Errorf("%d writes still announced", probe.expected)
				}
				return nil
			})
			probe.mu.Lock()
			defer probe.mu.Unlock()
			if diff := cmp.Diff(tc.wantSeen, probe.seen); diff != "" {
				t.Errorf("the store saw (-want +got):\n%s", diff)
			}
		})
	}
}
