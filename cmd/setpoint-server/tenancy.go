package main

import (
	"errors"
	"flag"
	"time"

	"github.com/setpointhq/setpoint/server"
)

// Tenancy is the configuration that keeps tenants from slowing, breaking
// or starving each other: size budgets, per-principal bounds and fair
// queueing, the admission of callers without credentials, and connection
// timeouts (docs/security.md, "Limits").
type Tenancy struct {
	// MaxStringBytes, MaxListEntries, MaxSpecBytes and MaxResponseBytes
	// are the size budgets (server.Options).
	MaxStringBytes, MaxListEntries, MaxSpecBytes, MaxResponseBytes int
	// FairSlots, MaxRunningPerPrincipal, MaxCallsPerPrincipal,
	// MaxBytesPerPrincipal, MaxSimulates, MaxSimulatesPerPrincipal and
	// MaxStreamsPerPrincipal are the fairness bounds (server.Options).
	FairSlots, MaxRunningPerPrincipal, MaxCallsPerPrincipal, MaxBytesPerPrincipal int
	MaxSimulates, MaxSimulatesPerPrincipal, MaxStreamsPerPrincipal                int
	// PeerRateLimit and PeerRateBurst limit the calls of one peer address
	// without a principal.
	PeerRateLimit float64
	PeerRateBurst int
	// HandshakeTimeout bounds a connection's handshake; MaxConnectionIdle
	// closes connections without calls. Both apply to the gRPC and the
	// HTTP address (http.go).
	HandshakeTimeout, MaxConnectionIdle time.Duration
	// StreamWindow is each stream's flow-control window, in bytes.
	StreamWindow int
	// HeaderTimeout bounds how long a gRPC request's header block may stay
	// unfinished.
	HeaderTimeout time.Duration
}

// RegisterFlags registers the tenancy flags on fs, with their defaults.
func (c *Tenancy) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.MaxStringBytes, "max-string-bytes", server.DefaultMaxStringBytes, "longest string of a request (selectors, label values, names, messages), in bytes")
	fs.IntVar(&c.MaxListEntries, "max-list-entries", server.DefaultMaxListEntries, "most entries of a request's lists and maps not bounded otherwise (match labels and expressions, values, containers)")
	fs.IntVar(&c.MaxSpecBytes, "max-spec-bytes", server.DefaultMaxSpecBytes, "largest encoded spec a target stores, in bytes")
	fs.IntVar(&c.MaxResponseBytes, "max-response-bytes", server.DefaultMaxResponseBytes, "largest ListTargets page, in bytes (keep below the clients' 4 MiB receive limit)")
	fs.IntVar(&c.FairSlots, "fair-slots", server.DefaultFairSlots, "calls running at once; the others wait in one queue per principal, served in turn")
	fs.IntVar(&c.MaxRunningPerPrincipal, "max-running-per-principal", server.DefaultMaxRunningPerPrincipal, "calls of one principal running at once")
	fs.IntVar(&c.MaxCallsPerPrincipal, "max-calls-per-principal", server.DefaultMaxCallsPerPrincipal, "calls of one principal running or queued before ResourceExhausted")
	fs.IntVar(&c.MaxBytesPerPrincipal, "max-bytes-per-principal", server.DefaultMaxBytesPerPrincipal, "request bytes of one principal running or queued before ResourceExhausted")
	fs.IntVar(&c.MaxSimulates, "max-simulates", 0, "Simulate calls running at once, of all principals (0: half the CPUs, at least 1)")
	fs.IntVar(&c.MaxSimulatesPerPrincipal, "max-simulates-per-principal", server.DefaultMaxSimulatesPerPrincipal, "Simulate calls of one principal at once")
	fs.IntVar(&c.MaxStreamsPerPrincipal, "max-streams-per-principal", server.DefaultMaxStreamsPerPrincipal, "open streams (Watch, Backup) of one principal")
	fs.Float64Var(&c.PeerRateLimit, "peer-rate-limit", 0, "calls per second one peer address may make without a principal: refused authentications (0: 10), or every call when run without -auth-config (0: unlimited); negative disables")
	fs.IntVar(&c.PeerRateBurst, "peer-rate-burst", 0, "calls a peer address may make at once without a principal (0: twice -peer-rate-limit)")
	fs.DurationVar(&c.HandshakeTimeout, "handshake-timeout", server.DefaultHandshakeTimeout, "longest TLS and HTTP/2 handshake of a new connection; on the HTTP address (-metrics-listen), also the longest wait for a request's headers")
	fs.DurationVar(&c.HeaderTimeout, "header-timeout", server.DefaultHeaderTimeout, "longest a gRPC request's HTTP/2 header block may stay unfinished before its connection is closed (header lists over 64 KiB close it at once)")
	fs.IntVar(&c.StreamWindow, "stream-window", server.DefaultStreamWindow, "HTTP/2 flow-control window of each stream, in bytes (a connection's is 4x): what a refused call may send before its refusal")
	fs.DurationVar(&c.MaxConnectionIdle, "max-connection-idle", server.DefaultMaxConnectionIdle, "close a connection without calls (on the HTTP address: without requests) after this long")
}

// Validate checks the tenancy values.
func (c *Tenancy) Validate() error {
	if c.MaxStringBytes <= 0 || c.MaxListEntries <= 0 || c.MaxSpecBytes <= 0 || c.MaxResponseBytes <= 0 {
		return errors.New("-max-string-bytes, -max-list-entries, -max-spec-bytes and -max-response-bytes must be > 0")
	}
	if c.FairSlots <= 0 || c.MaxRunningPerPrincipal <= 0 || c.MaxCallsPerPrincipal <= 0 || c.MaxBytesPerPrincipal <= 0 ||
		c.MaxSimulates < 0 || c.MaxSimulatesPerPrincipal <= 0 || c.MaxStreamsPerPrincipal <= 0 {
		return errors.New("-fair-slots, -max-running-per-principal, -max-calls-per-principal, -max-bytes-per-principal, -max-simulates-per-principal and -max-streams-per-principal must be > 0, -max-simulates >= 0")
	}
	if c.PeerRateBurst < 0 || c.HandshakeTimeout <= 0 || c.HeaderTimeout <= 0 || c.MaxConnectionIdle <= 0 || c.StreamWindow < 64<<10 || c.StreamWindow > 1<<28 {
		return errors.New("-peer-rate-burst must be >= 0, -handshake-timeout, -header-timeout and -max-connection-idle > 0, -stream-window within [64 KiB, 256 MiB]")
	}
	return nil
}

// apply sets the tenancy options of o.
func (c *Tenancy) apply(o *server.Options) {
	o.MaxStringBytes, o.MaxListEntries, o.MaxSpecBytes, o.MaxResponseBytes = c.MaxStringBytes, c.MaxListEntries, c.MaxSpecBytes, c.MaxResponseBytes
	o.FairSlots, o.MaxRunningPerPrincipal, o.MaxCallsPerPrincipal, o.MaxBytesPerPrincipal = c.FairSlots, c.MaxRunningPerPrincipal, c.MaxCallsPerPrincipal, c.MaxBytesPerPrincipal
	o.MaxSimulates, o.MaxSimulatesPerPrincipal, o.MaxStreamsPerPrincipal = c.MaxSimulates, c.MaxSimulatesPerPrincipal, c.MaxStreamsPerPrincipal
	o.PeerRateLimit, o.PeerRateBurst = c.PeerRateLimit, c.PeerRateBurst
	o.HandshakeTimeout, o.MaxConnectionIdle, o.StreamWindow = c.HandshakeTimeout, c.MaxConnectionIdle, c.StreamWindow
	o.HeaderTimeout = c.HeaderTimeout
}
