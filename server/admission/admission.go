// Package admission is what every call of Setpoint's gRPC server passes
// before its handler: the tap handle that admits a call before its body is
// read, the stats handler that follows it to its end, and the interceptor
// chain. Every transport (the gRPC port, the console's door) goes through
// it; package server wires it with New and Gate.ServerOptions.
//
// Before a call's body is read, gRPC's tap handle (tap.go) admits it: for
// the guarded services (with an Authenticator) a verified client
// certificate's identity or a bearer token names a principal, else
// Unauthenticated; then the per-principal rate limit (token bucket:
// ResourceExhausted with a google.rpc.RetryInfo), and for callers without
// a principal a per-peer-address one; then the principal's call is held
// (package fairness) until its end. A refused caller costs its headers;
// refusals are counted in setpoint_server_refused_total and their audit is
// sampled. Health and reflection need no credentials.
//
// Every admitted call then passes one explicit interceptor chain
// (interceptors.go), outermost first: metrics, the access log
// (accesslog.go), the rejection of undecodable requests (package codec), a
// deadline for unary calls without one (deadline.go), authentication and
// authorization against the policy table (auth_policy.go), the request
// limits and size budgets (limit.go), the audit of decisions, validation,
// fairness (package fairness), the in-flight bound on Recommend, and
// recovery, last.
//
// The stats handler (calls, tap.go) gives back at each call's end the call
// the tap handle held and the memory of its response (ResponseMemory), and
// announces each write to the store until its handler hands it to the
// store (Arrived) or the call ends (arrivals.go).
package admission

import (
	"context"
	"log/slog"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/setpointhq/setpoint/server/auth"
	"github.com/setpointhq/setpoint/server/fairness"
	"google.golang.org/grpc"
)

// Config is what the admission of a server needs, its defaults applied by
// the caller.
type Config struct {
	// Auth authenticates callers; nil: no authentication nor authorization.
	Auth *auth.Authenticator
	// RequireClientCert refuses callers without a verified client
	// certificate.
	RequireClientCert bool
	// RateLimit is the calls per second of one principal (RateBurst at
	// once); 0: no per-principal rate limit.
	RateLimit float64
	// RateBurst is the calls one principal may make at once.
	RateBurst int
	// PeerRateLimit is the calls per second of one peer address without a
	// principal (PeerRateBurst at once); 0: not limited.
	PeerRateLimit float64
	// PeerRateBurst is the calls one peer address without a principal may
	// make at once.
	PeerRateBurst int
	// Bounds are the per-principal bounds and queues (package fairness).
	Bounds fairness.Bounds
	// Limits bound the lists and sizes of one request.
	Limits RequestLimits
	// MaxInFlightRecommends bounds the Recommend calls in flight.
	MaxInFlightRecommends int
	// CallTimeout is the deadline of unary calls that arrive without one
	// (≤ 0: none).
	CallTimeout time.Duration
	// Expect, when set, is told of each write call from the moment it is
	// admitted until its handler hands it to the store (Arrived) or the
	// call ends (store.Store.Expect).
	Expect func(n int)
	// Metrics are the gRPC server metrics the chain records.
	Metrics *grpcprom.ServerMetrics
	// Logger receives the access log, the audit and logged errors.
	Logger *slog.Logger
	// Now is the clock of the rate limits and the sampled audit.
	Now func() time.Time
	// ToStatus maps the error of a request's Validate method to the
	// status the caller is answered.
	ToStatus func(context.Context, *slog.Logger, error) error
}

// Gate is the admission of one server: its tap handle, stats handler and
// interceptor chain.
type Gate struct {
	opts []grpc.ServerOption
}

// New returns the admission configured by c; it registers
// setpoint_server_refused_total with reg.
func New(c Config, reg prometheus.Registerer) *Gate {
	g := &guard{auth: c.Auth, audit: auditor{log: c.Logger}}
	if c.RateLimit > 0 {
		g.rates = newRateLimiter(c.RateLimit, c.RateBurst, c.Now)
	}
	var adm *admission
	fair := newFairness(c, func(reason string) { adm.count(reason) })
	adm = newAdmission(c, g.rates, fair, reg)
	opts := append(chain(chainConfig{
		metrics:     c.Metrics,
		log:         c.Logger,
		guard:       g,
		limits:      c.Limits,
		inFlight:    make(chan struct{}, c.MaxInFlightRecommends),
		fair:        fair,
		refused:     func(reason string) { adm.count(reason) },
		callTimeout: c.CallTimeout,
		toStatus:    c.ToStatus,
	}),
		grpc.InTapHandle(adm.tap), // tap.go: authentication and rate limits before the body is read
		grpc.StatsHandler(calls{fair: fair, expect: c.Expect}),
	)
	return &Gate{opts: opts}
}

// ServerOptions returns the gRPC server options installing the admission:
// the interceptor chain, the tap handle and the stats handler.
func (g *Gate) ServerOptions() []grpc.ServerOption { return g.opts }
