package fairness

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestFairnessServesPrincipalsInTurn: with one slot, a principal arriving
// behind another's queue of three is served after at most one of them,
// and a principal with nothing running starts at once while another runs
// its maximum.
func TestFairnessServesPrincipalsInTurn(t *testing.T) {
	f := New(bounds(Bounds{Slots: 1, MaxRunning: 1}), func(string) {}, nil, nil)
	ctx := t.Context()
	if err := f.acquire(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 8)
	wait := func(who, name string) {
		f.mu.Lock()
		n := len(f.queue[who])
		f.mu.Unlock()
		go func() {
			if err := f.acquire(ctx, who); err != nil {
				t.Error(err)
				return
			}
			order <- name
		}()
		waitUntil(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.queue[who]) == n+1 })
	}
	wait("a", "a2")
	wait("a", "a3")
	wait("a", "a4")
	wait("b", "b1")
	var got []string
	for _, done := range []string{"a", "a", "b", "a", "a"} { // the principal of the call that ends
		f.release(done)
		if len(got) < 4 {
			got = append(got, <-order)
		}
	}
	if want := []string{"a2", "b1", "a3", "a4"}; !cmp.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
	if f.free != 1 || len(f.running) != 0 || len(f.ring) != 0 {
		t.Errorf("after all calls: free %d, running %v, ring %v", f.free, f.running, f.ring)
	}

	// Two slots, one call of a principal at a time: b starts at once
	// while a runs its one call and queues another.
	f = New(bounds(Bounds{Slots: 2, MaxRunning: 1}), func(string) {}, nil, nil)
	if err := f.acquire(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	wait("a", "a2")
	if err := f.acquire(ctx, "b"); err != nil {
		t.Fatalf("b waited behind a: %v", err)
	}
	// A waiter whose context ends leaves the queue and the accounting.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- f.acquire(cctx, "b") }()
	waitUntil(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.queue["b"]) == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Error("a canceled waiter acquired")
	}
	f.release("b")
	f.release("a")
	if s := <-order; s != "a2" {
		t.Errorf("served %s, want a2", s)
	}
	f.release("a")
	if f.free != 2 || len(f.running) != 0 || len(f.queue) != 0 {
		t.Errorf("after all calls: free %d, running %v, queue %v", f.free, f.running, f.queue)
	}
}

// waitUntil polls cond for up to 5 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not reached")
}

// TestFairnessBounds: each per-principal bound refuses the call past it
// with its reason, and only that principal's.
func TestFairnessBounds(t *testing.T) {
	o := bounds(Bounds{MaxCalls: 2, MaxBytes: 100, MaxSimulates: 1, MaxStreams: 1})
	tests := []struct {
		name       string
		held, next Usage
		want       string
	}{
		{"calls", Usage{Calls: 2}, Usage{Calls: 1}, RefusedInFlight},
		{"bytes", Usage{Calls: 1, Bytes: 60}, Usage{Calls: 1, Bytes: 60}, RefusedInFlight},
		{"one request over the byte bound alone passes", Usage{}, Usage{Calls: 1, Bytes: 1000}, ""},
		{"simulates", Usage{Calls: 1, Simulates: 1}, Usage{Calls: 1, Simulates: 1}, RefusedSimulates},
		{"streams", Usage{Streams: 1}, Usage{Streams: 1}, RefusedStreams},
		{"within every bound", Usage{Calls: 1, Bytes: 10}, Usage{Calls: 1, Bytes: 10}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(o, func(string) {}, nil, nil)
			if tt.held != (Usage{}) {
				if r := f.Hold("a", tt.held); r != "" {
					t.Fatalf("holding %+v: %s", tt.held, r)
				}
			}
			if got := f.Hold("a", tt.next); got != tt.want {
				t.Errorf("hold %+v after %+v = %q, want %q", tt.next, tt.held, got, tt.want)
			}
			if got := f.Hold("b", tt.next); got != "" {
				t.Errorf("another principal refused: %q", got)
			}
		})
	}
}

// bounds is b with the defaults for its zero fields.
func bounds(b Bounds) Bounds {
	for _, f := range []struct {
		v   *int
		def int
	}{{&b.Slots, DefaultFairSlots}, {&b.MaxRunning, DefaultMaxRunningPerPrincipal}, {&b.MaxCalls, DefaultMaxCallsPerPrincipal},
		{&b.MaxBytes, DefaultMaxBytesPerPrincipal}, {&b.Simulates, 1}, {&b.MaxSimulates, DefaultMaxSimulatesPerPrincipal}, {&b.MaxStreams, DefaultMaxStreamsPerPrincipal}} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
	return b
}

// principalKey is the context key of the principal in these tests.
type principalKey struct{}

// TestReplaysAreBoundedAsSimulates: the console's Replay is a Simulate to
// the bounds. While one principal's replay runs, its next replay and
// another principal's Simulate past the global bound are refused at once
// (ResourceExhausted) without running; once it ends, the next runs.
func TestReplaysAreBoundedAsSimulates(t *testing.T) {
	var refusals []string
	f := New(bounds(Bounds{Simulates: 1, MaxSimulates: 1}), func(r string) { refusals = append(refusals, r) },
		func(ctx context.Context) (string, bool) {
			who, ok := ctx.Value(principalKey{}).(string)
			return who, ok
		},
		func(context.Context) (int64, bool) { return 10, true })
	as := func(who string) context.Context { return context.WithValue(t.Context(), principalKey{}, who) }
	replay := &grpc.UnaryServerInfo{FullMethod: consolev1.ReplayService_Replay_FullMethodName}
	simulate := &grpc.UnaryServerInfo{FullMethod: setpointv1.AutoscalerService_Simulate_FullMethodName}

	running, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := f.Unary(as("dashboard"), nil, replay, func(context.Context, any) (any, error) {
			close(running)
			<-release
			return nil, nil
		})
		done <- err
	}()
	<-running
	ran := func(context.Context, any) (any, error) { t.Error("a call past the bound ran"); return nil, nil }
	if _, err := f.Unary(as("dashboard"), nil, replay, ran); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("the principal's second replay: %v, want ResourceExhausted", err)
	}
	if _, err := f.Unary(as("agent-b"), nil, simulate, ran); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("another principal's Simulate past the global bound: %v, want ResourceExhausted", err)
	}
	if want := []string{RefusedSimulates, RefusedSimulates}; !cmp.Equal(refusals, want) {
		t.Errorf("refusals %v, want %v", refusals, want)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	served := false
	if _, err := f.Unary(as("dashboard"), nil, replay, func(context.Context, any) (any, error) { served = true; return nil, nil }); err != nil || !served {
		t.Errorf("the replay after the first ended: %v, served %v", err, served)
	}
}
