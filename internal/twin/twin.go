package twin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/testkit"
)

// Addresses the simulated nodes and pods report. Both are documentation
// ranges (RFC 5737) that no network routes: nothing in the twin connects
// to them, and kwok serves no kubelet API that anything could proxy to.
const (
	// PodCIDR is the range kwok gives pods their IPs from.
	PodCIDR = "198.51.100.0/24"
	// NodeIP is the address every simulated node reports.
	NodeIP = "192.0.2.10"
)

// WorkloadControllers are the kube-controller-manager controllers every
// twin runs: what turns a Deployment or StatefulSet into pods and cleans
// up after it.
var WorkloadControllers = []string{"deployment", "replicaset", "statefulset", "garbagecollector", "namespace"}

// HPAController is the controller a reference twin adds.
const HPAController = "horizontalpodautoscaling"

// Options configures Start. The zero value is a twin with no HPA
// controller (a Setpoint cluster), two nodes and DefaultPodTiming, with
// an etcd of its own.
type Options struct {
	// Reference runs kube-controller-manager's HPA controller too, so
	// that HorizontalPodAutoscalers are served by Kubernetes itself.
	Reference bool
	// ControllerFlags are extra kube-controller-manager flags (for a
	// reference twin, the HPA controller's: sync period, tolerance, …).
	ControllerFlags []string

	// Nodes is how many simulated nodes to create; zero means 2.
	Nodes int
	// Pods is how long simulated pods take to start, turn Ready and
	// terminate; the zero value means DefaultPodTiming.
	Pods PodTiming
	// Tick is how often the load models serve new metrics; zero means
	// one second.
	Tick time.Duration

	// Cluster is passed to kubetest.Start: CRDs to install, an etcd to
	// share (EtcdURL, with a distinct EtcdPrefix), binaries.
	Cluster kubetest.Options
}

// Twin is a small Kubernetes cluster on loopback whose workloads behave
// as in a real one: kube-apiserver and etcd (kubetest), the workload
// controllers and, in a reference twin, the HPA controller
// (kube-controller-manager), kube-scheduler, simulated nodes and pod
// lifecycles (kwok), and the metrics APIs served from load models that
// answer to the number of Ready pods.
type Twin struct {
	// Cluster is the API server and its etcd.
	Cluster *kubetest.Cluster
	// ControllerManager, Scheduler and Kwok are the other processes.
	ControllerManager, Scheduler, Kwok *kubetest.ControllerManager
	// Metrics serves the metrics APIs through the aggregation layer.
	Metrics *metricsserver.Server

	opts    Options
	pods    cache.Indexer
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	loads   []*Load
	stopErr error
	once    sync.Once
}

// StartT starts a twin for the test and stops it in t.Cleanup; when the
// test failed, the ends of the processes' logs go to the test log.
func StartT(t testing.TB, opts Options) *Twin {
	t.Helper()
	tw, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start twin: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", tw.Logs(20))
		}
		if err := tw.Stop(); err != nil {
			t.Errorf("stop twin: %v", err)
		}
	})
	return tw
}

// Start starts a twin and returns once its nodes are Ready and the
// metrics APIs are served. ctx bounds the start only.
func Start(ctx context.Context, opts Options) (_ *Twin, err error) {
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	if opts.Pods == (PodTiming{}) {
		opts.Pods = DefaultPodTiming
	}
	if opts.Tick == 0 {
		opts.Tick = time.Second
	}
	// New nodes would get the not-ready taint from this admission plugin,
	// and only the node lifecycle controller takes it off; the twin runs
	// no such controller (kwok sends no heartbeats it could judge), so the
	// plugin is off and kwok's Ready condition is the whole story.
	opts.Cluster.APIServerFlags = append([]string{"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"}, opts.Cluster.APIServerFlags...)
	c, err := kubetest.Start(ctx, opts.Cluster)
	if err != nil {
		return nil, err
	}
	tw := &Twin{Cluster: c, opts: opts, done: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = tw.Stop()
		}
	}()
	controllers := WorkloadControllers
	if opts.Reference {
		controllers = append(append([]string(nil), controllers...), HPAController)
	}
	// The controller manager, the scheduler, kwok and the metrics
	// server start side by side.
	var wg sync.WaitGroup
	var errs [4]error
	wg.Go(func() {
		tw.ControllerManager, errs[0] = c.StartControllerManager(ctx, kubetest.ControllerManagerOptions{
			Controllers: controllers, Flags: opts.ControllerFlags,
		})
	})
	wg.Go(func() { tw.Scheduler, errs[1] = c.StartScheduler(ctx) })
	wg.Go(func() {
		cfg := filepath.Join(c.Dir(), "kwok-stages.yaml")
		if errs[2] = os.WriteFile(cfg, stages(opts.Pods), 0o600); errs[2] != nil {
			return
		}
		tw.Kwok, errs[2] = c.StartKwok(ctx, kubetest.KwokOptions{
			Config: cfg, NodeSelector: nodeLabel + "=true", PodCIDR: PodCIDR, NodeIP: NodeIP,
		})
	})
	wg.Go(func() { tw.Metrics, errs[3] = startMetrics(ctx, c, opts.Tick) })
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return tw, err
	}
	if err := tw.addNodes(ctx); err != nil {
		return tw, err
	}
	tw.startLoop()
	return tw, nil
}

// startMetrics starts the metrics server for the cluster and registers
// it. Every value is reported over a window of one tick: the load model
// serves each tick's usage as it is, not an average over a longer scrape
// (metrics-server's window is its scrape interval, 15 s by default), and
// a longer window would make the HPA count a just-Ready pod as unready for
// that long (its CPU initialization check compares the sample's window
// with the Ready transition).
func startMetrics(ctx context.Context, c *kubetest.Cluster, tick time.Duration) (*metricsserver.Server, error) {
	s, err := metricsserver.Start(metricsserver.Options{ClientCA: c.FrontProxyCAPEM(), Window: tick})
	if err != nil {
		return nil, err
	}
	if err := s.Register(ctx, c.Config()); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// addNodes creates the simulated nodes and waits until kwok has made them
// Ready.
func (tw *Twin) addNodes(ctx context.Context) error {
	nodes := tw.Cluster.Client().CoreV1().Nodes()
	for i := range tw.opts.Nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("twin-node-%d", i),
			Labels: map[string]string{nodeLabel: "true", corev1.LabelHostname: fmt.Sprintf("twin-node-%d", i), corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"},
		}}
		if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("twin: create node: %w", err)
		}
	}
	err := testkit.Poll(ctx, time.Minute, func() error {
		list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: nodeLabel + "=true"})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready < tw.opts.Nodes {
			return fmt.Errorf("%d of %d nodes Ready", ready, tw.opts.Nodes)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("twin: kwok did not make the nodes Ready: %w; kwok log:\n%s", err, tw.Kwok.Log(20))
	}
	return nil
}

// startLoop starts the pod informer and the loop that ticks every load.
func (tw *Twin) startLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	tw.cancel = cancel
	factory := informers.NewSharedInformerFactory(tw.Cluster.Client(), 0)
	inf := factory.Core().V1().Pods().Informer()
	tw.pods = inf.GetIndexer()
	factory.Start(ctx.Done())
	go func() {
		defer close(tw.done)
		defer factory.Shutdown()
		cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
		tick := time.NewTicker(tw.opts.Tick)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				tw.tick(now)
			}
		}
	}()
}

// tick serves one step of every load.
func (tw *Twin) tick(now time.Time) {
	var pods []*corev1.Pod
	for _, o := range tw.pods.List() {
		pods = append(pods, o.(*corev1.Pod))
	}
	tw.mu.Lock()
	loads := append([]*Load(nil), tw.loads...)
	tw.mu.Unlock()
	for _, l := range loads {
		l.tick(now, pods)
	}
}

// AddWorkload starts serving w's load model from now on, until Stop or
// the returned Load's removal with RemoveWorkload.
func (tw *Twin) AddWorkload(w Workload) *Load {
	l := newLoad(w, tw.Metrics, time.Now())
	tw.mu.Lock()
	tw.loads = append(tw.loads, l)
	tw.mu.Unlock()
	return l
}

// RemoveWorkload stops serving l and removes the metrics it served.
func (tw *Twin) RemoveWorkload(l *Load) {
	tw.mu.Lock()
	for i, x := range tw.loads {
		if x == l {
			tw.loads = append(tw.loads[:i], tw.loads[i+1:]...)
			break
		}
	}
	tw.mu.Unlock()
	l.stop()
}

// Pods returns the pods of namespace that match selector, as the twin's
// informer last saw them.
func (tw *Twin) Pods(namespace string, selector map[string]string) []*corev1.Pod {
	sel := labels.SelectorFromSet(selector)
	var out []*corev1.Pod
	for _, o := range tw.pods.List() {
		p := o.(*corev1.Pod)
		if p.Namespace == namespace && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// Pids returns the process ids of the twin's servers by name, for
// measuring what it costs (the metrics server runs inside the caller).
func (tw *Twin) Pids() map[string]int {
	out := map[string]int{}
	for name, p := range map[string]*kubetest.ControllerManager{
		"kube-controller-manager": tw.ControllerManager, "kube-scheduler": tw.Scheduler, "kwok": tw.Kwok,
	} {
		if p != nil {
			out[name] = p.Pid()
		}
	}
	for name, pid := range tw.Cluster.Pids() {
		out[name] = pid
	}
	return out
}

// Logs returns the last n lines of each process's log, headed by its name.
func (tw *Twin) Logs(n int) string {
	s := ""
	for name, p := range map[string]*kubetest.ControllerManager{
		"kube-controller-manager": tw.ControllerManager, "kube-scheduler": tw.Scheduler, "kwok": tw.Kwok,
	} {
		if p != nil {
			s += fmt.Sprintf("%s log (last lines):\n%s\n", name, p.Log(n))
		}
	}
	return s
}

// Stop stops the load loop, the metrics server and every process, and
// removes the cluster's directory. It is idempotent.
func (tw *Twin) Stop() error {
	tw.once.Do(func() {
		if tw.cancel != nil {
			tw.cancel()
			<-tw.done
		}
		var errs []error
		if tw.Metrics != nil {
			errs = append(errs, tw.Metrics.Close())
		}
		errs = append(errs, tw.Cluster.Stop())
		tw.stopErr = errors.Join(errs...)
	})
	return tw.stopErr
}

// RequireBinaries skips the test when the kube binaries and kwok are not
// built yet and the test does not run in CI ($CI is not "true"): building
// them takes minutes (make kube-binaries). In CI the test goes on, and
// Start builds what is missing.
func RequireBinaries(t testing.TB) {
	t.Helper()
	if kubetest.BinariesBuilt(t.Context()) || os.Getenv("CI") == "true" {
		return
	}
	t.Skip("skipping: the kube binaries and kwok are not built (make kube-binaries builds them once, into ~/.cache/setpoint)")
}
