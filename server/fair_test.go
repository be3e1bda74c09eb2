package server

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/stats"
)

// TestFairnessServesPrincipalsInTurn: with one slot, a principal arriving
// behind another's queue of three is served after at most one of them,
// and a principal with nothing running starts at once while another runs
// its maximum.
func TestFairnessServesPrincipalsInTurn(t *testing.T) {
	f := newFairness(Options{FairSlots: 1, MaxRunningPerPrincipal: 1}.withDefaults(), func(string) {})
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
	f = newFairness(Options{FairSlots: 2, MaxRunningPerPrincipal: 1}.withDefaults(), func(string) {})
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
	o := Options{MaxCallsPerPrincipal: 2, MaxBytesPerPrincipal: 100, MaxSimulatesPerPrincipal: 1, MaxStreamsPerPrincipal: 1}.withDefaults()
	tests := []struct {
		name       string
		held, next usage
		want       string
	}{
		{"calls", usage{calls: 2}, usage{calls: 1}, refusedInFlight},
		{"bytes", usage{calls: 1, bytes: 60}, usage{calls: 1, bytes: 60}, refusedInFlight},
		{"one request over the byte bound alone passes", usage{}, usage{calls: 1, bytes: 1000}, ""},
		{"simulates", usage{calls: 1, simulates: 1}, usage{calls: 1, simulates: 1}, refusedSimulates},
		{"streams", usage{streams: 1}, usage{streams: 1}, refusedStreams},
		{"within every bound", usage{calls: 1, bytes: 10}, usage{calls: 1, bytes: 10}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFairness(o, func(string) {})
			if tt.held != (usage{}) {
				if r := f.hold("a", tt.held); r != "" {
					t.Fatalf("holding %+v: %s", tt.held, r)
				}
			}
			if got := f.hold("a", tt.next); got != tt.want {
				t.Errorf("hold %+v after %+v = %q, want %q", tt.next, tt.held, got, tt.want)
			}
			if got := f.hold("b", tt.next); got != "" {
				t.Errorf("another principal refused: %q", got)
			}
		})
	}
}

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
