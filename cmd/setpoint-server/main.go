// Command setpoint-server runs Setpoint's gRPC service.
//
// With no flags it listens on 127.0.0.1:7443 (gRPC, plaintext, no
// authentication: loopback only) and 127.0.0.1:7444 (/metrics), and keeps
// its data in ./setpoint-data/setpoint.db, created on first start:
//
//	go run ./cmd/setpoint-server
//
// Off loopback, authentication is required: -token-file names a JSON file
// mapping bearer tokens to principals (see server.LoadTokens), unless
// -allow-unauthenticated says otherwise. -tls-cert and -tls-key serve TLS;
// -tls-client-ca also requires client certificates (mutual TLS).
// SIGTERM or SIGINT shuts it down gracefully.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
)

// Config is setpoint-server's configuration.
type Config struct {
	// Listen is the gRPC address.
	Listen string
	// MetricsListen is the address of the /metrics endpoint; empty
	// disables it.
	MetricsListen string
	// DataDir holds the store file, setpoint.db; created when missing.
	DataDir string
	// TokenFile enables authentication with the tokens it lists.
	TokenFile string
	// AllowUnauthenticated permits serving without TokenFile off loopback.
	AllowUnauthenticated bool
	// TLSCert and TLSKey are the server's certificate and key (PEM).
	TLSCert, TLSKey string
	// TLSClientCA, when set, requires client certificates signed by it.
	TLSClientCA string
	// MaxRecvMsgSize is the largest request accepted, in bytes.
	MaxRecvMsgSize int
	// MaxConcurrentStreams bounds the concurrent calls per connection.
	MaxConcurrentStreams uint
	// MaxInFlightRecommends bounds the Recommend calls in flight.
	MaxInFlightRecommends int
	// ExpireAfter is how long a target not seen is kept.
	ExpireAfter time.Duration
	// ExpireInterval is how often expired targets are removed.
	ExpireInterval time.Duration
	// ShutdownTimeout bounds the graceful shutdown.
	ShutdownTimeout time.Duration
}

// RegisterFlags registers the configuration's flags, with their defaults,
// on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:7443", "gRPC listen address (host:port)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "127.0.0.1:7444", "Prometheus /metrics listen address; empty disables it")
	fs.StringVar(&c.DataDir, "data-dir", "setpoint-data", "directory of the store file setpoint.db (created when missing)")
	fs.StringVar(&c.TokenFile, "token-file", "", "JSON file of bearer tokens and principals; enables authentication")
	fs.BoolVar(&c.AllowUnauthenticated, "allow-unauthenticated", false, "serve without -token-file on a non-loopback address")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "server certificate (PEM); with -tls-key enables TLS")
	fs.StringVar(&c.TLSKey, "tls-key", "", "server private key (PEM)")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", "", "CA (PEM) of required client certificates (mutual TLS)")
	fs.IntVar(&c.MaxRecvMsgSize, "max-recv-msg-size", server.DefaultMaxRecvMsgSize, "largest request accepted, in bytes")
	fs.UintVar(&c.MaxConcurrentStreams, "max-concurrent-streams", server.DefaultMaxConcurrentStreams, "concurrent calls per connection")
	fs.IntVar(&c.MaxInFlightRecommends, "max-inflight-recommends", server.DefaultMaxInFlightRecommends, "Recommend calls in flight before ResourceExhausted")
	fs.DurationVar(&c.ExpireAfter, "expire-after", server.DefaultExpireAfter, "forget targets not seen for this long")
	fs.DurationVar(&c.ExpireInterval, "expire-interval", server.DefaultExpireInterval, "how often to forget expired targets")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long to wait for calls in flight at shutdown")
}

// Validate checks the configuration's values.
func (c *Config) Validate() error {
	var errs []error
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("-listen: %w", err))
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			errs = append(errs, fmt.Errorf("-metrics-listen: %w", err))
		}
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("-data-dir: must be set"))
	}
	if err == nil && c.TokenFile == "" && !c.AllowUnauthenticated && !loopback(host) {
		errs = append(errs, fmt.Errorf("-listen %s is not loopback: set -token-file (or -allow-unauthenticated)", c.Listen))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("-tls-cert and -tls-key must be set together"))
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		errs = append(errs, errors.New("-tls-client-ca requires -tls-cert and -tls-key"))
	}
	if c.MaxRecvMsgSize <= 0 || c.MaxConcurrentStreams == 0 || c.MaxConcurrentStreams > 1<<31 || c.MaxInFlightRecommends <= 0 {
		errs = append(errs, errors.New("-max-recv-msg-size, -max-concurrent-streams and -max-inflight-recommends must be > 0"))
	}
	if c.ExpireAfter <= 0 || c.ExpireInterval <= 0 || c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("-expire-after, -expire-interval and -shutdown-timeout must be > 0"))
	}
	return errors.Join(errs...)
}

// loopback reports whether host is a loopback address or "localhost".
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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

// run serves cfg until ctx ends. ready, when set, receives the gRPC
// address once the server listens.
func run(ctx context.Context, cfg Config, log *slog.Logger, ready chan<- string) (err error) {
	opts := server.Options{
		Logger:                log,
		MaxRecvMsgSize:        cfg.MaxRecvMsgSize,
		MaxConcurrentStreams:  uint32(cfg.MaxConcurrentStreams),
		MaxInFlightRecommends: cfg.MaxInFlightRecommends,
		ExpireAfter:           cfg.ExpireAfter,
		ExpireInterval:        cfg.ExpireInterval,
		ShutdownTimeout:       cfg.ShutdownTimeout,
	}
	if cfg.TokenFile != "" {
		if opts.Tokens, err = server.LoadTokens(cfg.TokenFile); err != nil {
			return err
		}
	}
	if opts.TLS, err = tlsConfig(cfg); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(cfg.DataDir, "setpoint.db")
	st, err := store.Open(path, store.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	srv := server.New(st, opts)
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	if cfg.MetricsListen != "" {
		mlis, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			lis.Close()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", srv.MetricsHandler())
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(mlis) }()
		defer hs.Close()
		log.Info("metrics listening", "addr", "http://"+mlis.Addr().String()+"/metrics")
	}
	abs, _ := filepath.Abs(path)
	log.Info("setpoint-server listening", "addr", lis.Addr().String(), "tls", opts.TLS != nil,
		"auth", opts.Tokens != nil, "data", abs)
	if ready != nil {
		ready <- lis.Addr().String()
	}
	err = srv.Serve(ctx, lis)
	log.Info("setpoint-server stopped")
	return err
}

// tlsConfig returns the server's TLS configuration; nil without TLS.
func tlsConfig(cfg Config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		tc.ClientCAs = x509.NewCertPool()
		if !tc.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA %s: no PEM certificate", cfg.TLSClientCA)
		}
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}
