package agent

import (
	"context"
	"errors"
	"fmt"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	// DefaultSyncPeriod is how often every Autoscaler is reconciled, as the
	// HPA controller's --horizontal-pod-autoscaler-sync-period.
	DefaultSyncPeriod = 15 * time.Second
	// DefaultRecommendTimeout is the deadline of one Recommend call.
	DefaultRecommendTimeout = 5 * time.Second
	// DefaultWorkers is how many Autoscalers are reconciled concurrently.
	DefaultWorkers = 2
)

// Options configure a Controller. Kube, Dynamic, Scales, Mapper and Service
// are required.
type Options struct {
	// Kube is the typed client (pods, events).
	Kube kubernetes.Interface
	// Dynamic is the dynamic client for Autoscalers.
	Dynamic dynamic.Interface
	// Scales reads and writes Scale subresources.
	Scales scale.ScalesGetter
	// Mapper maps a scale target's kind to its resources; when it is a
	// meta.ResettableRESTMapper it is reset when a kind is not found, so
	// new custom resources are discovered.
	Mapper meta.RESTMapper
	// Metrics are the clients of the metrics APIs.
	Metrics MetricsClients
	// Service is the Setpoint service.
	Service Service
	// Events records Kubernetes Events; nil records none.
	Events events.EventRecorder
	// Namespace restricts the controller to one namespace's Autoscalers and
	// pods; empty watches all namespaces.
	Namespace string
	// Cluster is the cluster name sent to the service.
	Cluster string
	// Settings are sent in each request.
	Settings Settings
	// SyncPeriod is how often every Autoscaler is reconciled
	// (DefaultSyncPeriod when zero).
	SyncPeriod time.Duration
	// RecommendTimeout is the deadline of a Recommend call
	// (DefaultRecommendTimeout when zero).
	RecommendTimeout time.Duration
	// Workers is how many keys are reconciled concurrently (DefaultWorkers
	// when zero).
	Workers int
	// RateLimiter spaces retries of failed keys; nil selects exponential
	// back-off from 500ms to 5m with an overall 10 qps bucket.
	RateLimiter workqueue.TypedRateLimiter[string]
	// Prometheus records the agent's metrics; nil records none.
	Prometheus *Metrics
	// Invalidate, when set, is called once per sync period to drop cached
	// discovery (KubeClients.Invalidate).
	Invalidate func()
	// Clock gives the time written in statuses and requests; nil is the
	// real clock.
	Clock clock.PassiveClock
}

// Controller reconciles Autoscalers: it is the agent's control loop.
type Controller struct {
	opts Options

	autoscalerFactory dynamicinformer.DynamicSharedInformerFactory
	autoscalers       cache.SharedIndexInformer
	podFactory        informers.SharedInformerFactory
	pods              corelisters.PodLister
	podsSynced        cache.InformerSynced
	queue             workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// lastReplicas is the target's spec.replicas as the agent left it at
	// the end of the last reconcile, by key: a different value at the next
	// reconcile is an external change.
	lastReplicas map[string]int32

	synced atomic.Bool
}

// errTerminal marks a reconcile error that retrying will not fix: the key
// is forgotten and comes back at the next sync period or spec change.
var errTerminal = errors.New("agent: terminal")

// New creates a Controller. It starts nothing: call Run.
func New(opts Options) (*Controller, error) {
	switch {
	case opts.Kube == nil:
		return nil, errors.New("agent: Options.Kube is required")
	case opts.Dynamic == nil:
		return nil, errors.New("agent: Options.Dynamic is required")
	case opts.Scales == nil:
		return nil, errors.New("agent: Options.Scales is required")
	case opts.Mapper == nil:
		return nil, errors.New("agent: Options.Mapper is required")
	case opts.Service == nil:
		return nil, errors.New("agent: Options.Service is required")
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.RecommendTimeout <= 0 {
		opts.RecommendTimeout = DefaultRecommendTimeout
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 5*time.Minute),
			&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
		)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Events == nil {
		opts.Events = nopRecorder{}
	}
	c := &Controller{
		opts:         opts,
		lastReplicas: map[string]int32{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "autoscalers"}),
	}
	c.autoscalerFactory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(opts.Dynamic, opts.SyncPeriod, opts.Namespace, nil)
	c.autoscalers = c.autoscalerFactory.ForResource(v1alpha1.AutoscalerResource).Informer()
	_, err := c.autoscalers.AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			// A resync (same resourceVersion) is the sync period; a new
			// generation is a spec change. Status writes are neither.
			if !ok1 || !ok2 || o.GetResourceVersion() == n.GetResourceVersion() || o.GetGeneration() != n.GetGeneration() {
				c.enqueue(newObj)
			}
		},
		DeleteFunc: c.enqueue,
	}, opts.SyncPeriod)
	if err != nil {
		return nil, fmt.Errorf("agent: add event handler: %w", err)
	}
	// Pods change status all the time; the agent reads them from the cache
	// at each reconcile and never reacts to them, as the HPA controller.
	c.podFactory = informers.NewSharedInformerFactoryWithOptions(opts.Kube, 0, informers.WithNamespace(opts.Namespace))
	podInformer := c.podFactory.Core().V1().Pods()
	c.pods = podInformer.Lister()
	c.podsSynced = podInformer.Informer().HasSynced
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// Synced reports whether the controller's caches have synced and its
// workers run.
func (c *Controller) Synced() bool { return c.synced.Load() }

// Run starts the informers, waits for their caches, and reconciles until
// ctx is done; then it stops the workers and informers and returns. A
// Controller runs once.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	defer utilruntime.HandleCrash()

	c.autoscalerFactory.Start(ctx.Done())
	c.podFactory.Start(ctx.Done())
	defer func() {
		c.queue.ShutDown()
		c.autoscalerFactory.Shutdown()
		c.podFactory.Shutdown()
	}()

	logger.Info("agent: waiting for caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), c.autoscalers.HasSynced, c.podsSynced) {
		return fmt.Errorf("agent: caches did not sync: %w", context.Cause(ctx))
	}
	c.synced.Store(true)
	defer c.synced.Store(false)
	logger.Info("agent: caches synced; starting workers", "workers", c.opts.Workers, "syncPeriod", c.opts.SyncPeriod)

	var wg sync.WaitGroup
	if c.opts.Invalidate != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(context.Context) { c.opts.Invalidate() }, c.opts.SyncPeriod)
		}()
	}
	for range c.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, c.runWorker, time.Second)
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	logger.Info("agent: stopped")
	return nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextItem(ctx) {
	}
}

func (c *Controller) processNextItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	logger := klog.FromContext(ctx).WithValues("autoscaler", key)
	err := c.reconcile(klog.NewContext(ctx, logger), key)
	switch {
	case err == nil:
		c.queue.Forget(key)
	case errors.Is(err, errTerminal):
		// Retrying cannot help: the next sync period or spec change
		// brings the key back.
		c.queue.Forget(key)
		logger.V(2).Info("agent: reconcile failed; not retrying before the next sync", "err", err)
	case ctx.Err() != nil:
		// Shutting down.
	default:
		c.queue.AddRateLimited(key)
		logger.Info("agent: reconcile failed; retrying with back-off", "err", err, "requeues", c.queue.NumRequeues(key))
	}
	return true
}

// nopRecorder records no Events.
type nopRecorder struct{}

func (nopRecorder) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) {}
