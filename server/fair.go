package server

import (
	"context"
	"slices"
	"sync"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Defaults of the per-principal bounds (Options.FairSlots,
// MaxCallsPerPrincipal, MaxBytesPerPrincipal, MaxSimulatesPerPrincipal,
// MaxStreamsPerPrincipal).
const (
	// DefaultFairSlots is how many calls run at once; the others wait in
	// one queue per principal, served in turn.
	DefaultFairSlots = 64
	// DefaultMaxRunningPerPrincipal is how many calls of one principal
	// run at once; its others wait in its queue.
	DefaultMaxRunningPerPrincipal = 8
	// DefaultMaxCallsPerPrincipal bounds one principal's unary calls from
	// the moment their headers arrive (being read, decoded, checked,
	// queued or running); more are refused before their body is read.
	DefaultMaxCallsPerPrincipal = 64
	// DefaultMaxBytesPerPrincipal bounds the encoded bytes of one
	// principal's unary requests running or waiting.
	DefaultMaxBytesPerPrincipal = 16 << 20
	// DefaultMaxSimulatesPerPrincipal bounds one principal's Simulate
	// calls running or waiting.
	DefaultMaxSimulatesPerPrincipal = 1
	// DefaultMaxStreamsPerPrincipal bounds one principal's open streams
	// (Watch, Backup).
	DefaultMaxStreamsPerPrincipal = 64
)

// fairness keeps one principal's volume from delaying another's. Unary
// calls of the guarded services run at most maxRunning of one principal
// at once and at most slots in all; the others wait in one FIFO queue per
// principal, and freed slots go to the queued principals in turn
// (round-robin). So a principal with nothing running starts its call as
// soon as a slot is free — at once unless slots principals are busy —
// however many calls another has queued; while it runs, the other runs at
// most maxRunning calls beside it. Each principal's calls, bytes,
// Simulates and streams are bounded too; past a bound a call is refused at
// once with ResourceExhausted (and counted).
type fairness struct {
	maxCalls, maxSimulates, maxStreams, maxRunning int
	// simulates bounds the Simulate calls of all principals (CPU-bound:
	// by default half the CPUs, so the other calls keep the rest).
	simulates chan struct{}
	maxBytes  int64
	refused   func(reason string)

	mu      sync.Mutex
	free    int
	running map[string]int
	queue   map[string][]*waiter // per principal, oldest first
	ring    []string             // principals with waiters, next served first
	use     map[string]*usage
}

// waiter is one call waiting for a slot.
type waiter struct {
	ready   chan struct{}
	granted bool // under fairness.mu
}

// usage is what one principal holds.
type usage struct {
	calls, simulates, streams int
	bytes                     int64
}

func newFairness(o Options, refused func(string)) *fairness {
	return &fairness{
		maxCalls: o.MaxCallsPerPrincipal, maxSimulates: o.MaxSimulatesPerPrincipal, maxStreams: o.MaxStreamsPerPrincipal,
		maxRunning: o.MaxRunningPerPrincipal, maxBytes: int64(o.MaxBytesPerPrincipal), refused: refused,
		simulates: make(chan struct{}, o.MaxSimulates),
		free:      o.FairSlots, running: map[string]int{}, queue: map[string][]*waiter{}, use: map[string]*usage{},
	}
}

// errPrincipalBusy answers a call over one of its principal's bounds.
func errPrincipalBusy(what string) error {
	return status.Errorf(codes.ResourceExhausted, "too many %s of this caller in flight; retry later", what)
}

// caller names the principal of ctx's call; false without one (a server
// without authentication has no tenants to keep apart: its calls pass).
func caller(ctx context.Context) (string, bool) {
	p, ok := PrincipalFrom(ctx)
	return p.Name, ok
}

// hold takes what a call of who needs (a call, its bytes, a Simulate, a
// stream) or says which bound it would exceed ("" when none).
func (f *fairness) hold(who string, d usage) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.use[who]
	if u == nil {
		u = &usage{}
		f.use[who] = u
	}
	switch {
	case d.calls > 0 && u.calls+d.calls > f.maxCalls:
		return refusedInFlight
	case d.bytes > 0 && u.bytes+d.bytes > f.maxBytes && u.bytes > 0:
		return refusedInFlight
	case d.simulates > 0 && u.simulates+d.simulates > f.maxSimulates:
		return refusedSimulates
	case d.streams > 0 && u.streams+d.streams > f.maxStreams:
		return refusedStreams
	}
	u.calls, u.bytes, u.simulates, u.streams = u.calls+d.calls, u.bytes+d.bytes, u.simulates+d.simulates, u.streams+d.streams
	return ""
}

// put gives back what hold took.
func (f *fairness) put(who string, d usage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.use[who]
	u.calls, u.bytes, u.simulates, u.streams = u.calls-d.calls, u.bytes-d.bytes, u.simulates-d.simulates, u.streams-d.streams
	if *u == (usage{}) {
		delete(f.use, who)
	}
}

// acquire waits until a call of who may run, in who's queue, until ctx
// ends. A nil error must be followed by release(who).
func (f *fairness) acquire(ctx context.Context, who string) error {
	f.mu.Lock()
	if f.free > 0 && f.running[who] < f.maxRunning && len(f.queue[who]) == 0 {
		f.free--
		f.running[who]++
		f.mu.Unlock()
		return nil
	}
	w := &waiter{ready: make(chan struct{})}
	if len(f.queue[who]) == 0 {
		f.ring = append(f.ring, who)
	}
	f.queue[who] = append(f.queue[who], w)
	f.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	if w.granted {
		f.mu.Unlock()
		f.release(who)
	} else {
		f.unsafeRemove(who, w)
		f.mu.Unlock()
	}
	return status.FromContextError(ctx.Err()).Err()
}

// unsafeRemove takes w out of who's queue; f.mu is held.
func (f *fairness) unsafeRemove(who string, w *waiter) {
	q := f.queue[who]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) > 0 {
		f.queue[who] = q
		return
	}
	delete(f.queue, who)
	f.ring = slices.DeleteFunc(f.ring, func(x string) bool { return x == who })
}

// release ends a call of who and hands the freed capacity on.
func (f *fairness) release(who string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.free++
	if f.running[who]--; f.running[who] == 0 {
		delete(f.running, who)
	}
	f.unsafeDispatch()
}

// unsafeDispatch starts queued calls while slots are free: each goes to
// the oldest waiter of the next principal in turn that runs fewer than
// maxRunning calls, who then goes to the back of the turn; f.mu is held.
func (f *fairness) unsafeDispatch() {
	for f.free > 0 {
		i := slices.IndexFunc(f.ring, func(who string) bool { return f.running[who] < f.maxRunning })
		if i < 0 {
			return
		}
		who := f.ring[i]
		q := f.queue[who]
		w := q[0]
		w.granted = true
		close(w.ready)
		f.free--
		f.running[who]++
		f.ring = slices.Delete(f.ring, i, i+1)
		if len(q) == 1 {
			delete(f.queue, who)
		} else {
			f.queue[who] = q[1:]
			f.ring = append(f.ring, who)
		}
	}
}

// unary is the fairness interceptor of unary calls.
func (f *fairness) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	var d usage // the call itself is held by the tap handle (tap.go)
	if n, ok := requestBytes(ctx); ok {
		d.bytes = n // as received: proto.Size would encode the request again to count it
	} else if m, ok := req.(proto.Message); ok {
		d.bytes = int64(proto.Size(m))
	}
	if info.FullMethod == setpointv1.AutoscalerService_Simulate_FullMethodName {
		d.simulates = 1
	}
	who, ok := caller(ctx)
	if !ok {
		return handler(ctx, req)
	}
	if reason := f.hold(who, d); reason != "" {
		f.refused(reason)
		what := "calls"
		if reason == refusedSimulates {
			what = "Simulate calls"
		}
		return nil, errPrincipalBusy(what)
	}
	defer f.put(who, d)
	if d.simulates > 0 {
		select {
		case f.simulates <- struct{}{}:
			defer func() { <-f.simulates }()
		default:
			f.refused(refusedSimulates)
			return nil, status.Error(codes.ResourceExhausted, "too many Simulate calls in flight; retry later")
		}
	}
	if err := f.acquire(ctx, who); err != nil {
		return nil, err
	}
	defer f.release(who)
	return handler(ctx, req)
}

// stream is the fairness interceptor of streams: it bounds each
// principal's open streams. Streams take no slot: a Watch mostly waits.
func (f *fairness) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	d := usage{streams: 1}
	who, ok := caller(ss.Context())
	if !ok {
		return handler(srv, ss)
	}
	if reason := f.hold(who, d); reason != "" {
		f.refused(reason)
		return errPrincipalBusy("streams")
	}
	defer f.put(who, d)
	return handler(srv, ss)
}
