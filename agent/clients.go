package agent

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"
)

// Defaults of KubeClientOptions. An unchanged reconcile makes 2 requests
// (the Scale and the pod metrics), a changed one 3 or more (status, Scale
// update, Events). N Autoscalers at sync period P need about 2N/P
// requests/s: 1,000/s serve 7,500 at the 15 s default (2 × 7,500 / 15 =
// 1,000), more than a 2-core agent's machine reconciles
// (docs/benchmarks.md, "Agent at scale"); the burst absorbs the first
// round after a start, when every Autoscaler is reconciled at once.
const (
	// DefaultKubeQPS is the agent's sustained rate of requests to the
	// Kubernetes API, all clients together, per second.
	DefaultKubeQPS = 1000
	// DefaultKubeBurst is how many requests may go at once above
	// DefaultKubeQPS.
	DefaultKubeBurst = 2000
)

// throttleLogInterval is how often at most the agent logs that the
// client-side rate limit delayed requests.
const throttleLogInterval = 30 * time.Second

// KubeClientOptions configure NewKubeClients.
type KubeClientOptions struct {
	// QPS is the sustained rate of requests to the Kubernetes API, per
	// second, shared by all the clients (DefaultKubeQPS when zero).
	QPS float32
	// Burst is how many requests may go at once above QPS
	// (DefaultKubeBurst when zero).
	Burst int
	// Prometheus counts the requests and the time the rate limit made
	// them wait; nil counts nothing.
	Prometheus *Metrics
}

// KubeClients are the Kubernetes clients a Controller uses, built from one
// rest.Config.
type KubeClients struct {
	// Kube is the typed client.
	Kube kubernetes.Interface
	// Dynamic is the dynamic client.
	Dynamic dynamic.Interface
	// Scales reads and writes Scale subresources of any scalable kind.
	Scales scale.ScalesGetter
	// Mapper is a deferred, cached discovery RESTMapper.
	Mapper *restmapper.DeferredDiscoveryRESTMapper
	// Metrics are the metrics API clients.
	Metrics MetricsClients

	customAPIs custom_metrics.AvailableAPIsGetter
}

// NewKubeClients builds the clients from cfg, whose own QPS, Burst and
// RateLimiter are replaced: every client shares one limit, opts.QPS and
// opts.Burst, and a log line says when that limit is what delays requests.
func NewKubeClients(cfg *rest.Config, opts KubeClientOptions) (*KubeClients, error) {
	if opts.QPS <= 0 {
		opts.QPS = DefaultKubeQPS
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultKubeBurst
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	cfg.RateLimiter = &loggedLimiter{
		RateLimiter: flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst),
		burst:       opts.Burst,
		prometheus:  opts.Prometheus,
	}
	if m := opts.Prometheus; m != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				m.kubeRequest(req.Method)
				return rt.RoundTrip(req)
			})
		})
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disc))
	if err != nil {
		return nil, fmt.Errorf("agent: scale client: %w", err)
	}
	resourceMetrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: resource metrics client: %w", err)
	}
	external, err := external_metrics.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: external metrics client: %w", err)
	}
	apis := custom_metrics.NewAvailableAPIsGetter(disc)
	return &KubeClients{
		Kube:    kube,
		Dynamic: dyn,
		Scales:  scales,
		Mapper:  mapper,
		Metrics: MetricsClients{
			Resource: resourceMetrics,
			Custom:   custom_metrics.NewForConfig(cfg, mapper, apis),
			External: external,
		},
		customAPIs: apis,
	}, nil
}

// Invalidate drops the cached discovery: the REST mappings and the custom
// metrics API's version, so new kinds and API registrations are seen.
func (k *KubeClients) Invalidate() {
	k.Mapper.Reset()
	k.customAPIs.Invalidate()
}

// Options returns controller options with the clients filled in.
func (k *KubeClients) Options() Options {
	return Options{
		Kube:       k.Kube,
		Dynamic:    k.Dynamic,
		Scales:     k.Scales,
		Mapper:     k.Mapper,
		Metrics:    k.Metrics,
		Invalidate: k.Invalidate,
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// throttleThreshold is the wait for a token above which a request counts
// as delayed by the client-side rate limit.
const throttleThreshold = 10 * time.Millisecond

// loggedLimiter is the clients' shared token bucket; it counts the time
// requests wait for a token and logs, at most every throttleLogInterval,
// when they waited, so a limit too low for the work is visible.
type loggedLimiter struct {
	flowcontrol.RateLimiter
	burst      int
	prometheus *Metrics

	mu      sync.Mutex
	delayed int
	waited  time.Duration
	logged  time.Time
}

// Wait implements flowcontrol.RateLimiter.
func (l *loggedLimiter) Wait(ctx context.Context) error {
	start := time.Now()
	err := l.RateLimiter.Wait(ctx)
	if d := time.Since(start); d > throttleThreshold {
		l.prometheus.throttled(d)
		l.note(klog.FromContext(ctx), start.Add(d), d)
	}
	return err
}

func (l *loggedLimiter) note(logger klog.Logger, now time.Time, d time.Duration) {
	l.mu.Lock()
	l.delayed++
	l.waited += d
	if now.Sub(l.logged) < throttleLogInterval {
		l.mu.Unlock()
		return
	}
	delayed, waited := l.delayed, l.waited
	l.delayed, l.waited, l.logged = 0, 0, now
	l.mu.Unlock()
	logger.Info("agent: the client-side rate limit is delaying requests to the Kubernetes API; raise -kube-api-qps and -kube-api-burst if this persists",
		"qps", l.QPS(), "burst", l.burst, "delayedRequests", delayed, "waited", waited.Round(time.Millisecond))
}
