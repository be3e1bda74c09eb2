package main

// The HTTP address (-metrics-listen): /metrics and the web console, in
// plaintext or, with -metrics-tls, over TLS with the gRPC certificate.

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/setpointhq/setpoint/internal/netaddr"
	"github.com/setpointhq/setpoint/server"
)

// validateMetricsTLS checks -metrics-tls against the flags it depends on.
func (c *Config) validateMetricsTLS() error {
	switch {
	case !c.MetricsTLS:
		return nil
	case c.MetricsListen == "":
		return errors.New("-metrics-tls needs -metrics-listen (empty disables the HTTP address)")
	case c.InsecureDev:
		return errors.New("-insecure-dev serves plaintext: drop -metrics-tls")
	case c.TLSCert == "" || c.TLSKey == "":
		return errors.New("-metrics-tls needs -tls-cert and -tls-key (the HTTP address serves the gRPC certificate)")
	}
	return nil
}

// serveHTTP serves /metrics and the console on cfg.MetricsListen, over TLS
// with grpcTLS's certificate when cfg.MetricsTLS, until stop is called.
// It returns the address it listens on.
func serveHTTP(cfg Config, srv *server.Server, m []prometheus.Collector, grpcTLS *tls.Config, log *slog.Logger) (addr string, stop func() error, err error) {
	if cfg.MetricsTLS && grpcTLS == nil {
		return "", nil, errors.New("-metrics-tls needs -tls-cert and -tls-key")
	}
	warnPlaintextHTTP(cfg, log)
	lis, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(srv, m))
	mux.Handle("/console/", srv.ConsoleHandler())
	mux.Handle("/{$}", http.RedirectHandler("/console/", http.StatusFound))
	hs := &http.Server{
		Handler: mux,
		// net/http also bounds a connection's TLS handshake with it, so
		// -handshake-timeout bounds the handshakes of both addresses.
		ReadHeaderTimeout: cfg.Tenancy.HandshakeTimeout,
		IdleTimeout:       cfg.Tenancy.MaxConnectionIdle,
		// The gRPC port's header-list limit (server.Options.MaxHeaderListSize).
		MaxHeaderBytes: server.DefaultMaxHeaderListSize,
		// Handshake failures and handler panics, in the server's log.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if cfg.MetricsTLS {
		scheme, hs.TLSConfig = "https", httpTLSConfig(grpcTLS)
		go func() { _ = hs.ServeTLS(lis, "", "") }()
	} else {
		go func() { _ = hs.Serve(lis) }()
	}
	addr = lis.Addr().String()
	log.Info("metrics and console listening", "metrics", scheme+"://"+addr+"/metrics", "console", scheme+"://"+addr+"/console/",
		"tls", cfg.MetricsTLS)
	return addr, hs.Close, nil
}

// httpTLSConfig derives the HTTP address's TLS configuration from the gRPC
// one, whose certificate, key and client CA reloads it shares: it offers
// HTTP/1.1 besides HTTP/2, and verifies a client certificate when one is
// presented but never requires one, since browsers sign in with a bearer
// token.
func httpTLSConfig(grpcTLS *tls.Config) *tls.Config {
	adapt := func(c *tls.Config) *tls.Config {
		c = c.Clone()
		c.NextProtos = []string{"h2", "http/1.1"}
		if c.ClientAuth == tls.RequireAndVerifyClientCert {
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
		return c
	}
	out := adapt(grpcTLS)
	if get := grpcTLS.GetConfigForClient; get != nil {
		out.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if err != nil || c == nil {
				return c, err
			}
			return adapt(c), nil
		}
	}
	return out
}

// warnPlaintextHTTP warns when bearer tokens sent to the HTTP address
// would cross the network in clear: authentication is on, the address is
// not loopback and it serves plaintext. It does not refuse: a /metrics-only
// address, or one behind a TLS-terminating proxy, is plaintext on purpose.
func warnPlaintextHTTP(cfg Config, log *slog.Logger) {
	if cfg.InsecureDev || cfg.MetricsTLS || cfg.MetricsListen == "" || netaddr.Loopback(cfg.MetricsListen) {
		return
	}
	log.Warn("the HTTP address (/metrics, console) is plaintext and not loopback: console bearer tokens would cross the network in clear; serve it with -metrics-tls, or behind a TLS-terminating proxy",
		"plaintext_http", true, "metrics_listen", cfg.MetricsListen)
}
