// Package e2e tests the agent end to end: a real kube-apiserver and etcd
// (internal/kubetest), the test metrics server behind the aggregation layer,
// the real Setpoint server in-process over loopback TCP with a bbolt file,
// and agents running against them. No kubelet or controller manager runs
// (but for the one case that starts kube-controller-manager's HPA
// controller, alone): the tests create pods and write their status
// themselves.
//
// One apiserver serves every case; each case has its own namespace and its
// own agent restricted to it, with a 1 s sync period.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
)

// env is what every case shares.
var env struct {
	cluster *kubetest.Cluster
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	metrics *metricsserver.Server
	server  *setpointServer
}

// widgets is the test's custom resource with a scale subresource.
var widgets = schema.GroupVersionResource{Group: "e2e.setpoint.dev", Version: "v1", Resource: "widgets"}

const syncPeriod = time.Second

func TestMain(m *testing.M) {
	if os.Getenv("SETPOINT_E2E_SKIP") != "" {
		fmt.Println("e2e: skipped (SETPOINT_E2E_SKIP is set)")
		os.Exit(0)
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
			goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/watch.(*Broadcaster).loop"),
			goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*Typed[...]).updateUnfinishedWorkLoop"),
			goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"),
			goleak.IgnoreAnyFunction("k8s.io/client-go/tools/events.(*eventBroadcasterImpl).StartRecordingToSinkWithContext.func1"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	crd, err := kubetest.AutoscalerCRD()
	if err != nil {
		return 0, err
	}
	c, err := kubetest.Start(ctx, kubetest.Options{CRDs: [][]byte{crd, []byte(widgetCRD)}})
	if err != nil {
		return 0, err
	}
	defer c.Stop()
	env.cluster, env.kube, env.dyn = c, c.Client(), c.Dynamic()
	if env.metrics, err = metricsserver.StartRegistered(ctx, c); err != nil {
		return 0, err
	}
	defer env.metrics.Close()
	dir, err := os.MkdirTemp("", "setpoint-e2e")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	env.server, err = startServer("127.0.0.1:0", filepath.Join(dir, "setpoint.db"))
	if err != nil {
		return 0, err
	}
	defer env.server.stop()
	fmt.Printf("e2e: apiserver, metrics APIs, CRDs and Setpoint server ready in %v\n", time.Since(start).Round(time.Millisecond))
	return m.Run(), nil
}

// widgetCRD is the test's custom resource with a scale subresource.
const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.setpoint.dev
spec:
  group: e2e.setpoint.dev
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
`

// setpointServer is the real Setpoint server, in-process over TCP with a
// bbolt file.
type setpointServer struct {
	*servertest.Server
	addr string
	path string
}

// startServer serves the Setpoint API on addr ("127.0.0.1:0" picks a port)
// with the store file at path.
func startServer(addr, path string) (*setpointServer, error) {
	var lis net.Listener
	// The port of a stopped server may linger briefly.
	err := testkit.Poll(context.Background(), 5*time.Second, func() (err error) {
		lis, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	srv, err := servertest.Run(servertest.Config{Path: path, Listener: lis,
		Options: server.Options{ShutdownTimeout: time.Second, ExpireAfter: -1}})
	if err != nil {
		return nil, err
	}
	return &setpointServer{Server: srv, addr: srv.Addr, path: srv.Path}, nil
}

// stop shuts the server down and closes its store.
func (s *setpointServer) stop() {
	if err := s.Stop(); err != nil {
		log.Printf("e2e: stop the server: %v", err)
	}
}

// dial connects to a Setpoint server, reconnecting quickly.
func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// agentConfig tunes one test agent.
type agentConfig struct {
	// addr is the Setpoint server; env.server when empty.
	addr string
	// wrap, when set, wraps the Service the agent calls.
	wrap func(agent.Service) agent.Service
	// settings are sent in each request.
	settings agent.Settings
	// rest is the agent's identity; the cluster admin when nil.
	rest *rest.Config
	// serve is which kinds the agent serves; Autoscalers when empty.
	serve agent.Serve
	// standDown is the agent's StandDownWindow; its default when zero.
	standDown time.Duration
	// prometheus records the agent's metrics; none when nil.
	prometheus *agent.Metrics
}

// testAgent is one agent run by a test.
type testAgent struct {
	cancel context.CancelFunc
	done   chan struct{}
	stop   sync.Once
}

// kill stops the agent without releasing anything, as a crash would; it
// returns when the agent's goroutines have ended.
func (a *testAgent) kill() {
	a.stop.Do(func() {
		a.cancel()
		<-a.done
	})
}

func agentOptions(t *testing.T, ns string, cfg agentConfig) (agent.Options, func()) {
	t.Helper()
	restCfg := cfg.rest
	if restCfg == nil {
		restCfg = env.cluster.Config()
	}
	// The shipped client settings: the harness's own QPS is replaced.
	clients, err := agent.NewKubeClients(restCfg, agent.KubeClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := cfg.addr
	if addr == "" {
		addr = env.server.addr
	}
	var svc agent.Service = agent.NewGRPCService(dial(t, addr))
	if cfg.wrap != nil {
		svc = cfg.wrap(svc)
	}
	bctx, bcancel := context.WithCancel(context.Background())
	recorders := agent.StartEventRecorders(bctx, clients.Kube)
	opts := clients.Options()
	opts.Service = svc
	opts.Events = recorders.Autoscalers
	opts.HPAEvents = recorders.HPAs
	opts.Serve = cfg.serve
	opts.StandDownWindow = cfg.standDown
	opts.Prometheus = cfg.prometheus
	opts.Cluster = "e2e"
	opts.Settings = cfg.settings
	opts.SyncPeriod = syncPeriod
	opts.RecommendTimeout = 2 * time.Second
	opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 2*time.Second)
	return opts, func() { recorders.Stop(); bcancel() }
}

// runAgent runs a controller with opts over namespace ns until ctx ends,
// as cmd/setpoint-agent runs one term: the caller's informer factories
// give the controller its informers, are started once it has added its
// handlers, and are shut down after its workers stopped.
func runAgent(ctx context.Context, ns string, opts agent.Options) error {
	kube := informers.NewSharedInformerFactoryWithOptions(opts.Kube, 0, informers.WithNamespace(ns))
	dynamic := dynamicinformer.NewFilteredDynamicSharedInformerFactory(opts.Dynamic, 0, ns, nil)
	opts.Informers = agent.InformersFrom(opts.Serve, kube, dynamic)
	c, err := agent.New(opts)
	if err != nil {
		return err
	}
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

// startAgent runs an agent for namespace ns until the test ends.
func startAgent(t *testing.T, ns string, cfg agentConfig) *testAgent {
	t.Helper()
	opts, cleanup := agentOptions(t, ns, cfg)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithValues("ns", ns)))
	a := &testAgent{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		defer cleanup()
		if err := runAgent(ctx, ns, opts); err != nil && ctx.Err() == nil {
			t.Errorf("agent: %v", err)
		}
	}()
	t.Cleanup(a.kill)
	return a
}

// startLeaderAgent runs an agent for namespace ns that reconciles only
// while it holds the Lease leaseNS/setpoint-agent.
func startLeaderAgent(t *testing.T, ns, leaseNS, identity string, cfg agentConfig) *testAgent {
	t.Helper()
	opts, cleanup := agentOptions(t, ns, cfg)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithValues("ns", ns, "identity", identity)))
	a := &testAgent{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		defer cleanup()
		_ = agent.RunLeader(ctx, agent.LeaderElection{
			Client: opts.Kube, Namespace: leaseNS, Name: "setpoint-agent", Identity: identity,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
		}, func(ctx context.Context) {
			if err := runAgent(ctx, ns, opts); err != nil && ctx.Err() == nil {
				t.Errorf("agent: %v", err)
			}
		})
	}()
	t.Cleanup(a.kill)
	return a
}

func newNamespace(t *testing.T, name string) string {
	t.Helper()
	if _, err := env.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

func createDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
			},
		},
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podSpec describes a pod the test creates and "runs".
type podSpec struct {
	name       string
	labels     map[string]string
	cpuRequest string
	ready      bool
	// startedAgo is how long ago the pod started; readyAgo how long ago
	// its Ready condition last changed.
	startedAgo, readyAgo time.Duration
}

// createPod creates a pod and writes its status as a kubelet would.
func createPod(t *testing.T, ns string, p podSpec) {
	t.Helper()
	ctx := t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.name, Labels: p.labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "example.invalid/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(p.cpuRequest)}},
		}}},
	}
	created, err := env.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ready := corev1.ConditionFalse
	if p.ready {
		ready = corev1.ConditionTrue
	}
	created.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		StartTime:  &metav1.Time{Time: now.Add(-p.startedAgo)},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(now.Add(-p.readyAgo))}},
	}
	if _, err := env.kube.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningPods creates n ready pods started 10 minutes ago, with their CPU
// usage set in the metrics server.
func runningPods(t *testing.T, ns, app string, n int, request, usage string) {
	t.Helper()
	labels := map[string]string{"app": app}
	for i := range n {
		name := fmt.Sprintf("%s-%d", app, i)
		createPod(t, ns, podSpec{name: name, labels: labels, cpuRequest: request, ready: true, startedAgo: 10 * time.Minute, readyAgo: 9 * time.Minute})
		env.metrics.SetPodUsage(ns, name, labels, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(usage)})
	}
}

func createAutoscaler(t *testing.T, ns, name string, spec v1alpha1.AutoscalerSpec) {
	t.Helper()
	a := &v1alpha1.Autoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	u, err := v1alpha1.ToUnstructured(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func autoscaler(t *testing.T, ns, name string) *v1alpha1.Autoscaler {
	t.Helper()
	u, err := env.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := v1alpha1.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func updateAutoscaler(t *testing.T, ns, name string, mutate func(*v1alpha1.AutoscalerSpec)) {
	t.Helper()
	res := env.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(ns)
	testkit.Eventually(t, 10*time.Second, "the autoscaler updated", func() error {
		a := autoscaler(t, ns, name)
		mutate(&a.Spec)
		u, err := v1alpha1.ToUnstructured(a)
		if err != nil {
			return err
		}
		_, err = res.Update(t.Context(), u, metav1.UpdateOptions{})
		return err
	})
}

func deploymentReplicas(t *testing.T, ns, name string) int32 {
	t.Helper()
	d, err := env.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// waitFor polls cond until it holds (testkit.Eventually), failing the test
// with its last description after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testkit.Eventually(t, timeout, what, func() error {
		if ok, desc := cond(); !ok {
			return errors.New(desc)
		}
		return nil
	})
}

func waitReplicas(t *testing.T, ns, name string, want int32, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%s/%s at %d replicas", ns, name, want), func() (bool, string) {
		got := deploymentReplicas(t, ns, name)
		return got == want, fmt.Sprintf("replicas %d; status %s", got, statusText(t, ns, name))
	})
}

// holdsReplicas checks that the deployment stays at want for d.
func holdsReplicas(t *testing.T, ns, name string, want int32, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if got := deploymentReplicas(t, ns, name); got != want {
			t.Fatalf("%s/%s changed to %d replicas, want it held at %d; status %s", ns, name, got, want, statusText(t, ns, name))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func condition(a *v1alpha1.Autoscaler, ct autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range a.Status.Conditions {
		if a.Status.Conditions[i].Type == ct {
			return &a.Status.Conditions[i]
		}
	}
	return nil
}

// statusText renders the status of the Autoscaler ns/name, or of the HPA
// of that name when there is no such Autoscaler, for failure messages.
func statusText(t *testing.T, ns, name string) string {
	u, err := env.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		if h, herr := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{}); herr == nil {
			return hpaText(h)
		}
		return err.Error()
	}
	a, err := v1alpha1.FromUnstructured(u)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "current=%d desired=%d targets=%q", a.Status.CurrentReplicas, a.Status.DesiredReplicas, a.Status.Targets)
	for _, c := range a.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	if e := a.Status.Explanation; e != nil {
		fmt.Fprintf(&b, " explanation=%q", e.Summary)
	}
	return b.String()
}

// eventsOf lists the Events about an Autoscaler as `kubectl describe`
// shows them: "Type Reason Message".
func eventsOf(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := env.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Autoscaler,involvedObject.name=" + name,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Type+" "+e.Reason+" "+e.Message)
	}
	return out
}

func waitEvent(t *testing.T, ns, name, prefix string) {
	t.Helper()
	waitFor(t, 10*time.Second, "event "+prefix, func() (bool, string) {
		evs := eventsOf(t, ns, name)
		for _, e := range evs {
			if strings.HasPrefix(e, prefix) {
				return true, ""
			}
		}
		return false, strings.Join(evs, " | ")
	})
}

// targetKnown reports whether the Setpoint server holds the target.
func targetKnown(t *testing.T, ns, name string) bool {
	t.Helper()
	client := setpointv1.NewAutoscalerServiceClient(dial(t, env.server.addr))
	resp, err := client.ListTargets(t.Context(), &setpointv1.ListTargetsRequest{Cluster: "e2e", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range resp.GetTargets() {
		if tg.GetKey().GetName() == name {
			return true
		}
	}
	return false
}
