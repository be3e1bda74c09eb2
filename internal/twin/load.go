package twin

import (
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
)

// Workload is a load model: the demand on one workload's pods over time,
// and how it turns into each pod's metrics.
type Workload struct {
	// Namespace and Selector find the workload's pods (the labels of its
	// pod template).
	Namespace string
	Selector  map[string]string
	// Trace is the demand over time, counted from AddWorkload (until
	// Load.SetTrace replaces it). The unit is the CPU's: millicores of
	// work per second.
	Trace Trace

	// Noise is each Ready pod's deviation from its share, a fraction
	// drawn uniformly from [-Noise, +Noise] at every tick (0.05 is ±5%).
	Noise float64
	// Burst is the extra CPU (millicores) a pod uses for its first
	// BurstFor after its container starts (warming caches, JIT), Ready
	// or not: the start-up spike the HPA's CPU initialization period is
	// there to ignore.
	Burst    int64
	BurstFor time.Duration
	// Idle is the CPU (millicores) a running pod that is not Ready uses
	// outside its burst: it serves nothing.
	Idle int64

	// PodsMetric, when set, is also served as a custom metric of each
	// running pod (custom.metrics.k8s.io, "pods/<PodsMetric>"), with the
	// same value as its CPU usage in milli-units.
	PodsMetric string
	// ExternalMetric, when set, is served in Namespace as an external
	// metric whose value is the total demand (a queue's arrival rate),
	// labelled with Selector.
	ExternalMetric string

	// Seed seeds the noise; equal seeds give equal noise. Zero means 1.
	Seed uint64
}

// Sample is what the load model saw and served at one tick.
type Sample struct {
	// At is the time since the load started.
	At time.Duration
	// Demand is the trace's demand at At.
	Demand float64
	// Running and Ready count the workload's pods: running (with or
	// without Ready) and Ready, neither being deleted.
	Running, Ready int
	// PerReadyPod is the mean CPU (millicores) served for a Ready pod;
	// zero when none is Ready.
	PerReadyPod float64
}

// Load is a Workload being served: Samples says what happened.
type Load struct {
	w       Workload
	start   time.Time
	metrics *metricsserver.Server
	rng     *rand.Rand

	mu         sync.Mutex
	trace      Trace     // the demand, counted from traceStart
	traceStart time.Time // start, or the last SetTrace
	samples    []Sample
	served     map[string]bool // pod names with metrics served
	stopped    bool
}

// newLoad returns w's model, started at start, serving into metrics.
func newLoad(w Workload, metrics *metricsserver.Server, start time.Time) *Load {
	seed := w.Seed
	if seed == 0 {
		seed = 1
	}
	return &Load{w: w, start: start, trace: w.Trace, traceStart: start, metrics: metrics,
		rng: rand.New(rand.NewPCG(seed, seed)), served: map[string]bool{}}
}

// Samples returns a copy of every tick's sample so far, oldest first.
func (l *Load) Samples() []Sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Sample(nil), l.samples...)
}

// Last returns the latest sample, or a zero Sample before the first tick.
func (l *Load) Last() Sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) == 0 {
		return Sample{}
	}
	return l.samples[len(l.samples)-1]
}

// SetTrace replaces the load's trace: from now on the demand follows tr,
// its moments counted from this call (so a Steady trace sets a level at
// once). A test that moves load between workloads when its system has
// settled, rather than at fixed moments, uses it. Samples keep counting
// At from the load's start.
func (l *Load) SetTrace(tr Trace) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trace, l.traceStart = tr, time.Now()
}

// Elapsed returns the time since the load started.
func (l *Load) Elapsed() time.Duration { return time.Since(l.start) }

// stop removes every metric the load served and stops it.
func (l *Load) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	var remove []metav1.ObjectMeta
	for name := range l.served {
		remove = append(remove, metav1.ObjectMeta{Namespace: l.w.Namespace, Name: name})
		if l.w.PodsMetric != "" {
			l.metrics.DeleteCustomMetric("pods", l.w.Namespace, name, l.w.PodsMetric)
		}
	}
	l.metrics.ReplacePodMetrics(nil, remove)
	if l.w.ExternalMetric != "" {
		l.metrics.DeleteExternalMetric(l.w.Namespace, l.w.ExternalMetric)
	}
	l.served = map[string]bool{}
}

// tick serves one step of the model at now, given the pods that exist:
// the demand is shared equally by the Ready pods that are not being
// deleted; each gets its share with noise, plus its start-up burst; a
// running pod that is not Ready gets Idle plus its burst; pods that do not
// run, or are gone, have no metrics (as metrics-server has no samples of
// them).
func (l *Load) tick(now time.Time, pods []*corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	w := l.w
	at := now.Sub(l.start)
	demand := l.trace.At(now.Sub(l.traceStart))
	sel := labels.SelectorFromSet(w.Selector)
	var running, ready []*corev1.Pod
	for _, p := range pods {
		if p.Namespace != w.Namespace || !sel.Matches(labels.Set(p.Labels)) ||
			p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		running = append(running, p)
		if isReady(p) {
			ready = append(ready, p)
		}
	}
	// A fixed order makes equal seeds give equal noise per pod.
	sort.Slice(running, func(i, j int) bool { return running[i].Name < running[j].Name })
	share := 0.0
	if len(ready) > 0 {
		share = demand / float64(len(ready))
	}
	var set []metricsv1beta1.PodMetrics
	seen := map[string]bool{}
	total := 0.0
	for _, p := range running {
		usage := float64(w.Idle)
		if isReady(p) {
			usage = share * (1 + w.Noise*(2*l.rng.Float64()-1))
			total += usage
		}
		if started := startedAt(p); !started.IsZero() && now.Sub(started) < w.BurstFor {
			usage += float64(w.Burst)
		}
		milli := max(int64(usage), 0)
		seen[p.Name] = true
		set = append(set, metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels},
			Timestamp:  metav1.NewTime(now),
			Containers: []metricsv1beta1.ContainerMetrics{{
				Name:  containerName(p),
				Usage: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)},
			}},
		})
		if w.PodsMetric != "" {
			l.metrics.SetCustomMetric(metricsserver.CustomMetric{
				Resource: "pods", Namespace: p.Namespace, Name: p.Name, Kind: "Pod", APIVersion: "v1",
				Labels: p.Labels, Metric: w.PodsMetric,
				Value: *resource.NewMilliQuantity(milli, resource.DecimalSI), Timestamp: now,
			})
		}
	}
	var remove []metav1.ObjectMeta
	for name := range l.served {
		if !seen[name] {
			remove = append(remove, metav1.ObjectMeta{Namespace: w.Namespace, Name: name})
			if w.PodsMetric != "" {
				l.metrics.DeleteCustomMetric("pods", w.Namespace, name, w.PodsMetric)
			}
		}
	}
	l.metrics.ReplacePodMetrics(set, remove)
	l.served = seen
	if w.ExternalMetric != "" {
		l.metrics.SetExternalMetric(metricsserver.ExternalMetric{
			Namespace: w.Namespace, Metric: w.ExternalMetric, Labels: w.Selector,
			Value: *resource.NewMilliQuantity(int64(demand*1000), resource.DecimalSI), Timestamp: now,
		})
	}
	s := Sample{At: at, Demand: demand, Running: len(running), Ready: len(ready)}
	if len(ready) > 0 {
		s.PerReadyPod = total / float64(len(ready))
	}
	l.samples = append(l.samples, s)
}

// isReady reports whether the pod's Ready condition is True.
func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startedAt returns when the pod's first container started, or the zero
// time.
func startedAt(p *corev1.Pod) time.Time {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return cs.State.Running.StartedAt.Time
		}
	}
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return time.Time{}
}

// containerName is the name of the pod's first container.
func containerName(p *corev1.Pod) string {
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Name
	}
	return "app"
}
