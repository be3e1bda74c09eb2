// Command setpoint-agent runs Setpoint's in-cluster agent: it reconciles
// Autoscaler resources (setpoint.dev/v1alpha1) — and with -serve hpas or
// both, autoscaling/v2 HorizontalPodAutoscalers in place of
// kube-controller-manager's HPA controller (docs/native-hpa.md) — by asking
// the Setpoint service for each decision and applying it to the target's
// Scale subresource. See package agent for the loop and deploy/ for
// manifests.
//
// Usage:
//
//	setpoint-agent -service-address setpoint-server.setpoint-system.svc:7443 \
//	    -tls-ca-file ca.crt -tls-cert-file tls.crt -tls-key-file tls.key
//
// Run with -help for every flag.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/clients/go/endpoints"
)

func main() {
	fs := flag.NewFlagSet("setpoint-agent", flag.ExitOnError)
	var cfg Config
	cfg.RegisterFlags(fs)
	logging := flag.NewFlagSet("logging", flag.ExitOnError)
	klog.InitFlags(logging)
	logging.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	fs.Usage = func() { usage(fs.Output(), fs, logging) }
	_ = fs.Parse(os.Args[1:])
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-agent:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, &cfg); err != nil {
		klog.ErrorS(err, "setpoint-agent: exiting")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, cfg *Config) error {
	logger := klog.FromContext(ctx)
	restCfg, err := kubeConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg.UserAgent = "setpoint-agent"
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := agent.NewMetrics(reg)
	clients, err := agent.NewKubeClients(restCfg, agent.KubeClientOptions{QPS: float32(cfg.KubeAPIQPS), Burst: cfg.KubeAPIBurst, Prometheus: metrics})
	if err != nil {
		return err
	}
	conn, err := dial(cfg)
	if err != nil {
		return err
	}
	defer conn.Close()

	recorders := agent.StartEventRecorders(ctx, clients.Kube)
	defer recorders.Stop()

	var (
		current atomic.Pointer[agent.Controller]
		leading atomic.Bool
	)
	healthz := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	if cfg.MetricsAddress != "" {
		srv, err := serveHTTP(ctx, cfg.MetricsAddress, cfg.Profiling, reg, healthz, func() bool {
			// A standby replica is ready; the leader once its caches synced.
			if !leading.Load() {
				return true
			}
			c := current.Load()
			return c != nil && c.Synced()
		})
		if err != nil {
			return err
		}
		defer func() {
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdownCtx)
		}()
	}

	opts := clients.Options()
	opts.Service = agent.NewGRPCService(conn)
	opts.Events = recorders.Autoscalers
	opts.HPAEvents = recorders.HPAs
	opts.Serve = agent.Serve(cfg.Serve)
	opts.ConsoleURL = cfg.ConsoleURL
	opts.StandDownWindow = cfg.StandDownWindow
	opts.Cluster = cfg.ClusterName
	opts.Namespace = cfg.Namespace
	opts.Settings = cfg.Settings()
	opts.SyncPeriod = cfg.SyncPeriod
	opts.RecommendTimeout = cfg.RecommendTimeout
	opts.Workers = cfg.Workers
	opts.Prometheus = metrics

	lead := func(ctx context.Context) {
		leading.Store(true)
		defer leading.Store(false)
		c, err := agent.New(opts)
		if err != nil {
			logger.Error(err, "setpoint-agent: controller")
			return
		}
		current.Store(c)
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "setpoint-agent: controller stopped")
		}
	}
	if !cfg.LeaderElect {
		lead(ctx)
		return nil
	}
	err = agent.RunLeader(ctx, agent.LeaderElection{
		Client:        clients.Kube,
		Namespace:     cfg.LeaderElectionNamespace,
		Name:          cfg.LeaderElectionName,
		Identity:      cfg.LeaderElectionIdentity,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		// On SIGTERM the next replica takes over at once.
		ReleaseOnCancel: true,
		Healthz:         healthz,
	}, lead)
	if errors.Is(err, agent.ErrLeaseLost) {
		// Exit so a restarted process starts clean, as controllers do.
		return err
	}
	return err
}

// kubeConfig is the Kubernetes client configuration: the kubeconfig file
// at path, or the pod's in-cluster configuration when path is empty. Its
// errors say what is missing and what to do.
func kubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, errors.New("setpoint-agent: no Kubernetes configuration: -kubeconfig is not set and this is not a pod " +
				"(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset); outside a cluster pass -kubeconfig FILE, e.g. -kubeconfig $HOME/.kube/config")
		}
		if err != nil {
			return nil, fmt.Errorf("setpoint-agent: in-cluster configuration (the pod's service account): %w", err)
		}
		return cfg, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("setpoint-agent: -kubeconfig %s: %w", path, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if clientcmd.IsEmptyConfig(err) {
		return nil, fmt.Errorf("setpoint-agent: -kubeconfig %s names no cluster: it needs a current-context whose cluster has a server address", path)
	}
	if err != nil {
		return nil, fmt.Errorf("setpoint-agent: -kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// dial opens the gRPC connection to the service; it connects lazily.
func dial(cfg *Config) (*grpc.ClientConn, error) {
	var opts []grpc.DialOption
	if cfg.Insecure {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.ServerName}
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("setpoint-agent: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("setpoint-agent: no certificate in %s", cfg.CAFile)
			}
			tc.RootCAs = pool
		}
		if cfg.CertFile != "" {
			certFile, keyFile := cfg.CertFile, cfg.KeyFile
			// Re-read at each handshake, so rotated certificates are used.
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				cert, err := tls.LoadX509KeyPair(certFile, keyFile)
				return &cert, err
			}
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	}
	if cfg.TokenFile != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenFile{path: cfg.TokenFile, secure: !cfg.Insecure}))
	}
	// Reconnect within seconds once the service is back.
	opts = append(opts, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 10 * time.Second},
		MinConnectTimeout: 5 * time.Second,
	}))
	// Ping an idle connection every 30 s (the server tolerates pings every
	// 10 s or more, its -keepalive-min-time), so a dead one is noticed.
	opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}))
	// Every server replica the address names, balanced over the healthy
	// ones: a replica shutting down gets no new calls.
	target, resolve, err := endpoints.Target(cfg.ServiceAddress)
	if err != nil {
		return nil, fmt.Errorf("setpoint-agent: -service-address: %w", err)
	}
	opts = append(opts, grpc.WithDefaultServiceConfig(endpoints.Balanced))
	conn, err := grpc.NewClient(target, append(opts, resolve...)...)
	if err != nil {
		return nil, fmt.Errorf("setpoint-agent: dial %s: %w", cfg.ServiceAddress, err)
	}
	return conn, nil
}

// tokenFile sends the bearer token read from a file at each call.
type tokenFile struct {
	path   string
	secure bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	b, err := os.ReadFile(t.path)
	if err != nil {
		return nil, fmt.Errorf("setpoint-agent: token: %w", err)
	}
	return map[string]string{"authorization": "Bearer " + strings.TrimSpace(string(b))}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the
// token needs TLS unless -insecure was chosen explicitly.
func (t tokenFile) RequireTransportSecurity() bool { return t.secure }

// serveHTTP serves /metrics, /healthz (the leader lease's renewal) and
// /readyz, and with profiling /debug/pprof/, until ctx is done.
func serveHTTP(ctx context.Context, addr string, profiling bool, reg *prometheus.Registry, healthz *leaderelection.HealthzAdaptor, ready func() bool) (*http.Server, error) {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := healthz.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("setpoint-agent: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}
