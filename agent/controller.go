package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	autoscalingv2informers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// Defaults of Options.
const (
	// DefaultSyncPeriod is how often every Autoscaler is reconciled, as the
	// HPA controller's --horizontal-pod-autoscaler-sync-period.
	DefaultSyncPeriod = 15 * time.Second
	// DefaultRecommendTimeout is the deadline of one Recommend call.
	DefaultRecommendTimeout = 5 * time.Second
	// DefaultWorkers is how many Autoscalers are reconciled concurrently.
	// A reconcile mostly waits: on the Kubernetes API (the Scale, the pod
	// metrics) and on the service's durable decision, 20–100 ms on a
	// loaded machine, so reconciles/s ≈ workers / latency: 50 workers
	// serve 500–2,500/s, 7,500 Autoscalers at 15 s even at 100 ms. Workers
	// that wait cost little (a goroutine each), and more decisions in
	// flight share the service's fsyncs (docs/benchmarks.md, "Agent at
	// scale"). The HPA controller's default is 5, for decisions made in
	// its own process.
	DefaultWorkers = 50
	// DefaultStandDownWindowPeriods is Options.StandDownWindow's default in
	// sync periods: an HPA controller that serves an HPA writes its status
	// whenever a metric's value changes, so within a few periods.
	DefaultStandDownWindowPeriods = 4
)

// Options configure a Controller. Kube, Dynamic, Scales, Mapper, Service
// and the Informers of the kinds served are required.
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
	// Fleets is the Setpoint service's FleetService, which the members of
	// fleets (spec.fleet) report to; nil makes every fleet member fail
	// with ReasonInvalidSpec.
	Fleets FleetService
	// Serve says which kinds the controller serves: Autoscalers (the
	// default when empty), HorizontalPodAutoscalers, or both.
	Serve Serve
	// Events records Kubernetes Events about Autoscalers; nil records
	// none. StartEventRecorders gives one that records as the HPA
	// controller does.
	Events record.EventRecorder
	// HPAEvents records Kubernetes Events about HorizontalPodAutoscalers,
	// as the HPA controller's source "horizontal-pod-autoscaler"
	// (StartEventRecorders); nil records none.
	HPAEvents record.EventRecorder
	// ConsoleURL is the Setpoint web console's address, e.g.
	// "https://setpoint.example.com/console/"; the ExplanationAnnotation
	// of an HPA links to its page there. Empty names the setpointctl
	// command instead.
	ConsoleURL string
	// StandDownWindow is how long after another controller last wrote an
	// HPA's status the agent leaves that HPA alone
	// (DefaultStandDownWindowPeriods sync periods when zero).
	StandDownWindow time.Duration
	// Informers are the caches the controller reads, built by the caller
	// from informer factories it owns (InformersFrom); their namespace is
	// the controller's. New adds its event handlers, indexers and
	// transforms to them, so they must not have started; the caller
	// starts the factories after New and before Run, with Run's context,
	// and shuts them down after Run returns. Informers live as long as
	// the Controller: a new leader term builds new ones.
	Informers Informers
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
	// ShutdownGrace is how long reconciles in flight when Run's context
	// ends may go on to finish (RecommendTimeout when zero).
	ShutdownGrace time.Duration
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

// Informers are the shared informers a Controller reads its objects from.
// The objects they cache are the controller's: New sets transforms that
// trim pods and HPAs to what the HPA reads and store Autoscalers as typed
// objects, so they are not for other readers.
type Informers struct {
	// Pods caches the pods of the namespace served (required).
	Pods coreinformers.PodInformer
	// Autoscalers caches setpoint.dev Autoscalers
	// (v1alpha1.AutoscalerResource) from a dynamic informer factory;
	// required when the controller serves Autoscalers, unused otherwise.
	Autoscalers informers.GenericInformer
	// HPAs caches autoscaling/v2 HorizontalPodAutoscalers; required when
	// the controller serves HPAs, unused otherwise.
	HPAs autoscalingv2informers.HorizontalPodAutoscalerInformer
}

// InformersFrom returns the informers a controller serving serve reads,
// taken from the caller's factories: pods and, when it serves HPAs, HPAs
// from kube; Autoscalers from dynamic when it serves them. Informers of
// kinds not served are not requested, so the factories never start them
// (an agent serving only HPAs needs no Autoscaler CRD). Create the
// factories without a resync period: each key schedules its own next
// reconcile, spread over the sync period.
func InformersFrom(serve Serve, kube informers.SharedInformerFactory, dynamic dynamicinformer.DynamicSharedInformerFactory) Informers {
	inf := Informers{Pods: kube.Core().V1().Pods()}
	if serve == "" {
		serve = ServeAutoscalers
	}
	if serve.Autoscalers() {
		inf.Autoscalers = dynamic.ForResource(v1alpha1.AutoscalerResource)
	}
	if serve.HPAs() {
		inf.HPAs = kube.Autoscaling().V2().HorizontalPodAutoscalers()
	}
	return inf
}

// Controller reconciles the autoscalers the agent serves (Options.Serve):
// Autoscalers, HorizontalPodAutoscalers or both. It is the agent's control
// loop.
type Controller struct {
	opts Options

	// autoscalers caches *v1alpha1.Autoscaler, converted from the dynamic
	// client's maps as they arrive (typedAutoscaler); nil when the
	// controller does not serve Autoscalers.
	autoscalers cache.SharedIndexInformer
	// hpas caches *autoscalingv2.HorizontalPodAutoscaler (trimHPA); nil
	// when the controller does not serve HPAs.
	hpas cache.SharedIndexInformer
	// pods caches the pods of the namespace served (trimPod), indexed by
	// label (podLabelIndex).
	pods       corelisters.PodLister
	podIndex   cache.Indexer
	podsSynced cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// keys is what the agent remembers of each Autoscaler between
	// reconciles, by key.
	keys map[string]*keyState
	// selectors holds, by key, the pod selector of every Autoscaler
	// reconciled since it was last deleted, to find pods that two
	// autoscalers select (see ambiguous).
	selectors map[string]labels.Selector

	synced atomic.Bool
}

// errTerminal marks a reconcile error that retrying will not fix: the key
// is forgotten and comes back at the next sync period or spec change.
var errTerminal = errors.New("agent: terminal")

// New creates a Controller over the caller's informers
// (Options.Informers), adding its event handlers to them. It starts
// nothing: the caller starts the informers, then calls Run.
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
	case opts.Informers.Pods == nil:
		return nil, errors.New("agent: Options.Informers.Pods is required")
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
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = opts.RecommendTimeout
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
	if opts.Serve == "" {
		opts.Serve = ServeAutoscalers
	}
	if _, err := ParseServe(string(opts.Serve)); err != nil {
		return nil, err
	}
	if opts.StandDownWindow <= 0 {
		opts.StandDownWindow = DefaultStandDownWindowPeriods * opts.SyncPeriod
	}
	if opts.Events == nil {
		opts.Events = nopRecorder{}
	}
	if opts.HPAEvents == nil {
		opts.HPAEvents = nopRecorder{}
	}
	c := &Controller{
		opts:      opts,
		keys:      map[string]*keyState{},
		selectors: map[string]labels.Selector{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "autoscalers"}),
	}
	if err := c.useInformers(opts.Informers); err != nil {
		c.queue.ShutDown()
		return nil, err
	}
	return c, nil
}

// useInformers makes inf the controller's caches: it adds the transforms,
// the pod index and the event handlers, which inf's informers accept only
// before they start.
func (c *Controller) useInformers(inf Informers) error {
	if c.opts.Serve.Autoscalers() {
		if inf.Autoscalers == nil {
			return fmt.Errorf("agent: Options.Informers.Autoscalers is required to serve %s", c.opts.Serve)
		}
		c.autoscalers = inf.Autoscalers.Informer()
		if err := c.autoscalers.SetTransform(typedAutoscaler); err != nil {
			return fmt.Errorf("agent: autoscaler cache: %w", err)
		}
		if _, err := c.autoscalers.AddEventHandler(specChanges(c.enqueue)); err != nil {
			return fmt.Errorf("agent: add event handler: %w", err)
		}
	}
	if c.opts.Serve.HPAs() {
		if inf.HPAs == nil {
			return fmt.Errorf("agent: Options.Informers.HPAs is required to serve %s", c.opts.Serve)
		}
		c.hpas = inf.HPAs.Informer()
		if err := c.hpas.SetTransform(trimHPA); err != nil {
			return fmt.Errorf("agent: HPA cache: %w", err)
		}
		if _, err := c.hpas.AddEventHandler(specChanges(c.enqueueHPA)); err != nil {
			return fmt.Errorf("agent: add event handler: %w", err)
		}
	}
	// Pods change status all the time; the agent reads them from the cache
	// at each reconcile and never reacts to them, as the HPA controller.
	podInformer := inf.Pods
	if err := podInformer.Informer().SetTransform(trimPod); err != nil {
		return fmt.Errorf("agent: pod cache: %w", err)
	}
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podLabelIndex: podLabelKeys}); err != nil {
		return fmt.Errorf("agent: pod cache: %w", err)
	}
	c.pods = podInformer.Lister()
	c.podIndex = podInformer.Informer().GetIndexer()
	c.podsSynced = podInformer.Informer().HasSynced
	return nil
}

// specChanges is the event handler of an autoscaler informer: enqueue on
// add, delete and a new generation (a spec change); status writes are not
// spec changes.
func specChanges(enqueue func(any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(metav1.Object)
			n, ok2 := newObj.(metav1.Object)
			if !ok1 || !ok2 || o.GetGeneration() != n.GetGeneration() {
				enqueue(newObj)
			}
		},
		DeleteFunc: enqueue,
	}
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

// Run waits for the informers' caches (the caller has started them, see
// Options.Informers) and reconciles until ctx is done; then it stops the
// workers and returns, leaving the informers to the caller. A Controller
// runs once.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	defer utilruntime.HandleCrash()

	synced := []cache.InformerSynced{c.podsSynced}
	if c.autoscalers != nil {
		synced = append(synced, c.autoscalers.HasSynced)
	}
	if c.hpas != nil {
		synced = append(synced, c.hpas.HasSynced)
	}
	defer c.queue.ShutDown()

	logger.Info("agent: waiting for caches to sync", "serve", c.opts.Serve)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("agent: caches did not sync: %w", context.Cause(ctx))
	}
	c.synced.Store(true)
	defer c.synced.Store(false)
	logger.Info("agent: caches synced; starting workers", "workers", c.opts.Workers, "syncPeriod", c.opts.SyncPeriod)

	// Reconciles in flight when ctx ends finish with workCtx, which ends
	// ShutdownGrace later: a reconcile is not cut in the middle of its
	// writes, and no key is started once ctx is done.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
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
			defer utilruntime.HandleCrash()
			for c.processNextItem(ctx, workCtx) {
			}
		}()
	}
	<-ctx.Done()
	logger.Info("agent: stopping; finishing the reconciles in flight", "grace", c.opts.ShutdownGrace)
	c.queue.ShutDown()
	grace := time.AfterFunc(c.opts.ShutdownGrace, cancelWork)
	defer grace.Stop()
	wg.Wait()
	logger.Info("agent: stopped")
	return nil
}

// processNextItem reconciles the next key with workCtx; it returns false
// when the queue is shut down or ctx is done, leaving the keys still
// queued alone.
func (c *Controller) processNextItem(ctx, workCtx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if ctx.Err() != nil {
		return false
	}
	logger := klog.FromContext(ctx).WithValues("autoscaler", key)
	err := c.reconcile(klog.NewContext(workCtx, logger), key)
	switch {
	case err == nil:
		c.queue.Forget(key)
		c.schedule(key)
	case errors.Is(err, errTerminal):
		// Retrying cannot help: the next sync period or spec change
		// brings the key back.
		c.queue.Forget(key)
		c.schedule(key)
		logger.V(2).Info("agent: reconcile failed; not retrying before the next sync", "err", err)
	case ctx.Err() != nil:
		// Shutting down: the next leader picks the key up.
	default:
		c.queue.AddRateLimited(key)
		logger.Info("agent: reconcile failed; retrying with back-off", "err", err, "requeues", c.queue.NumRequeues(key))
	}
	return true
}

// schedule queues key's next periodic reconcile, unless the object is
// gone.
func (c *Controller) schedule(key string) {
	k, err := parseKey(key)
	if err != nil {
		return
	}
	if _, exists, err := c.cached(k); err != nil || !exists {
		return
	}
	c.queue.AddAfter(key, nextSync(key, c.opts.Clock.Now(), c.opts.SyncPeriod))
}

// nextSync is how long after now the key's next periodic reconcile is
// due: at the next instant of the key's phase — a fixed offset within the
// period, from a hash of the key — that is at least half a period away.
// Keys' phases are spread evenly over the period, so the reconciles are
// too, and a key reconciled on time is next due exactly one period later;
// one reconciled late keeps its phase and so catches up.
func nextSync(key string, now time.Time, period time.Duration) time.Duration {
	p := int64(period)
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	phase := int64(h.Sum64() % uint64(p))
	t := now.UnixNano() + p/2
	next := t - t%p + phase
	if next < t {
		next += p
	}
	return time.Duration(next - now.UnixNano())
}

// cached returns the cached object of k: an *v1alpha1.Autoscaler (or the
// dynamic form of one that did not convert) or an
// *autoscalingv2.HorizontalPodAutoscaler. A kind the controller does not
// serve has no objects.
func (c *Controller) cached(k objectKey) (any, bool, error) {
	inf := c.autoscalers
	if k.hpa {
		inf = c.hpas
	}
	if inf == nil {
		return nil, false, nil
	}
	return inf.GetIndexer().GetByKey(k.namespace + "/" + k.name)
}

// keyState is what the agent remembers of one autoscaler between
// reconciles: only what its metrics need. What the target was left at is
// read from the autoscaler's status (leftAt), not remembered.
type keyState struct {
	// started is when the last reconcile started.
	started time.Time
	// fleet names the fleet of a fleet member, and fleetSpec is that
	// fleet's spec as the service last gave it: the metrics its next
	// report follows.
	fleet     string
	fleetSpec *setpointv1.FleetSpec
}

// podLabelIndex indexes the pod cache by "namespace/key=value" for each
// label of each pod, so a selector's pods are found without a scan of the
// namespace (podsFor).
const podLabelIndex = "namespace/label"

func podLabelKeys(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	keys := make([]string, 0, len(p.Labels))
	for k, v := range p.Labels {
		keys = append(keys, labelIndexKey(p.Namespace, k, v))
	}
	return keys, nil
}

func labelIndexKey(namespace, key, value string) string {
	return namespace + "/" + key + "=" + value
}

// podsFor lists the cached pods of namespace that selector matches. When
// the selector requires a label to equal one of some values, only the pods
// with such a label are read (the fewest, over its requirements), so the
// cost follows the target's pods, not the namespace's; other selectors
// scan the namespace.
func (c *Controller) podsFor(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	reqs, _ := selector.Requirements()
	var best []string
	found := false
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		var keys []string
		for _, v := range r.Values().UnsortedList() {
			k, err := c.podIndex.IndexKeys(podLabelIndex, labelIndexKey(namespace, r.Key(), v))
			if err != nil {
				return nil, err
			}
			keys = append(keys, k...)
		}
		if !found || len(keys) < len(best) {
			best, found = keys, true
		}
	}
	if !found {
		return c.pods.Pods(namespace).List(selector)
	}
	pods := make([]*corev1.Pod, 0, len(best))
	for _, key := range best {
		obj, exists, err := c.podIndex.GetByKey(key)
		if err != nil {
			return nil, err
		}
		if p, ok := obj.(*corev1.Pod); exists && ok && selector.Matches(labels.Set(p.Labels)) {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// trimPod is the pod cache's transform: it keeps what the HPA reads of a
// pod (podOf: name, labels, deletion, phase, start time, conditions, the
// containers' names and requests, sidecar restart policy, overhead and
// pod-level resources) and drops the rest — managed fields, annotations,
// images, env, volumes, container statuses — which is most of a real
// pod's size. A field the request starts to carry must be kept here too
// (TestTrimPodKeepsRequest).
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			Containers:     trimContainers(p.Spec.Containers),
			InitContainers: trimContainers(p.Spec.InitContainers),
			Overhead:       p.Spec.Overhead,
			Resources:      p.Spec.Resources,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase, StartTime: p.Status.StartTime, Conditions: p.Status.Conditions},
	}
	return out, nil
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}, RestartPolicy: c.RestartPolicy}
	}
	return out
}

// typedAutoscaler is the autoscaler cache's transform: it stores
// Autoscalers as typed objects without managed fields, about a third of
// the dynamic client's maps. An object that does not convert is kept as
// it came (its reconcile reports the error).
func typedAutoscaler(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	a, err := v1alpha1.FromUnstructured(u)
	if err != nil {
		u.SetManagedFields(nil)
		return u, nil
	}
	a.ManagedFields = nil
	return a, nil
}

// nopRecorder records no Events.
type nopRecorder struct{}

func (nopRecorder) Event(runtime.Object, string, string, string)          {}
func (nopRecorder) Eventf(runtime.Object, string, string, string, ...any) {}
func (nopRecorder) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}
