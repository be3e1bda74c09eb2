package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/etcdstore"
)

// StoreConfig selects where the history is kept: a bbolt file in
// -data-dir (the default) or etcd, shared by several servers
// (docs/scale-out.md).
type StoreConfig struct {
	// Kind is "bolt" or "etcd".
	Kind string
	// Endpoints are the etcd client URLs, comma-separated.
	Endpoints string
	// Cert, Key and CA are the etcd client certificate, its key and the
	// CA verifying etcd's certificate (PEM); all empty for plaintext.
	Cert, Key, CA string
	// Prefix is put before every key the store writes in etcd.
	Prefix string
	// CompactEvery is how often the servers compact etcd's history (the
	// change feed Watch resumes from); 0 leaves it to etcd.
	CompactEvery time.Duration
}

// RegisterFlags registers the store's flags on fs.
func (c *StoreConfig) RegisterFlags(fs interface {
	StringVar(p *string, name, value, usage string)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}) {
	fs.StringVar(&c.Kind, "store", "bolt", `where the history is kept: "bolt" (a file in -data-dir) or "etcd" (shared by several servers; see -etcd-*)`)
	fs.StringVar(&c.Endpoints, "etcd-endpoints", "", "etcd client URLs, comma-separated (with -store=etcd)")
	fs.StringVar(&c.Cert, "etcd-cert", "", "etcd client certificate (PEM)")
	fs.StringVar(&c.Key, "etcd-key", "", "etcd client private key (PEM)")
	fs.StringVar(&c.CA, "etcd-ca", "", "CA bundle (PEM) verifying etcd's certificate")
	fs.StringVar(&c.Prefix, "etcd-prefix", etcdstore.DefaultPrefix, "prefix of every key the server writes in etcd")
	fs.DurationVar(&c.CompactEvery, "etcd-compact-every", 5*time.Minute, "how often the servers compact etcd's whole history, keeping at least this much for Watch to resume from (as a Kubernetes API server does); 0 leaves it to etcd's --auto-compaction-retention")
}

// Validate checks the store flags.
func (c *StoreConfig) Validate() error {
	switch c.Kind {
	case "bolt":
		if c.Endpoints != "" || c.Cert != "" || c.Key != "" || c.CA != "" {
			return errors.New("-etcd-* flags need -store=etcd")
		}
	case "etcd":
		if c.Endpoints == "" {
			return errors.New("-store=etcd needs -etcd-endpoints")
		}
		if (c.Cert == "") != (c.Key == "") {
			return errors.New("-etcd-cert and -etcd-key go together")
		}
		if c.Prefix == "" {
			return errors.New("-etcd-prefix must not be empty")
		}
		if c.CompactEvery < 0 {
			return errors.New("-etcd-compact-every must be ≥ 0")
		}
	default:
		return fmt.Errorf("-store: %q is neither bolt nor etcd", c.Kind)
	}
	return nil
}

// storeMetrics are the etcd store's request latencies and conflicts,
// served with the server's own on /metrics.
type storeMetrics struct {
	latency   *prometheus.HistogramVec
	conflicts *prometheus.CounterVec
}

func newStoreMetrics() *storeMetrics {
	m := &storeMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "setpoint_etcd_request_duration_seconds",
			Help:    "Latency of the store's etcd requests, by operation (read, commit, get, list, delete, changes, count, revision, compact).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"op"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "setpoint_etcd_conflicts_total",
			Help: "Store transactions that lost a race for their target to another writer and were retried, by operation (commit, delete).",
		}, []string{"op"}),
	}
	for _, op := range []string{"commit", "delete"} {
		m.conflicts.WithLabelValues(op) // exported at 0 before the first
	}
	return m
}

func (m *storeMetrics) observe(op string, d time.Duration, conflict bool) {
	m.latency.WithLabelValues(op).Observe(d.Seconds())
	if conflict {
		m.conflicts.WithLabelValues(op).Inc()
	}
}

// metricsHandler serves srv's metrics and the store's, m, in Prometheus'
// text format.
func metricsHandler(srv *server.Server, m []prometheus.Collector) http.Handler {
	if len(m) == 0 {
		return srv.MetricsHandler()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(srv.Collector())
	reg.MustRegister(m...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// openStore opens the configured store; close releases it (and the etcd
// client). metrics are the store's, for /metrics. where describes the
// store for the log.
func openStore(ctx context.Context, cfg Config, log *slog.Logger) (st store.Store, close func() error, metrics []prometheus.Collector, where string, err error) {
	opts := boltstore.Options{MaxChanges: cfg.MaxChanges, DecisionRetention: cfg.DecisionRetention, CheckpointInterval: cfg.CheckpointInterval, JournalSegmentBytes: cfg.JournalSegmentBytes}
	if cfg.Store.Kind != "etcd" {
		path := filepath.Join(cfg.DataDir, "setpoint.db")
		m := newBoltMetrics()
		opts.ObserveCommit = m.observe
		b, err := boltstore.Open(path, opts)
		if err != nil {
			return nil, nil, nil, "", err
		}
		m.st = b
		abs, _ := filepath.Abs(path)
		log.Info("store journal", "path", abs+boltstore.JournalSuffix)
		return b, b.Close, []prometheus.Collector{m}, abs, nil
	}
	var tlsCfg *tls.Config
	if cfg.Store.Cert != "" || cfg.Store.CA != "" {
		info := transport.TLSInfo{CertFile: cfg.Store.Cert, KeyFile: cfg.Store.Key, TrustedCAFile: cfg.Store.CA}
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, nil, nil, "", fmt.Errorf("etcd TLS: %w", err)
		}
	}
	endpoints := strings.Split(cfg.Store.Endpoints, ",")
	cli, err := clientv3.New(etcdstore.ClientConfig(clientv3.Config{Endpoints: endpoints, TLS: tlsCfg, DialTimeout: 10 * time.Second, Context: ctx,
		// The store reports etcd's errors itself (and health follows them);
		// the client's own retry chatter would flood the log.
		Logger: zap.NewNop()}))
	if err != nil {
		return nil, nil, nil, "", fmt.Errorf("etcd: %w", err)
	}
	em := newStoreMetrics()
	e, err := etcdstore.New(ctx, cli, etcdstore.Options{
		Prefix:            cfg.Store.Prefix,
		DecisionRetention: cfg.DecisionRetention,
		CompactEvery:      cfg.Store.CompactEvery,
		Logger:            log,
		Observe:           em.observe,
	})
	if err != nil {
		cli.Close()
		return nil, nil, nil, "", err
	}
	return e, func() error { return errors.Join(e.Close(), cli.Close()) }, []prometheus.Collector{em.latency, em.conflicts}, "etcd " + cfg.Store.Endpoints + " prefix " + cfg.Store.Prefix, nil
}

// healthInterval is how often a shared store's reachability is checked.
var healthInterval = 2 * time.Second

// watchHealth checks the store with healthy every healthInterval until ctx
// ends, and tells set whether it answered (the gRPC health service then
// says NOT_SERVING while etcd is unreachable, so load balancers and agents
// go to another replica).
func watchHealth(ctx context.Context, healthy func(context.Context) error, set func(bool), log interface {
	Warn(msg string, args ...any)
}) {
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	last := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, healthInterval)
		err := healthy(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if ok := err == nil; ok != last {
			if !ok {
				log.Warn("store unreachable: health NOT_SERVING", "err", err)
			}
			set(ok)
			last = ok
		}
	}
}
