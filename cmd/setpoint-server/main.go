// Command setpoint-server runs Setpoint's gRPC service.
//
// It serves TLS and authenticates every caller: -tls-cert and -tls-key
// are required, -tls-client-ca verifies agents' client certificates
// (mutual TLS), and -auth-config names the principals file mapping
// certificate identities and bearer-token digests to principals. All three
// are reloaded when they change. Without them it refuses to start, unless
// -insecure-dev asks for the development mode: plaintext and, without
// -auth-config, no authentication; it says so loudly in its log.
//
//	go run ./cmd/setpoint-server -insecure-dev          # a developer's machine
//	setpoint-server -listen :7443 -tls-cert tls.crt -tls-key tls.key \
//	    -tls-client-ca clients-ca.crt -auth-config principals.yaml \
//	    -metrics-listen :9090 -metrics-tls
//
// By default it listens on 127.0.0.1:7443 (gRPC) and 127.0.0.1:7444
// (/metrics and the web console; plaintext unless -metrics-tls) and keeps
// its data in ./setpoint-data/setpoint.db, created on first start.
// Limits (per-principal rate, message size, pods and metrics per request,
// streams per connection, keepalive) are flags; see docs/security.md.
// SIGTERM or SIGINT shuts it down gracefully.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/setpointhq/setpoint/internal/netaddr"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
)

// Config is setpoint-server's configuration.
type Config struct {
	// Listen is the gRPC address.
	Listen string
	// MetricsListen is the address of /metrics and the web console;
	// empty disables it.
	MetricsListen string
	// MetricsTLS serves MetricsListen over TLS with the gRPC certificate
	// (http.go).
	MetricsTLS bool
	// DataDir holds the store file, setpoint.db; created when missing.
	DataDir string
	// InsecureDev serves plaintext gRPC, without authentication unless
	// AuthConfig is set: a development mode, announced loudly.
	InsecureDev bool
	// TLSCert and TLSKey are the server's certificate and key (PEM),
	// required unless InsecureDev.
	TLSCert, TLSKey string
	// TLSClientCA verifies client certificates (mutual TLS).
	TLSClientCA string
	// TLSRequireClientCert refuses clients without a certificate.
	TLSRequireClientCert bool
	// AuthConfig is the principals file, required unless InsecureDev.
	AuthConfig string
	// ReloadInterval is how often the certificate and principals files
	// are checked for changes.
	ReloadInterval time.Duration
	// RateLimit is each principal's sustained rate, in calls per second
	// (0: unlimited).
	RateLimit float64
	// RateBurst is how many calls a principal may make at once.
	RateBurst int
	// MaxRecvMsgSize is the largest request accepted, in bytes.
	MaxRecvMsgSize int
	// MaxPodsPerRequest and MaxMetricsPerRequest bound the pods and the
	// metrics of one request.
	MaxPodsPerRequest, MaxMetricsPerRequest int
	// MaxConcurrentStreams bounds the concurrent calls per connection.
	MaxConcurrentStreams uint
	// MaxInFlightRecommends bounds the Recommend calls in flight.
	MaxInFlightRecommends int
	// KeepaliveMinTime is the shortest ping interval tolerated from a
	// client; KeepaliveTime and KeepaliveTimeout time the server's pings
	// of idle connections.
	KeepaliveMinTime, KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxConnectionAge is how long a client connection is kept before the
	// client is asked to reconnect; negative keeps it for ever.
	MaxConnectionAge time.Duration
	// StreamWorkers is how many goroutines are kept to serve calls;
	// negative serves each call on a new goroutine.
	StreamWorkers int
	// ExpireAfter is how long a target not seen is kept.
	ExpireAfter time.Duration
	// ExpireInterval is how often expired targets are removed.
	ExpireInterval time.Duration
	// ShutdownTimeout bounds the graceful shutdown.
	ShutdownTimeout time.Duration
	// CallTimeout is the deadline of unary calls that arrive without one.
	CallTimeout time.Duration
	// MaxSimulateSteps bounds the steps of one Simulate call, and
	// MaxSimulatePods the pods its pod model may synthesize.
	MaxSimulateSteps, MaxSimulatePods int
	// WatchBuffer is how many changes one Watch stream may fall behind
	// before it is ended with where to resume.
	WatchBuffer int
	// MaxChanges is how many recent changes the bbolt store keeps for
	// Watch streams to resume from (on etcd, etcd's compaction decides).
	MaxChanges int
	// CheckpointInterval bounds how long the bbolt store's journaled
	// writes wait to be written into its file
	// (boltstore.Options.CheckpointInterval).
	CheckpointInterval time.Duration
	// JournalSegmentBytes is the bbolt store's journal size past which it
	// starts a new segment (boltstore.Options.JournalSegmentBytes).
	JournalSegmentBytes int64
	// ResumeKeyFile holds the secret that seals tenants' Watch resume
	// points (server.Options.ResumeKey); empty means resume.key in
	// DataDir, created on first start.
	ResumeKeyFile string
	// Tenancy keeps tenants apart (tenancy.go).
	Tenancy Tenancy
	// DecisionRetention is how long each target's decision log keeps a
	// decision; negative keeps none.
	DecisionRetention time.Duration
	// Store selects the bbolt file or etcd (etcd.go).
	Store StoreConfig
}

// Defaults of the flags that have none in package server. The rate fits
// one agent (a cluster principal) with 15,000 Autoscalers at the 15 s sync
// period: it calls Recommend N/15 times a second, plus Observe after a
// rescale, so 1,000 calls/s serve 15,000 that rarely rescale and 7,500 that
// rescale at every reconcile (docs/security.md, "Limits").
const (
	defaultRateLimit = 1000
	defaultRateBurst = 2000
)

// RegisterFlags registers the configuration's flags, with their defaults,
// on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:7443", "gRPC listen address (host:port)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "127.0.0.1:7444", "address of /metrics and the web console (host:port); empty disables it")
	fs.BoolVar(&c.MetricsTLS, "metrics-tls", false, "serve -metrics-listen over TLS with -tls-cert and -tls-key, verifying client certificates against -tls-client-ca when presented (never required there)")
	fs.StringVar(&c.DataDir, "data-dir", "setpoint-data", "directory of the store file setpoint.db (created when missing)")
	fs.BoolVar(&c.InsecureDev, "insecure-dev", false, "DEVELOPMENT ONLY: serve plaintext gRPC, without authentication unless -auth-config is set")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "server certificate (PEM); required unless -insecure-dev; reloaded when it changes")
	fs.StringVar(&c.TLSKey, "tls-key", "", "server private key (PEM); reloaded when it changes")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", "", "CA bundle (PEM) verifying client certificates (mutual TLS); reloaded when it changes")
	fs.BoolVar(&c.TLSRequireClientCert, "tls-require-client-cert", false, "refuse clients without a certificate (no bearer-token-only callers), on the gRPC port at the handshake and in the web console (whose TLS asks for a certificate but cannot require one of browsers that sign in with a token): console requests without one are refused 401")
	fs.StringVar(&c.AuthConfig, "auth-config", "", "principals file (docs/security.md); required unless -insecure-dev; reloaded when it changes")
	fs.DurationVar(&c.ReloadInterval, "reload-interval", server.DefaultReloadInterval, "how often certificate and principals files are checked for changes")
	fs.Float64Var(&c.RateLimit, "rate-limit", defaultRateLimit, "calls per second each principal may sustain; 0 disables")
	fs.IntVar(&c.RateBurst, "rate-burst", defaultRateBurst, "calls a principal may make at once above -rate-limit")
	fs.IntVar(&c.MaxRecvMsgSize, "max-recv-msg-size", server.DefaultMaxRecvMsgSize, "largest request accepted, in bytes")
	fs.IntVar(&c.MaxPodsPerRequest, "max-pods-per-request", server.DefaultMaxPodsPerRequest, "pods (and pod metrics) one request may carry")
	fs.IntVar(&c.MaxMetricsPerRequest, "max-metrics-per-request", server.DefaultMaxMetricsPerRequest, "metrics (spec metrics, observations) one request may carry")
	fs.UintVar(&c.MaxConcurrentStreams, "max-concurrent-streams", server.DefaultMaxConcurrentStreams, "concurrent calls per connection")
	fs.IntVar(&c.MaxInFlightRecommends, "max-inflight-recommends", server.DefaultMaxInFlightRecommends, "Recommend calls in flight before ResourceExhausted")
	fs.DurationVar(&c.KeepaliveMinTime, "keepalive-min-time", server.DefaultKeepaliveMinTime, "clients pinging more often are disconnected (too_many_pings)")
	fs.DurationVar(&c.KeepaliveTime, "keepalive-time", server.DefaultKeepaliveTime, "ping a client after its connection is idle this long")
	fs.IntVar(&c.StreamWorkers, "stream-workers", server.DefaultStreamWorkers, "goroutines kept to serve calls, whose grown stacks later calls reuse (negative: a new goroutine per call)")
	fs.DurationVar(&c.MaxConnectionAge, "max-connection-age", server.DefaultMaxConnectionAge, "ask a client to reconnect after its connection is this old, so agents spread over replicas find added ones (negative: never)")
	fs.DurationVar(&c.KeepaliveTimeout, "keepalive-timeout", server.DefaultKeepaliveTimeout, "close a connection whose ping is not answered within this")
	fs.DurationVar(&c.ExpireAfter, "expire-after", server.DefaultExpireAfter, "forget targets not seen for this long")
	fs.DurationVar(&c.ExpireInterval, "expire-interval", server.DefaultExpireInterval, "how often to forget expired targets")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long to wait for calls in flight at shutdown")
	fs.DurationVar(&c.CallTimeout, "call-timeout", server.DefaultCallTimeout, "deadline of a call that arrives without one (Watch and Backup streams excepted): past it, as when a stalled disk holds a write, the call ends DEADLINE_EXCEEDED")
	fs.IntVar(&c.MaxSimulateSteps, "max-simulate-steps", server.DefaultMaxSimulateSteps, "steps one Simulate call may carry")
	fs.IntVar(&c.MaxSimulatePods, "max-simulate-pods", server.DefaultMaxSimulatePods, "pods a Simulate pod model may synthesize (bounds max_replicas)")
	fs.IntVar(&c.WatchBuffer, "watch-buffer", server.DefaultWatchBuffer, "changes a Watch stream may fall behind before it is ended with where to resume")
	fs.IntVar(&c.MaxChanges, "max-changes", boltstore.DefaultMaxChanges, "recent changes kept on disk for Watch streams to resume from (bbolt; with -store=etcd, etcd's compaction decides)")
	fs.Int64Var(&c.JournalSegmentBytes, "journal-segment-bytes", boltstore.DefaultJournalSegmentBytes, "size past which the store's journal starts a new segment, the old one removed once written into the bbolt file: larger leaves more to replay after a crash")
	fs.DurationVar(&c.CheckpointInterval, "checkpoint-interval", boltstore.DefaultCheckpointInterval, "longest a decision waits in the store's journal before it is written into the bbolt file: longer holds more in memory and in the journal to replay after a crash, shorter costs CPU (bbolt)")
	fs.StringVar(&c.ResumeKeyFile, "resume-key-file", "", "file of the secret that seals tenants' Watch resume points (default: resume.key in -data-dir, created on first start; give every server behind one address the same file)")
	c.Tenancy.RegisterFlags(fs)
	c.Store.RegisterFlags(fs)
	fs.DurationVar(&c.DecisionRetention, "decision-retention", store.DefaultDecisionRetention, "how long each target's decision log (ListDecisions, the console's timeline) keeps a decision; negative keeps none")
}

// Validate checks the configuration's values.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("-listen: %w", err))
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			errs = append(errs, fmt.Errorf("-metrics-listen: %w", err))
		}
	}
	errs = append(errs, c.validateMetricsTLS())
	if c.DataDir == "" {
		errs = append(errs, errors.New("-data-dir: must be set"))
	}
	tlsSet := c.TLSCert != "" || c.TLSKey != "" || c.TLSClientCA != "" || c.TLSRequireClientCert
	switch {
	case c.InsecureDev && tlsSet:
		errs = append(errs, errors.New("-insecure-dev serves plaintext: drop the -tls-* flags"))
	case !c.InsecureDev && (c.TLSCert == "" || c.TLSKey == ""):
		errs = append(errs, errors.New("-tls-cert and -tls-key are required (or -insecure-dev, for development only)"))
	case c.TLSRequireClientCert && c.TLSClientCA == "":
		errs = append(errs, errors.New("-tls-require-client-cert needs -tls-client-ca"))
	}
	if !c.InsecureDev && c.AuthConfig == "" {
		errs = append(errs, errors.New("-auth-config is required (or -insecure-dev, for development only)"))
	}
	if c.ReloadInterval <= 0 {
		errs = append(errs, errors.New("-reload-interval must be > 0"))
	}
	if c.RateLimit < 0 || c.RateBurst < 0 || (c.RateLimit > 0 && c.RateBurst == 0) {
		errs = append(errs, errors.New("-rate-limit must be >= 0 (0 disables) and -rate-burst > 0"))
	}
	if c.MaxRecvMsgSize <= 0 || c.MaxPodsPerRequest <= 0 || c.MaxMetricsPerRequest <= 0 || c.MaxConcurrentStreams == 0 || c.MaxConcurrentStreams > 1<<31 || c.MaxInFlightRecommends <= 0 {
		errs = append(errs, errors.New("-max-recv-msg-size, -max-pods-per-request, -max-metrics-per-request, -max-concurrent-streams and -max-inflight-recommends must be > 0"))
	}
	if c.KeepaliveMinTime <= 0 || c.KeepaliveTime <= 0 || c.KeepaliveTimeout <= 0 {
		errs = append(errs, errors.New("-keepalive-min-time, -keepalive-time and -keepalive-timeout must be > 0"))
	}
	if c.StreamWorkers == 0 || c.StreamWorkers > 1<<16 {
		errs = append(errs, errors.New("-stream-workers must be between 1 and 65536, or negative for a new goroutine per call"))
	}
	if c.MaxSimulateSteps <= 0 || c.MaxSimulatePods <= 0 || c.WatchBuffer <= 0 || c.MaxChanges <= 0 {
		errs = append(errs, errors.New("-max-simulate-steps, -max-simulate-pods, -watch-buffer and -max-changes must be > 0"))
	}
	if c.CheckpointInterval <= 0 || c.JournalSegmentBytes <= 0 {
		errs = append(errs, errors.New("-checkpoint-interval and -journal-segment-bytes must be > 0"))
	}
	if c.ExpireAfter <= 0 || c.ExpireInterval <= 0 || c.ShutdownTimeout <= 0 || c.CallTimeout <= 0 {
		errs = append(errs, errors.New("-expire-after, -expire-interval, -shutdown-timeout and -call-timeout must be > 0"))
	}
	errs = append(errs, c.Tenancy.Validate(), c.Store.Validate())
	return errors.Join(errs...)
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var cfg Config
	fs := flag.NewFlagSet("setpoint-server", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-server:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg, log, nil); err != nil {
		log.Error("setpoint-server failed", "err", err)
		os.Exit(1)
	}
}

// listening are the addresses a started server listens on; http is empty
// when -metrics-listen is.
type listening struct{ grpc, http string }

// run serves cfg until ctx ends. ready, when set, receives the addresses
// once the server listens.
func run(ctx context.Context, cfg Config, log *slog.Logger, ready chan<- listening) (err error) {
	opts := server.Options{
		Logger:                log,
		RateLimit:             cfg.RateLimit,
		RateBurst:             cfg.RateBurst,
		MaxRecvMsgSize:        cfg.MaxRecvMsgSize,
		MaxPodsPerRequest:     cfg.MaxPodsPerRequest,
		MaxMetricsPerRequest:  cfg.MaxMetricsPerRequest,
		MaxConcurrentStreams:  uint32(cfg.MaxConcurrentStreams),
		MaxInFlightRecommends: cfg.MaxInFlightRecommends,
		KeepaliveMinTime:      cfg.KeepaliveMinTime,
		KeepaliveTime:         cfg.KeepaliveTime,
		KeepaliveTimeout:      cfg.KeepaliveTimeout,
		MaxConnectionAge:      cfg.MaxConnectionAge,
		StreamWorkers:         cfg.StreamWorkers,
		ExpireAfter:           cfg.ExpireAfter,
		ExpireInterval:        cfg.ExpireInterval,
		ShutdownTimeout:       cfg.ShutdownTimeout,
		CallTimeout:           cfg.CallTimeout,
		MaxSimulateSteps:      cfg.MaxSimulateSteps,
		MaxSimulatePods:       cfg.MaxSimulatePods,
		WatchBuffer:           cfg.WatchBuffer,
	}
	cfg.Tenancy.apply(&opts)
	if opts.Now, err = serverClock(log); err != nil {
		return err
	}
	reload := server.ReloadOptions{Interval: cfg.ReloadInterval, Logger: log}
	if cfg.AuthConfig != "" {
		if opts.Auth, err = server.NewAuthenticator(cfg.AuthConfig, reload); err != nil {
			return err
		}
	}
	if !cfg.InsecureDev {
		opts.TLS, err = server.NewTLSConfig(server.TLSFiles{Cert: cfg.TLSCert, Key: cfg.TLSKey, ClientCA: cfg.TLSClientCA, RequireClientCert: cfg.TLSRequireClientCert}, reload)
		opts.RequireClientCert = cfg.TLSRequireClientCert
		if err != nil {
			return err
		}
	} else {
		log.Warn("INSECURE DEVELOPMENT MODE (-insecure-dev): gRPC is plaintext; never use this outside a developer's machine",
			"insecure", true, "authentication", opts.Auth != nil, "listen", cfg.Listen)
		if host, _, _ := net.SplitHostPort(cfg.Listen); !netaddr.LoopbackHost(host) {
			log.Warn("INSECURE DEVELOPMENT MODE on a non-loopback address: other machines can reach this plaintext server", "insecure", true, "listen", cfg.Listen)
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	st, closeStore, storeMetrics, where, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeStore(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	// After the store: its lock keeps a second server on the same data
	// directory from making a key of its own.
	if opts.ResumeKey, err = resumeKey(cfg); err != nil {
		return err
	}
	srv, err := server.New(st, opts)
	if err != nil {
		return err
	}
	go watchHealth(ctx, st.Healthy, srv.SetServing, log)
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	addrs := listening{grpc: lis.Addr().String()}
	if cfg.MetricsListen != "" {
		var stopHTTP func() error
		if addrs.http, stopHTTP, err = serveHTTP(cfg, srv, storeMetrics, opts.TLS, log); err != nil {
			lis.Close()
			return err
		}
		defer stopHTTP()
	}
	log.Info("setpoint-server listening", "addr", lis.Addr().String(), "tls", opts.TLS != nil,
		"mutual_tls", cfg.TLSClientCA != "", "auth", opts.Auth != nil, "data", where)
	if ready != nil {
		ready <- addrs
	}
	err = srv.Serve(ctx, lis)
	log.Info("setpoint-server stopped")
	return err
}

// resumeKey reads the secret that seals tenants' Watch resume points from
// cfg.ResumeKeyFile, or from resume.key in the data directory, which it
// creates (ResumeKeySize random bytes, mode 0600) when missing. The file
// appears whole and durable or not at all: it is written and synced under
// a temporary name, then linked into place and the directory synced, so a
// power cut never leaves a short key behind.
func resumeKey(cfg Config) ([]byte, error) {
	path := cfg.ResumeKeyFile
	if path == "" {
		path = filepath.Join(cfg.DataDir, "resume.key")
		if err := createResumeKey(path); err != nil {
			return nil, fmt.Errorf("-resume-key-file: create %s: %w", path, err)
		}
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-resume-key-file: %w", err)
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("-resume-key-file: %s holds %d bytes; the secret needs at least 16 (e.g. head -c 32 /dev/urandom > %s)", path, len(key), path)
	}
	return key, nil
}

// createResumeKey writes a new random secret to path unless a file is
// there already.
func createResumeKey(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	key := make([]byte, server.ResumeKeySize)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".resume.key.*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The caller holds the store's lock on the data directory, so no
	// other server makes a key there meanwhile.
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EINVAL) {
		err = nil // a filesystem that cannot sync a directory (FUSE ones)
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
