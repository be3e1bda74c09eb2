// Package fairness keeps one principal's volume from delaying another's:
// per-principal bounds on calls, bytes, Simulates and streams, and
// per-principal queues served in turn in front of the handlers. It is part
// of the server's admission: the tap handle holds each call (Hold, Put)
// and the interceptor chain runs Unary and Stream.
package fairness

import (
	"context"
	"slices"
	"sync"

	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Defaults of the Bounds (the server's Options.FairSlots,
// MaxRunningPerPrincipal, MaxCallsPerPrincipal, MaxBytesPerPrincipal,
// MaxSimulatesPerPrincipal, MaxStreamsPerPrincipal).
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

// The reasons a bound refuses a call (the server's
// setpoint_server_refused_total counts them).
const (
	RefusedInFlight  = "principal_in_flight"
	RefusedSimulates = "principal_simulates"
	RefusedStreams   = "principal_streams"
)

// Bounds configure a Fairness; every field must be positive.
type Bounds struct {
	// Slots is how many unary calls run at once.
	Slots int
	// MaxRunning is how many unary calls of one principal run at once.
	MaxRunning int
	// MaxCalls bounds one principal's unary calls running or waiting.
	MaxCalls int
	// MaxBytes bounds the encoded bytes of one principal's unary requests
	// running or waiting (one request alone always passes).
	MaxBytes int
	// Simulates bounds the Simulate calls of all principals running at
	// once; MaxSimulates one principal's, running or waiting.
	Simulates, MaxSimulates int
	// MaxStreams bounds one principal's open streams.
	MaxStreams int
}

// Fairness keeps one principal's volume from delaying another's. Unary
// calls of the guarded services run at most maxRunning of one principal
// at once and at most slots in all; the others wait in one FIFO queue per
// principal, and freed slots go to the queued principals in turn
// (round-robin). So a principal with nothing running starts its call as
// soon as a slot is free — at once unless slots principals are busy —
// however many calls another has queued; while it runs, the other runs at
// most maxRunning calls beside it. Each principal's calls, bytes,
// Simulates and streams are bounded too; past a bound a call is refused at
// once with ResourceExhausted (and counted).
type Fairness struct {
	maxCalls, maxSimulates, maxStreams, maxRunning int
	// simulates bounds the Simulate calls of all principals (CPU-bound:
	// by default half the CPUs, so the other calls keep the rest).
	simulates chan struct{}
	maxBytes  int64
	refused   func(reason string)
	// caller names the principal of a call's context; requestBytes is the
	// size of its request as received (false: unknown).
	caller       func(context.Context) (string, bool)
	requestBytes func(context.Context) (int64, bool)

	mu      sync.Mutex
	free    int
	running map[string]int
	queue   map[string][]*waiter // per principal, oldest first
	ring    []string             // principals with waiters, next served first
	use     map[string]*Usage
}

// waiter is one call waiting for a slot.
type waiter struct {
	ready   chan struct{}
	granted bool // under Fairness.mu
}

// Usage is what one principal holds, or one call needs.
type Usage struct {
	Calls, Simulates, Streams int
	Bytes                     int64
}

// New returns a Fairness within b. refused is told the reason of each
// refusal; caller names the principal of a call's context (a call without
// one passes: a server without authentication has no tenants to keep
// apart); requestBytes is the size of a call's request as received, when
// known (otherwise the request is measured).
func New(b Bounds, refused func(reason string), caller func(context.Context) (string, bool), requestBytes func(context.Context) (int64, bool)) *Fairness {
	return &Fairness{
		maxCalls: b.MaxCalls, maxSimulates: b.MaxSimulates, maxStreams: b.MaxStreams,
		maxRunning: b.MaxRunning, maxBytes: int64(b.MaxBytes), refused: refused,
		caller: caller, requestBytes: requestBytes,
		simulates: make(chan struct{}, b.Simulates),
		free:      b.Slots, running: map[string]int{}, queue: map[string][]*waiter{}, use: map[string]*Usage{},
	}
}

// ErrPrincipalBusy answers a call over one of its principal's bounds.
func ErrPrincipalBusy(what string) error {
	return status.Errorf(codes.ResourceExhausted, "too many %s of this caller in flight; retry later", what)
}

// Hold takes what a call of who needs (a call, its bytes, a Simulate, a
// stream) or says which bound it would exceed ("" when none).
func (f *Fairness) Hold(who string, d Usage) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.use[who]
	if u == nil {
		u = &Usage{}
		f.use[who] = u
	}
	switch {
	case d.Calls > 0 && u.Calls+d.Calls > f.maxCalls:
		return RefusedInFlight
	case d.Bytes > 0 && u.Bytes+d.Bytes > f.maxBytes && u.Bytes > 0:
		return RefusedInFlight
	case d.Simulates > 0 && u.Simulates+d.Simulates > f.maxSimulates:
		return RefusedSimulates
	case d.Streams > 0 && u.Streams+d.Streams > f.maxStreams:
		return RefusedStreams
	}
	u.Calls, u.Bytes, u.Simulates, u.Streams = u.Calls+d.Calls, u.Bytes+d.Bytes, u.Simulates+d.Simulates, u.Streams+d.Streams
	return ""
}

// Put gives back what Hold took.
func (f *Fairness) Put(who string, d Usage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.use[who]
	u.Calls, u.Bytes, u.Simulates, u.Streams = u.Calls-d.Calls, u.Bytes-d.Bytes, u.Simulates-d.Simulates, u.Streams-d.Streams
	if *u == (Usage{}) {
		delete(f.use, who)
	}
}

// acquire waits until a call of who may run, in who's queue, until ctx
// ends. A nil error must be followed by release(who).
func (f *Fairness) acquire(ctx context.Context, who string) error {
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
func (f *Fairness) unsafeRemove(who string, w *waiter) {
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
func (f *Fairness) release(who string) {
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
func (f *Fairness) unsafeDispatch() {
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

// simulates are the methods bounded as Simulates (Bounds.Simulates,
// MaxSimulates): Simulate, SimulateFleet, and the console's Replay, which
// runs one.
var simulates = map[string]bool{
	setpointv1.AutoscalerService_Simulate_FullMethodName: true,
	setpointv1.FleetService_SimulateFleet_FullMethodName: true,
	consolev1.ReplayService_Replay_FullMethodName:        true,
}

// Unary is the fairness interceptor of unary calls.
func (f *Fairness) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	var d Usage // the call itself is held by the tap handle (Hold)
	if n, ok := f.requestBytes(ctx); ok {
		d.Bytes = n // as received: proto.Size would encode the request again to count it
	} else if m, ok := req.(proto.Message); ok {
		d.Bytes = int64(proto.Size(m))
	}
	if simulates[info.FullMethod] {
		d.Simulates = 1
	}
	who, ok := f.caller(ctx)
	if !ok {
		return handler(ctx, req)
	}
	if reason := f.Hold(who, d); reason != "" {
		f.refused(reason)
		what := "calls"
		if reason == RefusedSimulates {
			what = "Simulate calls"
		}
		return nil, ErrPrincipalBusy(what)
	}
	defer f.Put(who, d)
	if d.Simulates > 0 {
		select {
		case f.simulates <- struct{}{}:
			defer func() { <-f.simulates }()
		default:
			f.refused(RefusedSimulates)
			return nil, status.Error(codes.ResourceExhausted, "too many Simulate calls in flight; retry later")
		}
	}
	if err := f.acquire(ctx, who); err != nil {
		return nil, err
	}
	defer f.release(who)
	return handler(ctx, req)
}

// Stream is the fairness interceptor of streams: it bounds each
// principal's open streams. Streams take no slot: a Watch mostly waits.
func (f *Fairness) Stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	d := Usage{Streams: 1}
	who, ok := f.caller(ss.Context())
	if !ok {
		return handler(srv, ss)
	}
	if reason := f.Hold(who, d); reason != "" {
		f.refused(reason)
		return ErrPrincipalBusy("streams")
	}
	defer f.Put(who, d)
	return handler(srv, ss)
}
