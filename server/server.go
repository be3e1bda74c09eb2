package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/admission"
	"github.com/setpointhq/setpoint/server/budget"
	"github.com/setpointhq/setpoint/server/codec"
	"github.com/setpointhq/setpoint/server/console"
	"github.com/setpointhq/setpoint/server/door"
	"github.com/setpointhq/setpoint/server/fairness"
	"github.com/setpointhq/setpoint/server/fleets"
	"github.com/setpointhq/setpoint/server/simulate"
	"github.com/setpointhq/setpoint/server/transport"
	"github.com/setpointhq/setpoint/server/watch"
	"github.com/setpointhq/setpoint/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// Defaults of Options.
const (
	DefaultMaxRecvMsgSize        = 16 << 20
	DefaultMaxConcurrentStreams  = 1024
	DefaultMaxInFlightRecommends = 256
	DefaultMaxPodsPerRequest     = 10000
	DefaultMaxMetricsPerRequest  = 50
	DefaultKeepaliveMinTime      = 10 * time.Second
	DefaultKeepaliveTime         = time.Minute
	DefaultKeepaliveTimeout      = 20 * time.Second
	DefaultExpireAfter           = 168 * time.Hour
	DefaultExpireInterval        = time.Hour
	DefaultShutdownTimeout       = 30 * time.Second
	DefaultHandshakeTimeout      = 10 * time.Second
	DefaultMaxConnectionIdle     = 15 * time.Minute
	DefaultMaxConnectionAge      = 30 * time.Minute
	DefaultMaxConnectionAgeGrace = time.Minute
	DefaultStreamWindow          = 64 << 10
	DefaultStreamWorkers         = 64
	DefaultMaxHeaderListSize     = 64 << 10
	DefaultHeaderTimeout         = 10 * time.Second
)

// Defaults of the per-principal bounds in Options (package fairness's).
const (
	DefaultFairSlots                = fairness.DefaultFairSlots
	DefaultMaxRunningPerPrincipal   = fairness.DefaultMaxRunningPerPrincipal
	DefaultMaxCallsPerPrincipal     = fairness.DefaultMaxCallsPerPrincipal
	DefaultMaxBytesPerPrincipal     = fairness.DefaultMaxBytesPerPrincipal
	DefaultMaxSimulatesPerPrincipal = fairness.DefaultMaxSimulatesPerPrincipal
	DefaultMaxStreamsPerPrincipal   = fairness.DefaultMaxStreamsPerPrincipal
)

// Defaults of the admission in Options (package admission's):
// Options.CallTimeout, and Options.PeerRateLimit when Auth is set.
const (
	DefaultCallTimeout   = admission.DefaultCallTimeout
	DefaultPeerRateLimit = admission.DefaultPeerRateLimit
)

// Watch's names (package watch's): Options.WatchBuffer's default, the
// size of Options.ResumeKey, and the header naming the revision a stream
// starts after.
const (
	DefaultWatchBuffer = watch.DefaultWatchBuffer
	ResumeKeySize      = watch.ResumeKeySize
	RevisionHeader     = watch.RevisionHeader
)

// Defaults of the Simulate limits in Options (package simulate's).
const (
	DefaultMaxSimulateSteps = simulate.DefaultMaxSimulateSteps
	DefaultMaxSimulatePods  = simulate.DefaultMaxSimulatePods
)

// Defaults of the size budgets (Options.MaxStringBytes, MaxListEntries,
// MaxSpecBytes: package budget's) and of MaxResponseBytes.
const (
	DefaultMaxStringBytes = budget.DefaultMaxStringBytes
	DefaultMaxListEntries = budget.DefaultMaxListEntries
	DefaultMaxSpecBytes   = budget.DefaultMaxSpecBytes
	// DefaultMaxResponseBytes bounds a ListTargets page: below the 4 MiB
	// a gRPC client receives by default (Go, grpc-js, setpointctl).
	DefaultMaxResponseBytes = 3 << 20
)

// Options configure a Server. The zero value selects every default.
type Options struct {
	// Now is the server clock; time.Now when nil. Every decision and
	// observation is stamped with it.
	Now func() time.Time
	// Logger receives the server's logs; slog.Default() when nil.
	Logger *slog.Logger
	// Auth authenticates callers (client certificates and bearer tokens)
	// and enables authorization; nil disables both (every caller may call
	// everything): a development and in-process test mode.
	Auth *Authenticator
	// TLS, when set, serves TLS (see NewTLSConfig for a configuration
	// that reloads rotated certificates); nil serves plaintext.
	TLS *tls.Config
	// RateLimit is each principal's sustained rate of calls, per second;
	// 0 disables rate limiting. Calls without a principal are limited by
	// PeerRateLimit instead.
	RateLimit float64
	// RateBurst is how many calls a principal may make at once above the
	// rate; max(1, RateLimit) when zero.
	RateBurst int
	// MaxRecvMsgSize is the largest request accepted, in bytes.
	MaxRecvMsgSize int
	// MaxPodsPerRequest bounds the pods, pod metrics and per-pod metric
	// values of one request (per step for Simulate).
	MaxPodsPerRequest int
	// MaxMetricsPerRequest bounds the spec metrics and metric observations
	// of one request (per step for Simulate).
	MaxMetricsPerRequest int
	// MaxConcurrentStreams bounds the concurrent calls of one connection.
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is the shortest interval between a client's
	// keepalive pings the server tolerates (also without calls in flight);
	// a client pinging more often is disconnected (GOAWAY
	// ENHANCE_YOUR_CALM, "too_many_pings").
	KeepaliveMinTime time.Duration
	// KeepaliveTime is how long a connection may be idle before the server
	// pings the client; KeepaliveTimeout is how long it waits for the
	// answer before closing the connection.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxInFlightRecommends bounds the Recommend calls in flight; more
	// fail with ResourceExhausted.
	MaxInFlightRecommends int
	// ExpireAfter is how long a target not seen by Recommend or Observe is
	// kept; negative disables expiry.
	ExpireAfter time.Duration
	// ExpireInterval is how often expired targets are removed.
	ExpireInterval time.Duration
	// CallTimeout is the deadline of a unary call that arrives without
	// one: past it the call ends with DeadlineExceeded (a write may or may
	// not have been made). 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// ShutdownTimeout is how long Serve waits for calls in flight at
	// shutdown before closing their connections.
	ShutdownTimeout time.Duration
	// NewID returns a new decision ID; 16 random bytes in hex when nil.
	NewID func() string
	// MaxSimulateSteps bounds the steps of one Simulate call; more fail
	// with InvalidArgument naming steps. 0 means DefaultMaxSimulateSteps.
	MaxSimulateSteps int
	// WatchBuffer is the number of changes buffered for one Watch stream;
	// a stream that falls further behind is ended with Aborted and resumes.
	// 0 means DefaultWatchBuffer.
	WatchBuffer int
	// ResumeKey is the secret under which the Watch resume points of
	// callers that may not read every cluster are sealed (at least 16
	// bytes; ResumeKeySize is what setpoint-server keeps). Points made
	// under one key are refused under another: servers behind one address
	// share it, and a server keeps it across restarts so its callers can
	// resume. nil means a random key for this process.
	ResumeKey []byte
	// MaxSimulatePods bounds the pods a Simulate pod model synthesizes
	// (spec.max_replicas, initial and step replica counts). 0 means
	// DefaultMaxSimulatePods.
	MaxSimulatePods int
	// PeerRateLimit is the sustained rate, per second, of the calls one
	// peer address may make without a principal: refused authentications
	// (DefaultPeerRateLimit when 0 and Auth is set), or every call of a
	// server without Auth (unlimited when 0). Negative disables it.
	PeerRateLimit float64
	// PeerRateBurst is how many such calls may come at once;
	// max(1, 2×PeerRateLimit) when zero.
	PeerRateBurst int
	// HandshakeTimeout bounds a new connection's TLS and HTTP/2 handshake;
	// 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// RequireClientCert refuses callers without a verified client
	// certificate, bearer tokens alone included: on the gRPC port TLS
	// (RequireAndVerifyClientCert) refuses them at the handshake; the
	// console's calls, which pass the same admission, are refused
	// Unauthenticated.
	RequireClientCert bool
	// MaxHeaderListSize bounds a request's HTTP/2 header list, in bytes (as
	// HPACK counts it): a larger one closes the connection before it is
	// decoded. 0 means DefaultMaxHeaderListSize.
	MaxHeaderListSize uint32
	// HeaderTimeout bounds how long a request's HTTP/2 header block may
	// stay unfinished (a HEADERS frame and its CONTINUATION frames); a
	// connection with a block open longer is closed. Requests are
	// authenticated only once their headers are complete, so this bounds
	// what an anonymous connection holds. 0 means DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// StreamWindow is each stream's HTTP/2 flow-control window, in bytes
	// (a connection's is four times it): what a refused call may send
	// before the refusal reaches it. 0 means DefaultStreamWindow.
	StreamWindow int
	// MaxConnectionIdle is how long a connection without calls is kept;
	// 0 means DefaultMaxConnectionIdle.
	MaxConnectionIdle time.Duration
	// MaxConnectionAge is how long a connection is kept before the server
	// asks its client to reconnect (GOAWAY; calls in flight finish within
	// MaxConnectionAgeGrace, Watch streams are then closed and resume), so
	// clients balancing over several replicas find added ones. 0 means
	// DefaultMaxConnectionAge; negative keeps connections for ever.
	MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace bounds how long calls in flight may run after
	// MaxConnectionAge; 0 means DefaultMaxConnectionAgeGrace.
	MaxConnectionAgeGrace time.Duration
	// FairSlots is how many unary calls of the guarded services run at
	// once; the others wait in one queue per principal, served in turn (see
	// package fairness). 0 means DefaultFairSlots.
	FairSlots int
	// MaxRunningPerPrincipal is how many unary calls of one principal run
	// at once; 0 means DefaultMaxRunningPerPrincipal.
	MaxRunningPerPrincipal int
	// MaxCallsPerPrincipal bounds one principal's unary calls running or
	// waiting; 0 means DefaultMaxCallsPerPrincipal.
	MaxCallsPerPrincipal int
	// MaxBytesPerPrincipal bounds the encoded bytes of one principal's
	// unary requests running or waiting (one request alone always
	// passes); 0 means DefaultMaxBytesPerPrincipal.
	MaxBytesPerPrincipal int
	// MaxSimulates bounds the Simulate calls running at once, of all
	// principals; 0 means max(1, GOMAXPROCS/2).
	MaxSimulates int
	// MaxSimulatesPerPrincipal bounds one principal's Simulate calls
	// running or waiting; 0 means DefaultMaxSimulatesPerPrincipal.
	MaxSimulatesPerPrincipal int
	// MaxStreamsPerPrincipal bounds one principal's open streams; 0 means
	// DefaultMaxStreamsPerPrincipal.
	MaxStreamsPerPrincipal int
	// MaxStringBytes bounds every string of a request; 0 means
	// DefaultMaxStringBytes.
	MaxStringBytes int
	// MaxListEntries bounds every list and map of a request that no other
	// limit bounds; 0 means DefaultMaxListEntries.
	MaxListEntries int
	// MaxSpecBytes bounds the encoded spec of a Recommend, what a target
	// stores; 0 means DefaultMaxSpecBytes.
	MaxSpecBytes int
	// MaxResponseBytes bounds the encoded size of a ListTargets page; 0
	// means DefaultMaxResponseBytes.
	MaxResponseBytes int
	// StreamWorkers is how many goroutines serve calls and are kept
	// between them (gRPC's stream workers), so a call runs on a stack
	// already grown by earlier ones instead of growing a new goroutine's;
	// a call arriving while all are busy (a Watch stream holds one for its
	// life) gets a goroutine of its own. They live while Serve runs. 0
	// means DefaultStreamWorkers; negative starts none (a goroutine per
	// call).
	StreamWorkers int
}

// Server is Setpoint's gRPC server: the AutoscalerService, the standard
// health service and reflection, behind the interceptor chain described in
// the package documentation.
type Server struct {
	// grpc is built by Serve (its stream workers live as long as Serve
	// runs) from grpcOpts, with the services register registers.
	grpc     *grpc.Server
	grpcOpts []grpc.ServerOption
	health   *health.Server
	registry *prometheus.Registry
	store    store.Store
	hub      *watch.Hub
	svc      *service
	fleets   *fleets.Service
	// door is the console's in-memory listener to the gRPC server and
	// console its client connection over it (package transport), while Serve runs.
	door    transport.Door
	console atomic.Pointer[grpc.ClientConn]
	// serving is closed by Serve once the console's connection is set and
	// the gRPC server is registered (Serving).
	serving chan struct{}
	now     func() time.Time
	log     *slog.Logger
	opts    Options
}

// New returns a server over st. It fails when st is nil or its change feed
// cannot be followed (Watch and the feed metrics need it). The server
// follows the feed from New on and stops when Serve returns. The caller
// keeps ownership of st and closes it after Serve returns.
func New(st store.Store, o Options) (*Server, error) {
	if st == nil {
		return nil, errors.New("server: no store")
	}
	o = o.withDefaults()
	metrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	gate := admission.New(admission.Config{
		Auth: o.Auth, RequireClientCert: o.RequireClientCert,
		RateLimit: o.RateLimit, RateBurst: o.RateBurst,
		PeerRateLimit: o.PeerRateLimit, PeerRateBurst: o.PeerRateBurst,
		Bounds: fairness.Bounds{
			Slots: o.FairSlots, MaxRunning: o.MaxRunningPerPrincipal, MaxCalls: o.MaxCallsPerPrincipal, MaxBytes: o.MaxBytesPerPrincipal,
			Simulates: o.MaxSimulates, MaxSimulates: o.MaxSimulatesPerPrincipal, MaxStreams: o.MaxStreamsPerPrincipal,
		},
		Limits: admission.RequestLimits{MaxPods: o.MaxPodsPerRequest, MaxMetrics: o.MaxMetricsPerRequest,
			Budgets: budget.Budgets{MaxString: o.MaxStringBytes, MaxEntries: o.MaxListEntries, MaxSpec: o.MaxSpecBytes}},
		MaxInFlightRecommends: o.MaxInFlightRecommends,
		CallTimeout:           o.CallTimeout,
		Expect:                st.Expect, // each write call, until its handler reaches the store
		Metrics:               metrics,
		Logger:                o.Logger,
		Now:                   o.Now,
		ToStatus:              toStatus,
	}, registry)
	opts := append(gate.ServerOptions(),
		grpc.MaxRecvMsgSize(o.MaxRecvMsgSize),
		grpc.MaxConcurrentStreams(o.MaxConcurrentStreams),
		grpc.ForceServerCodecV2(codec.Codec()), // package codec: generated code; undecodable requests are InvalidArgument (with Registrar)
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: o.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: o.KeepaliveTime, Timeout: o.KeepaliveTimeout,
			MaxConnectionIdle: o.MaxConnectionIdle, MaxConnectionAge: connectionAge(o.MaxConnectionAge), MaxConnectionAgeGrace: o.MaxConnectionAgeGrace}),
		grpc.ConnectionTimeout(o.HandshakeTimeout),
		// Static flow-control windows (no BDP growth): a call refused before
		// its body is read has sent at most one stream window.
		grpc.InitialWindowSize(int32(o.StreamWindow)),
		grpc.InitialConnWindowSize(int32(4*o.StreamWindow)),
	)
	base := insecure.NewCredentials()
	if o.TLS != nil {
		base = credentials.NewTLS(o.TLS)
	}
	opts = append(opts, grpc.Creds(transport.Creds(base, o.HeaderTimeout)),
		grpc.MaxHeaderListSize(o.MaxHeaderListSize))
	if o.StreamWorkers > 0 {
		opts = append(opts, grpc.NumStreamWorkers(uint32(o.StreamWorkers)))
	}
	s := &Server{
		serving:  make(chan struct{}),
		grpcOpts: opts,
		health:   health.NewServer(),
		registry: registry,
		store:    st,
		now:      o.Now,
		log:      o.Logger,
		opts:     o,
	}
	svcMetrics := newMetrics(registry)
	h, err := watch.NewHub(context.Background(), st, o.WatchBuffer, svcMetrics.watchCutoffs.Inc)
	if err != nil {
		return nil, fmt.Errorf("server: follow the store's change feed: %w", err)
	}
	registerFeedMetrics(registry, h, st)
	s.hub = h
	resume, err := watch.NewResumePoints(o.ResumeKey)
	if err != nil {
		h.Close()
		return nil, err
	}
	svc := &service{
		store: st, now: o.Now, newID: o.NewID, log: o.Logger,
		authenticated:    o.Auth != nil,
		limits:           simulate.Limits{MaxSteps: o.MaxSimulateSteps, MaxPods: o.MaxSimulatePods},
		metrics:          svcMetrics,
		maxResponseBytes: o.MaxResponseBytes,
	}
	svc.watch = &watch.Streams{
		Hub: s.hub, Resume: resume, Authenticated: o.Auth != nil,
		Log: o.Logger, ToStatus: toStatus, MayRead: svc.mayRead, Open: svcMetrics.watchStreams,
	}
	s.svc = svc
	s.fleets = &fleets.Service{
		Store: st, Now: o.Now, NewID: o.NewID, Log: o.Logger,
		Authenticated: o.Auth != nil,
		Limits:        svc.limits,
		ToStatus:      toStatus,
		EngineField:   func(f string) string { return apiField(f, recommendRequest) },
	}
	s.door = transport.NewDoor(door.Buffer)
	services := serviceSet{}
	s.register(services)
	metrics.InitializeMetrics(services)
	s.health.SetServingStatus(setpointv1.AutoscalerService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(setpointv1.FleetService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return s, nil
}

// register registers the server's services with r: AutoscalerService,
// FleetService, AdminService, the console's SessionService and
// ReplayService, health and reflection.
func (s *Server) register(r reflection.GRPCServer) {
	setpointv1.RegisterAutoscalerServiceServer(r, s.svc)
	setpointv1.RegisterFleetServiceServer(r, s.fleets)
	setpointv1.RegisterAdminServiceServer(r, &admin{store: s.store, log: s.log})
	consolev1.RegisterSessionServiceServer(r, session{})
	consolev1.RegisterReplayServiceServer(r, replayer{svc: s.svc})
	healthpb.RegisterHealthServer(r, s.health)
	reflection.Register(r)
}

// serviceSet collects the services a Server registers, described as a
// gRPC server describes them, before Serve builds the gRPC server: New
// initializes the gRPC metrics of every method from it.
type serviceSet map[string]grpc.ServiceInfo

// RegisterService implements grpc.ServiceRegistrar.
func (ss serviceSet) RegisterService(sd *grpc.ServiceDesc, _ any) {
	info := grpc.ServiceInfo{Metadata: sd.Metadata}
	for _, m := range sd.Methods {
		info.Methods = append(info.Methods, grpc.MethodInfo{Name: m.MethodName})
	}
	for _, st := range sd.Streams {
		info.Methods = append(info.Methods, grpc.MethodInfo{Name: st.StreamName, IsClientStream: st.ClientStreams, IsServerStream: st.ServerStreams})
	}
	ss[sd.ServiceName] = info
}

// GetServiceInfo implements reflection.ServiceInfoProvider.
func (ss serviceSet) GetServiceInfo() map[string]grpc.ServiceInfo { return ss }

// SetServing says whether the server can serve (its store is reachable):
// the gRPC health service answers SERVING or NOT_SERVING, for the server
// as a whole and for the autoscaler and fleet services.
func (s *Server) SetServing(ok bool) {
	status := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		status = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", status)
	s.health.SetServingStatus(setpointv1.AutoscalerService_ServiceDesc.ServiceName, status)
	s.health.SetServingStatus(setpointv1.FleetService_ServiceDesc.ServiceName, status)
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxRecvMsgSize <= 0 {
		o.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if o.RateBurst <= 0 {
		o.RateBurst = max(1, int(o.RateLimit))
	}
	if o.MaxPodsPerRequest <= 0 {
		o.MaxPodsPerRequest = DefaultMaxPodsPerRequest
	}
	if o.MaxMetricsPerRequest <= 0 {
		o.MaxMetricsPerRequest = DefaultMaxMetricsPerRequest
	}
	if o.KeepaliveMinTime <= 0 {
		o.KeepaliveMinTime = DefaultKeepaliveMinTime
	}
	if o.KeepaliveTime <= 0 {
		o.KeepaliveTime = DefaultKeepaliveTime
	}
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if o.MaxInFlightRecommends <= 0 {
		o.MaxInFlightRecommends = DefaultMaxInFlightRecommends
	}
	if o.ExpireAfter == 0 {
		o.ExpireAfter = DefaultExpireAfter
	}
	if o.ExpireInterval <= 0 {
		o.ExpireInterval = DefaultExpireInterval
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = DefaultWatchBuffer
	}
	if o.MaxSimulateSteps <= 0 {
		o.MaxSimulateSteps = DefaultMaxSimulateSteps
	}
	if o.MaxSimulatePods <= 0 {
		o.MaxSimulatePods = DefaultMaxSimulatePods
	}
	if o.NewID == nil {
		o.NewID = randomID
	}
	if o.PeerRateLimit == 0 && o.Auth != nil {
		o.PeerRateLimit = DefaultPeerRateLimit
	}
	if o.PeerRateBurst <= 0 {
		o.PeerRateBurst = max(1, int(2*o.PeerRateLimit))
	}
	o.HandshakeTimeout = positiveOr(o.HandshakeTimeout, DefaultHandshakeTimeout)
	if o.MaxHeaderListSize == 0 {
		o.MaxHeaderListSize = DefaultMaxHeaderListSize
	}
	o.HeaderTimeout = positiveOr(o.HeaderTimeout, DefaultHeaderTimeout)
	o.CallTimeout = positiveOr(o.CallTimeout, DefaultCallTimeout)
	o.StreamWindow = min(positiveOr(o.StreamWindow, DefaultStreamWindow), 1<<28)
	o.MaxConnectionIdle = positiveOr(o.MaxConnectionIdle, DefaultMaxConnectionIdle)
	if o.MaxConnectionAge == 0 {
		o.MaxConnectionAge = DefaultMaxConnectionAge
	}
	o.MaxConnectionAgeGrace = positiveOr(o.MaxConnectionAgeGrace, DefaultMaxConnectionAgeGrace)
	o.FairSlots = positiveOr(o.FairSlots, DefaultFairSlots)
	o.MaxRunningPerPrincipal = positiveOr(o.MaxRunningPerPrincipal, DefaultMaxRunningPerPrincipal)
	o.MaxCallsPerPrincipal = positiveOr(o.MaxCallsPerPrincipal, DefaultMaxCallsPerPrincipal)
	o.MaxBytesPerPrincipal = positiveOr(o.MaxBytesPerPrincipal, DefaultMaxBytesPerPrincipal)
	o.MaxSimulates = positiveOr(o.MaxSimulates, max(1, runtime.GOMAXPROCS(0)/2))
	o.MaxSimulatesPerPrincipal = positiveOr(o.MaxSimulatesPerPrincipal, DefaultMaxSimulatesPerPrincipal)
	o.MaxStreamsPerPrincipal = positiveOr(o.MaxStreamsPerPrincipal, DefaultMaxStreamsPerPrincipal)
	o.MaxStringBytes = positiveOr(o.MaxStringBytes, DefaultMaxStringBytes)
	o.MaxListEntries = positiveOr(o.MaxListEntries, DefaultMaxListEntries)
	o.MaxSpecBytes = positiveOr(o.MaxSpecBytes, DefaultMaxSpecBytes)
	o.MaxResponseBytes = positiveOr(o.MaxResponseBytes, DefaultMaxResponseBytes)
	if o.StreamWorkers == 0 {
		o.StreamWorkers = DefaultStreamWorkers
	}
	return o
}

// randomID returns 16 random bytes in hex.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// Collector returns the server's Prometheus metrics (gRPC, service, Go
// and process), e.g. to describe them or to register them elsewhere.
func (s *Server) Collector() prometheus.Collector { return s.registry }

// MetricsHandler serves the server's Prometheus metrics.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry})
}

// Serve serves on lis until ctx ends, then shuts down gracefully: health
// turns NOT_SERVING, calls in flight finish (for at most
// Options.ShutdownTimeout), and Serve returns. It returns nil after a
// shutdown and the listener's error otherwise. A Server serves once.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	var wg sync.WaitGroup
	expireCtx, stopExpire := context.WithCancel(ctx)
	defer func() { stopExpire(); wg.Wait() }()
	if s.opts.ExpireAfter > 0 {
		wg.Go(func() { s.expireLoop(expireCtx) })
	}
	// Built here, not in New: its stream workers start with it and end
	// when it stops, and every way out of Serve stops it.
	s.grpc = grpc.NewServer(s.grpcOpts...)
	s.register(codec.Registrar(s.grpc))
	console, err := door.Dial(s.door.Listener, s.opts.MaxRecvMsgSize)
	if err != nil {
		return err
	}
	s.console.Store(console)
	defer func() { s.console.Store(nil); console.Close() }()
	close(s.serving)
	go func() { _ = s.grpc.Serve(s.door) }() // ends when s.grpc stops
	served := make(chan error, 1)
	go func() { served <- s.grpc.Serve(lis) }()
	select {
	case err := <-served:
		s.health.Shutdown()
		s.closeWatches()
		s.grpc.Stop() // its workers
		if errors.Is(err, grpc.ErrServerStopped) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	s.shutdown()
	// A shutdown that wins the race with grpc.Serve's start makes Serve
	// report ErrServerStopped: that is a clean stop too.
	if err := <-served; !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Serving is closed once Serve has set up what it serves: from then on
// the gRPC server takes calls on Serve's listener and the console's
// endpoints reach it (before, they answer Unavailable). Harnesses wait on
// it before their first call.
func (s *Server) Serving() <-chan struct{} { return s.serving }

// shutdown turns health NOT_SERVING and stops the gRPC server, gracefully
// for at most Options.ShutdownTimeout.
func (s *Server) shutdown() {
	s.health.Shutdown()
	s.closeWatches() // Watch streams never end by themselves
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	t := time.NewTimer(s.opts.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("graceful stop timed out; closing connections", "timeout", s.opts.ShutdownTimeout)
		s.grpc.Stop()
		<-done
	}
}

// closeWatches ends every Watch stream (Unavailable: resume elsewhere or
// later) and stops following the store.
func (s *Server) closeWatches() {
	s.hub.Close()
}

// expireLoop removes the targets not seen for Options.ExpireAfter: one
// pass as Serve starts (so that a server restarted more often than
// Options.ExpireInterval still expires), then one every ExpireInterval,
// until ctx ends. A failed pass is logged and the next runs as planned.
// It is the only expiry loop: the store has none, and every server of a
// shared store runs its own.
func (s *Server) expireLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.ExpireInterval)
	defer t.Stop()
	for {
		cutoff := s.now().Add(-s.opts.ExpireAfter)
		n, err := s.store.Expire(ctx, cutoff)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Error("expire targets", "err", err)
		case n > 0:
			s.log.Info("expired targets", "count", n, "not_seen_since", cutoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ConsoleHandler serves the web console under /console/ (package
// console): its pages, and its JSON endpoints, each of which makes its
// calls through the server's own admission, as the browser (package transport).
// Without Options.Auth everyone sees everything, and the page says so.
func (s *Server) ConsoleHandler() http.Handler {
	return console.Handler(console.Options{Conn: s.console.Load, Authenticated: s.opts.Auth != nil})
}

// connectionAge is gRPC's MaxConnectionAge for age: none (gRPC's infinity)
// when age is negative.
func connectionAge(age time.Duration) time.Duration {
	if age < 0 {
		return time.Duration(math.MaxInt64)
	}
	return age
}

// positiveOr is v when positive, def otherwise.
func positiveOr[T int | int64 | float64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Codec is the server's protobuf codec: the generated code of each
// message (codec.Codec).
func Codec() encoding.CodecV2 { return codec.Codec() }

// DecodeOptions are the gRPC server options that decode requests as the
// server does (codec.DecodeOptions; register services through
// codec.Registrar): setpoint-bench's no-op baseline pays what the server
// pays to decode.
func DecodeOptions() []grpc.ServerOption { return codec.DecodeOptions() }
