// Command setpoint-agent runs Setpoint's in-cluster agent: it reconciles
// Autoscaler resources (setpoint.dev/v1alpha1) — and with -serve hpas or
// both, autoscaling/v2 HorizontalPodAutoscalers in place of
// kube-controller-manager's HPA controller (docs/native-hpa.md) — by asking
// the Setpoint service for each decision and applying it to the target's
// Scale subresource. An Autoscaler with spec.fleet is a member of a fleet:
// the agent reports to the fleet as this cluster (-cluster-name) and
// applies the cluster's share (docs/fleets.md). See package agent for the
// loop and deploy/ for manifests.
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
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"regexp"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/setpointhq/setpoint/agent"
	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/clients/go/endpoints"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
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
	client, err := dial(cfg)
	if err != nil {
		return err
	}
	defer client.Close()

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
	opts.Service = agent.NewGRPCService(client.Conn())
	opts.Fleets = setpointv1.NewFleetServiceClient(client.Conn())
	opts.Events = recorders.Autoscalers
	opts.HPAEvents = recorders.HPAs
	opts.Serve = agent.Serve(cfg.Serve)
	opts.ConsoleURL = cfg.ConsoleURL
	opts.StandDownWindow = cfg.StandDownWindow
	opts.Cluster = cfg.ClusterName
	opts.Settings = cfg.Settings()
	opts.SyncPeriod = cfg.SyncPeriod
	opts.RecommendTimeout = cfg.RecommendTimeout
	opts.Workers = cfg.Workers
	opts.Prometheus = metrics

	lead := func(ctx context.Context) {
		leading.Store(true)
		defer leading.Store(false)
		if err := runController(ctx, cfg.Namespace, opts, &current); err != nil && ctx.Err() == nil {
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

// runController runs one term of the controller until ctx ends: it builds
// the informer factories of namespace (all when empty), gives their
// informers to a new controller, starts them once the controller has
// added its handlers, and shuts them down after the controller's workers
// stopped. Every term lists afresh; current is set to the term's
// controller, for readiness.
func runController(ctx context.Context, namespace string, opts agent.Options, current *atomic.Pointer[agent.Controller]) error {
	// No resync: each key schedules its own next reconcile.
	kube := informers.NewSharedInformerFactoryWithOptions(opts.Kube, 0, informers.WithNamespace(namespace))
	dynamic := dynamicinformer.NewFilteredDynamicSharedInformerFactory(opts.Dynamic, 0, namespace, nil)
	opts.Informers = agent.InformersFrom(opts.Serve, kube, dynamic)
	c, err := agent.New(opts)
	if err != nil {
		return err
	}
	current.Store(c)
	informerCtx, stopInformers := context.WithCancel(ctx)
	defer func() {
		stopInformers()
		kube.Shutdown()
		dynamic.Shutdown()
	}()
	kube.Start(informerCtx.Done())
	dynamic.Start(informerCtx.Done())
	return c.Run(ctx)
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

// dial returns the client of the service the flags name, through
// clients/go like every other client; it connects lazily.
func dial(cfg *Config) (*setpointclient.Client, error) {
	o := setpointclient.Options{
		// Re-read at each call, so a rotated token is used.
		TokenFile: cfg.TokenFile,
		// Every server replica the address names, balanced over the
		// healthy ones: a replica shutting down gets no new calls. No
		// method timeouts or retries: each call's deadline is
		// -recommend-timeout, and a Recommend is never retried.
		ServiceConfig: endpoints.Balanced,
		// Ping an idle connection every 30 s (the server tolerates pings
		// every 10 s or more, its -keepalive-min-time), so a dead one is
		// noticed.
		Keepalive: keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true},
		// Reconnect within seconds once the service is back.
		Reconnect: grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 10 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		},
	}
	if !cfg.Insecure {
		// The client certificate is read again at each handshake, so a
		// rotated one is used.
		tc, err := setpointclient.TLSFiles{CA: cfg.CAFile, Cert: cfg.CertFile, Key: cfg.KeyFile, ServerName: cfg.ServerName}.Config()
		if err != nil {
			return nil, fmt.Errorf("setpoint-agent: -tls-* flags: %w", err)
		}
		o.TLS = tc
	}
	c, err := setpointclient.Dial(cfg.ServiceAddress, o)
	if err != nil {
		return nil, fmt.Errorf("setpoint-agent: -service-address %s: %w", cfg.ServiceAddress, err)
	}
	return c, nil
}

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
