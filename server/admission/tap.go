package admission

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/auth"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/server/fairness"
	"github.com/setpointhq/setpoint/server/transport"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Defaults of the admission of callers without a principal.
const (
	// DefaultPeerRateLimit is the calls per second one peer address may
	// make without a principal (refused authentications; every call when
	// the server runs without authentication and Config.PeerRateLimit is
	// set).
	DefaultPeerRateLimit = 10
	// maxBuckets bounds the rate-limit buckets (peer addresses, principals)
	// and sampled audit keys tracked at once: past it they start over (a
	// refill for everyone, never a refusal).
	maxBuckets = 16384
	// auditEvery is how often one kind of refusal of one peer is logged;
	// the metric counts every one.
	auditEvery = time.Minute
)

// The reasons of setpoint_server_refused_total.
const (
	refusedUnauthenticated = "unauthenticated"
	refusedPeerRate        = "peer_rate_limit"
	refusedRate            = "rate_limit"
	refusedStreams         = fairness.RefusedStreams
	refusedSimulates       = fairness.RefusedSimulates
	refusedInFlight        = fairness.RefusedInFlight
	refusedOverloaded      = "overloaded"
)

// admission decides, in grpc's tap handle, before a request's body is
// read, whether a call of a guarded service may proceed: it authenticates
// the caller (certificate or bearer token, both known from the
// connection and the headers alone) and applies the rate limits. A
// refused caller costs its headers: the body is never read nor decoded.
type admission struct {
	// fair holds a call of each admitted unary call of a principal until
	// its end (see calls): its decoding is bounded with the rest.
	fair  *fairness.Fairness
	auth  *auth.Authenticator // nil: no authentication
	rates *rateLimiter        // nil: no per-principal rate limit
	peers *rateLimiter        // by peer IP; nil: callers without a principal are not limited
	// requireCert refuses callers without a verified client certificate
	// (Config.RequireClientCert).
	requireCert bool
	refused     *prometheus.CounterVec
	audit       *sampledAudit
}

// newAdmission returns the admission of a server configured by o, the
// per-principal rate limiter rates (nil: none) and fair; it registers
// setpoint_server_refused_total with reg.
func newAdmission(o Config, rates *rateLimiter, fair *fairness.Fairness, reg prometheus.Registerer) *admission {
	a := &admission{
		fair:        fair,
		auth:        o.Auth,
		rates:       rates,
		requireCert: o.RequireClientCert,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "server", Name: "refused_total",
			Help: "Calls refused to protect the service or its other tenants, by reason (unauthenticated, peer_rate_limit, rate_limit, principal_streams, principal_simulates, principal_in_flight, overloaded). Refusals are logged at most once a minute per peer, method and reason.",
		}, []string{"reason"}),
		audit: newSampledAudit(o.Logger, o.Now),
	}
	for _, r := range []string{refusedUnauthenticated, refusedPeerRate, refusedRate, refusedStreams, refusedSimulates, refusedInFlight, refusedOverloaded} {
		a.refused.WithLabelValues(r)
	}
	reg.MustRegister(a.refused)
	if o.PeerRateLimit > 0 {
		a.peers = newRateLimiter(o.PeerRateLimit, o.PeerRateBurst, o.Now)
	}
	return a
}

// tap is the grpc.InTapHandle of the server.
func (a *admission) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	ctx = transport.BrowserPeer(ctx, info.Header) // a console call is its browser's
	if !guardedMethod(info.FullMethodName) {
		return ctx, nil
	}
	if a.requireCert && auth.VerifiedClientCert(ctx) == nil {
		// On the gRPC port the TLS handshake refused such callers; a
		// console call comes through the door without one.
		a.refuse(ctx, info.FullMethodName, refusedUnauthenticated, "no client certificate", codes.Unauthenticated)
		return nil, errClientCertRequired
	}
	if a.auth == nil {
		if a.peers != nil && !a.peers.allow(peerIP(ctx)) {
			a.refuse(ctx, info.FullMethodName, refusedPeerRate, "", codes.ResourceExhausted)
			return nil, status.Error(codes.ResourceExhausted, "rate limit of callers without credentials exceeded; retry later")
		}
		return ctx, nil
	}
	p, presented, err := a.auth.Authenticate(ctx)
	if err != nil {
		if a.peers != nil && !a.peers.allow(peerIP(ctx)) {
			a.refuse(ctx, info.FullMethodName, refusedPeerRate, presented, codes.ResourceExhausted)
			return nil, status.Error(codes.ResourceExhausted, "rate limit of callers without credentials exceeded; retry later")
		}
		if presented == "" {
			presented = "no credentials"
		}
		a.refuse(ctx, info.FullMethodName, refusedUnauthenticated, presented, codes.Unauthenticated)
		return nil, err
	}
	ctx = auth.WithPrincipal(ctx, p)
	if a.rates != nil {
		if err := a.rates.check(ctx); err != nil {
			a.refuse(ctx, info.FullMethodName, refusedRate, p.Name, codes.ResourceExhausted)
			return nil, err
		}
	}
	if unaryMethods[info.FullMethodName] {
		// Held from before the body is read until the call's end, so one
		// principal's calls being decoded and checked are bounded too.
		if reason := a.fair.Hold(p.Name, fairness.Usage{Calls: 1}); reason != "" {
			a.refuse(ctx, info.FullMethodName, reason, p.Name, codes.ResourceExhausted)
			return nil, fairness.ErrPrincipalBusy("calls")
		}
		ctx = context.WithValue(ctx, heldCallKey{}, p.Name)
	}
	return ctx, nil
}

// unaryMethods are the unary methods of the guarded services.
var unaryMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, sd := range guardedServices {
		for _, md := range sd.Methods {
			m["/"+sd.ServiceName+"/"+md.MethodName] = true
		}
	}
	return m
}()

// heldCallKey is the context key of the principal whose call the tap
// handle held.
type heldCallKey struct{}

// calls is the stats.Handler giving back, at each call's end, the call
// the tap handle held (grpc-go reports the end of every call of a known
// method, however it ends), and announcing each write to the store until
// its handler hands it to the store or the call ends (arrivals.go; expect
// nil: none).
type calls struct {
	fair   *fairness.Fairness
	expect func(int)
}

// TagRPC implements stats.Handler: it gives the call a place for the size
// of its request (requestBytes) and for the memory of its response
// (ResponseMemory), and announces a write to the store.
func (c calls) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	n := new(call)
	announce(c.expect, info.FullMethodName, n)
	return context.WithValue(ctx, callKey{}, n)
}

// HandleRPC implements stats.Handler: it notes the size of each request
// message received, and at a call's end it gives back the call held and
// the memory of its response; a write that did not reach the store
// (Arrived) is taken off the writes announced to it at its call's end.
func (c calls) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s := s.(type) {
	case *stats.InPayload:
		if n, ok := ctx.Value(callKey{}).(*call); ok {
			n.bytes.Store(int64(s.Length))
			n.known.Store(true)
		}
	case *stats.End:
		if n, ok := ctx.Value(callKey{}).(*call); ok {
			n.arrived()
		}
		if who, ok := ctx.Value(heldCallKey{}).(string); ok {
			c.fair.Put(who, fairness.Usage{Calls: 1})
		}
		if n, ok := ctx.Value(callKey{}).(*call); ok {
			if r := n.response.Swap(nil); r != nil {
				r.Reset()
				responses.Put(r)
			}
		}
	}
}

// callKey is the context key of a call's *call.
type callKey struct{}

// call is what the stats handler (calls) keeps for one call: the size of
// the last request message it received, as grpc-go reports it, whether
// it is a write announced to the store and not yet taken off (and to
// whom), and the memory of its response.
type call struct {
	bytes     atomic.Int64 // uncompressed: the encoded message's length
	known     atomic.Bool
	announced atomic.Bool
	expect    func(int) // set by announce, before announced
	// response is the memory of the call's response, given back at the
	// call's end: grpc-go reports the end once the response is sent (and
	// logged), and nothing refers to the response after it.
	response atomic.Pointer[convert.Response]
}

// responses keeps the memory of Recommend's responses between calls.
var responses = sync.Pool{New: func() any { return new(convert.Response) }}

// ResponseMemory returns memory for the response of the call of ctx,
// given back at the call's end; nil (new memory) outside a call of a
// server with the calls stats handler.
func ResponseMemory(ctx context.Context) *convert.Response {
	n, ok := ctx.Value(callKey{}).(*call)
	if !ok || n.response.Load() != nil { // a call has one response
		return nil
	}
	r := responses.Get().(*convert.Response)
	n.response.Store(r)
	return r
}

// requestBytes returns the encoded size of the request message of the
// call of ctx, as received: what proto.Size says of it, without walking
// the decoded message again. ok is false outside a call of a server with
// the calls stats handler, or before the message was received.
func requestBytes(ctx context.Context) (n int64, ok bool) {
	s, ok := ctx.Value(callKey{}).(*call)
	if !ok || !s.known.Load() {
		return 0, false
	}
	return s.bytes.Load(), true
}

// TagConn implements stats.Handler.
func (calls) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn implements stats.Handler.
func (calls) HandleConn(context.Context, stats.ConnStats) {}

// count counts a refusal for reason.
func (a *admission) count(reason string) { a.refused.WithLabelValues(reason).Inc() }

// refuse counts a refusal and logs it when its kind was not logged for
// the peer within auditEvery.
func (a *admission) refuse(ctx context.Context, method, reason, who string, code codes.Code) {
	a.refused.WithLabelValues(reason).Inc()
	a.audit.denied(ctx, method, reason, who, code)
}

// guardedServices are the services every call of which passes the whole
// admission: all but health and reflection.
var guardedServices = []grpc.ServiceDesc{setpointv1.AutoscalerService_ServiceDesc, setpointv1.FleetService_ServiceDesc, setpointv1.AdminService_ServiceDesc, consolev1.SessionService_ServiceDesc, consolev1.ReplayService_ServiceDesc}

// guardedMethod reports whether a full method name is one of
// guardedServices'.
func guardedMethod(full string) bool {
	service, _, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	return ok && isGuarded(service)
}

// isGuarded reports whether service is one of guardedServices.
func isGuarded(service string) bool {
	for _, sd := range guardedServices {
		if sd.ServiceName == service {
			return true
		}
	}
	return false
}

// errClientCertRequired answers a caller without a verified client
// certificate when Config.RequireClientCert is set.
var errClientCertRequired = status.Error(codes.Unauthenticated, "authentication required: a verified client certificate")

// peerIP is the IP address of ctx's peer without its port ("" when
// unknown).
func peerIP(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return p.Addr.String()
	}
	return host
}

// sampledAudit writes audit records of refusals, at most one per peer
// address, method and reason per auditEvery, each with the number of
// refusals it stands for.
type sampledAudit struct {
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex
	last map[string]*sample
}

// sample is the state of one kind of refusal.
type sample struct {
	at         time.Time
	suppressed int
}

func newSampledAudit(log *slog.Logger, now func() time.Time) *sampledAudit {
	return &sampledAudit{log: log, now: now, last: map[string]*sample{}}
}

// denied logs a refusal unless one of its kind was logged recently.
func (s *sampledAudit) denied(ctx context.Context, method, reason, who string, code codes.Code) {
	ip, now := peerIP(ctx), s.now()
	key := ip + "\x00" + method + "\x00" + reason + "\x00" + who
	s.mu.Lock()
	e, ok := s.last[key]
	if ok && now.Sub(e.at) < auditEvery {
		e.suppressed++
		s.mu.Unlock()
		return
	}
	if !ok {
		if len(s.last) >= maxBuckets {
			clear(s.last)
		}
		e = &sample{}
		s.last[key] = e
	}
	count := e.suppressed + 1
	e.at, e.suppressed = now, 0
	s.mu.Unlock()
	principal := ""
	if p, ok := auth.PrincipalFrom(ctx); ok {
		principal, who = p.Name, reason
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "audit",
		slog.String("event", "denied"),
		slog.String("principal", principal),
		slog.String("method", method),
		slog.String("outcome", code.String()),
		slog.String("reason", who),
		slog.String("peer", ip),
		slog.Int("count", count),
	)
}

// newFairness returns the per-principal bounds and queues of a server
// configured by o, telling refused of each refusal.
func newFairness(o Config, refused func(string)) *fairness.Fairness {
	return fairness.New(o.Bounds, refused, principalName, requestBytes)
}

// principalName names the principal of ctx's call; false without one.
func principalName(ctx context.Context) (string, bool) {
	p, ok := auth.PrincipalFrom(ctx)
	return p.Name, ok
}
