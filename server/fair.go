package server

import (
	"context"
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
	DefaultFairSlots = 32
	// DefaultMaxCallsPerPrincipal bounds one principal's unary calls
	// running or waiting.
	DefaultMaxCallsPerPrincipal = 128
	// DefaultMaxBytesPerPrincipal bounds the encoded bytes of one
	// principal's unary requests running or waiting.
	DefaultMaxBytesPerPrincipal = 64 << 20
	// DefaultMaxSimulatesPerPrincipal bounds one principal's Simulate
	// calls running or waiting.
	DefaultMaxSimulatesPerPrincipal = 2
	// DefaultMaxStreamsPerPrincipal bounds one principal's open streams
	// (Watch, Backup).
	DefaultMaxStreamsPerPrincipal = 64
)

// fairness keeps one principal's volume from delaying another's: unary
// calls of the guarded services take one of a fixed number of slots, and
// when none is free they wait in one FIFO queue per principal, the queues
// served round-robin. A call of a principal with nothing else queued waits
// at most for one slot to be freed per principal queued before it, however
// many calls the others have queued. Each principal's calls, bytes,
// Simulates and streams are bounded; past a bound a call is refused at
// once with ResourceExhausted (and counted).
type fairness struct {
	maxCalls, maxSimulates, maxStreams int
	maxBytes                           int64
	refused                            func(reason string)

	mu    sync.Mutex
	free  int
	queue map[string][]*waiter // per principal, oldest first
	ring  []string             // principals with waiters, next served first
	use   map[string]*usage
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
		maxBytes: int64(o.MaxBytesPerPrincipal), refused: refused,
		free: o.FairSlots, queue: map[string][]*waiter{}, use: map[string]*usage{},
	}
}

// errPrincipalBusy answers a call over one of its principal's bounds.
func errPrincipalBusy(what string) error {
	return status.Errorf(codes.ResourceExhausted, "too many %s of this caller in flight; retry later", what)
}

// caller names the queue of ctx's call: its principal, else its peer
// address.
func caller(ctx context.Context) string {
	if p, ok := PrincipalFrom(ctx); ok {
		return "principal:" + p.Name
	}
	return "peer:" + peerIP(ctx)
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
	case d.bytes > 0 && u.bytes+d.bytes > f.maxBytes && u.calls > 0:
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

// acquire waits for a slot, in who's queue when none is free, until ctx
// ends.
func (f *fairness) acquire(ctx context.Context, who string) error {
	f.mu.Lock()
	if f.free > 0 && len(f.ring) == 0 {
		f.free--
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
		f.release()
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
	for i, x := range f.ring {
		if x == who {
			f.ring = append(f.ring[:i:i], f.ring[i+1:]...)
			break
		}
	}
}

// release frees a slot: it goes to the oldest waiter of the next
// principal in turn, who then goes to the back of the turn.
func (f *fairness) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ring) == 0 {
		f.free++
		return
	}
	who := f.ring[0]
	q := f.queue[who]
	w := q[0]
	w.granted = true
	close(w.ready)
	f.ring = f.ring[1:]
	if len(q) == 1 {
		delete(f.queue, who)
	} else {
		f.queue[who] = q[1:]
		f.ring = append(f.ring, who)
	}
}

// unary is the fairness interceptor of unary calls.
func (f *fairness) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	d := usage{calls: 1}
	if m, ok := req.(proto.Message); ok {
		d.bytes = int64(proto.Size(m))
	}
	if info.FullMethod == setpointv1.AutoscalerService_Simulate_FullMethodName {
		d.simulates = 1
	}
	who := caller(ctx)
	if reason := f.hold(who, d); reason != "" {
		f.refused(reason)
		what := "calls"
		if reason == refusedSimulates {
			what = "Simulate calls"
		}
		return nil, errPrincipalBusy(what)
	}
	defer f.put(who, d)
	if err := f.acquire(ctx, who); err != nil {
		return nil, err
	}
	defer f.release()
	return handler(ctx, req)
}

// stream is the fairness interceptor of streams: it bounds each
// principal's open streams. Streams take no slot: a Watch mostly waits.
func (f *fairness) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	d, who := usage{streams: 1}, caller(ss.Context())
	if reason := f.hold(who, d); reason != "" {
		f.refused(reason)
		return errPrincipalBusy("streams")
	}
	defer f.put(who, d)
	return handler(srv, ss)
}
