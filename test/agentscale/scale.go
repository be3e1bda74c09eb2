package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/server"
)

// config is one run of the benchmark.
type config struct {
	counts []int
	// serves are the agent's -serve values measured at each N, in order:
	// "autoscalers" (Autoscaler objects) and "hpas" (HorizontalPodAutoscalers,
	// native mode). Empty means autoscalers only.
	serves     []string
	syncPeriod time.Duration
	window     time.Duration
	podsPer    int
	kubeBin    string
	// profileDir, when set, receives the agent's CPU profile over each
	// window as cpu-N.pprof (the agent runs with -profiling).
	profileDir string
	// log reports progress.
	log func(format string, args ...any)
}

// point is what one N measured.
type point struct {
	n int
	// serve is what the agent served: autoscalers or hpas.
	serve string
	// firstStatus is from the agent's start until every Autoscaler had a
	// status.
	firstStatus time.Duration
	// reconcilesPerSec, over the steady window.
	reconcilesPerSec float64
	// intervalP50, intervalP99 are the reconcile interval of a key over
	// the sync period.
	intervalP50, intervalP99 float64
	// cpuPerReconcile is the agent's CPU time per reconcile.
	cpuPerReconcile time.Duration
	// heapPerAutoscaler is the agent's live heap over n.
	heapPerAutoscaler float64
	heapLive          float64
	// requestsPerReconcile are the agent's Kubernetes API requests per
	// reconcile; writesPerReconcile the PUTs and PATCHes among them.
	requestsPerReconcile, writesPerReconcile float64
	// throttled is the time requests waited for the client-side limit
	// during the window.
	throttled time.Duration
	// busyWorkers is the mean number of reconciles in flight (reconcile
	// time over the window) against the agent's workers; recommendShare
	// the part of a reconcile spent waiting for the Setpoint service.
	busyWorkers, recommendShare float64
	// stopTime is from SIGTERM to the agent's exit; stopErrors the error
	// lines it logged meanwhile, stopKeyLines the lines naming an
	// Autoscaler.
	stopTime                 time.Duration
	stopErrors, stopKeyLines int
	// load is the machine's 1-minute load average at the window's end.
	load string
	err  error
}

// env is the system under test but the agent.
type env struct {
	cfg        config
	dir        string
	cluster    *kubetest.Cluster
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	metrics    *metricsserver.Server
	serverAddr string
	agentBin   string
	kubeconfig string
	targets    int // Deployments with pods created so far
}

func run(ctx context.Context, cfg config) ([]point, error) {
	sort.Ints(cfg.counts)
	e, cleanup, err := start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	serves := cfg.serves
	if len(serves) == 0 {
		serves = []string{"autoscalers"}
	}
	var points []point
	for i, n := range cfg.counts {
		for j, serve := range serves {
			p := e.measure(ctx, n, serve, fmt.Sprintf("r%d-%d", i, j))
			points = append(points, p)
			if p.err != nil {
				return points, p.err
			}
		}
	}
	return points, nil
}

// start brings up the cluster, the metrics APIs, the CRD, the Setpoint
// server, and builds the agent.
func start(ctx context.Context, cfg config) (*env, func(), error) {
	e := &env{cfg: cfg}
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) (*env, func(), error) { cleanup(); return nil, nil, err }
	dir, err := os.MkdirTemp("", "agentscale-")
	if err != nil {
		return fail(err)
	}
	e.dir = dir
	cleanups = append(cleanups, func() { os.RemoveAll(dir) })

	root, err := moduleRoot()
	if err != nil {
		return fail(err)
	}
	e.agentBin = filepath.Join(dir, "setpoint-agent")
	cfg.log("building setpoint-agent")
	build := exec.CommandContext(ctx, "go", "build", "-o", e.agentBin, "./cmd/setpoint-agent")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fail(fmt.Errorf("build setpoint-agent: %w", err))
	}

	cfg.log("starting kube-apiserver and etcd")
	c, err := kubetest.Start(ctx, kubetest.Options{BinDir: cfg.kubeBin})
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = c.Stop() })
	e.cluster = c
	setup := c.Config()
	setup.QPS, setup.Burst = 1000, 2000 // the harness's own writes, not the agent's
	if e.kube, err = kubernetes.NewForConfig(setup); err != nil {
		return fail(err)
	}
	if e.dyn, err = dynamic.NewForConfig(setup); err != nil {
		return fail(err)
	}
	e.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(e.kubeconfig); err != nil {
		return fail(err)
	}
	ms, err := metricsserver.Start(metricsserver.Options{ClientCA: c.FrontProxyCAPEM()})
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = ms.Close() })
	if err := ms.Register(ctx, c.Config()); err != nil {
		return fail(err)
	}
	e.metrics = ms
	crd, err := os.ReadFile(filepath.Join(root, "deploy", "setpoint.dev_autoscalers.yaml"))
	if err != nil {
		return fail(err)
	}
	if err := c.InstallCRD(ctx, crd); err != nil {
		return fail(err)
	}

	// The Setpoint server on its defaults, its logs (warnings and above)
	// in a file: a line per call would cost the machine more than the
	// calls.
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { logFile.Close() })
	srv, err := servertest.Run(servertest.Config{Dir: dir,
		Options: server.Options{Logger: slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))}})
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = srv.Stop() })
	e.serverAddr = srv.Addr
	return e, cleanup, nil
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the setpoint module")
	}
	return filepath.Dir(mod), nil
}

// namespaceOf spreads the targets over namespaces of 1,000.
func namespaceOf(i int) string { return fmt.Sprintf("scale-%d", i/1000) }

// ensureTargets creates Deployments with running pods (CPU request 100m,
// usage 50m: at a 50% target, nothing to change) up to n.
func (e *env) ensureTargets(ctx context.Context, n int) error {
	if n <= e.targets {
		return nil
	}
	e.cfg.log("creating targets %d..%d (%d pods each)", e.targets, n-1, e.cfg.podsPer)
	for i := e.targets; i < n; i += 1000 {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceOf(i)}}
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	err := parallel(ctx, e.targets, n, func(ctx context.Context, i int) error {
		ns, name := namespaceOf(i), fmt.Sprintf("app-%d", i)
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(e.cfg.podsPer)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
				},
			},
		}
		if _, err := e.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		for j := range e.cfg.podsPer {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, j), Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "example.invalid/app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				}}},
			}
			created, err := e.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			started := metav1.NewTime(time.Now().Add(-10 * time.Minute))
			created.Status = corev1.PodStatus{
				Phase:      corev1.PodRunning,
				StartTime:  &started,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}},
			}
			if _, err := e.kube.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return err
			}
			e.metrics.SetPodUsage(ns, pod.Name, labels, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")})
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.targets = n
	return nil
}

// createAutoscalers creates n autoscalers named <prefix>-<i>, one per
// target: Autoscalers, or HorizontalPodAutoscalers when serve is "hpas".
func (e *env) createAutoscalers(ctx context.Context, n int, serve, prefix string) error {
	return parallel(ctx, 0, n, func(ctx context.Context, i int) error {
		ns := namespaceOf(i)
		meta := metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", prefix, i)}
		spec := autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: fmt.Sprintf("app-%d", i)},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		}
		if serve == "hpas" {
			_, err := e.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{})
			return err
		}
		a := &v1alpha1.Autoscaler{
			ObjectMeta: meta,
			Spec:       v1alpha1.AutoscalerSpec{ScaleTargetRef: spec.ScaleTargetRef, MinReplicas: spec.MinReplicas, MaxReplicas: spec.MaxReplicas, Metrics: spec.Metrics},
		}
		u, err := v1alpha1.ToUnstructured(a)
		if err != nil {
			return err
		}
		_, err = e.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		return err
	})
}

// deleteAutoscalers deletes every Autoscaler and HPA (the agent is
// stopped).
func (e *env) deleteAutoscalers(ctx context.Context) error {
	for i := 0; i < e.targets; i += 1000 {
		err := e.dyn.Resource(v1alpha1.AutoscalerResource).Namespace(namespaceOf(i)).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil {
			return err
		}
		err = e.kube.AutoscalingV2().HorizontalPodAutoscalers(namespaceOf(i)).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil {
			return err
		}
	}
	return nil
}

// withStatus counts the autoscalers of the kind served that have a status
// written by the agent (an observed generation).
func (e *env) withStatus(ctx context.Context, serve string) (int, error) {
	if serve == "hpas" {
		list, err := e.kube.AutoscalingV2().HorizontalPodAutoscalers("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, h := range list.Items {
			if ptr.Deref(h.Status.ObservedGeneration, 0) > 0 {
				n++
			}
		}
		return n, nil
	}
	list, err := e.dyn.Resource(v1alpha1.AutoscalerResource).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if g, ok, _ := nestedInt(list.Items[i].Object, "status", "observedGeneration"); ok && g > 0 {
			n++
		}
	}
	return n, nil
}

func nestedInt(obj map[string]any, fields ...string) (int64, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[f]
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	}
	return 0, false, nil
}

// parallel runs f for i in [from, to) on 16 goroutines, stopping at the
// first error.
func parallel(ctx context.Context, from, to int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		}()
	}
	for i := from; i < to && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// measure runs one point: fresh autoscalers of the kind serve names, a
// fresh agent serving them.
func (e *env) measure(ctx context.Context, n int, serve, prefix string) (p point) {
	p.n, p.serve = n, serve
	fail := func(err error) point { p.err = fmt.Errorf("N=%d, -serve=%s: %w", n, serve, err); return p }
	if err := e.ensureTargets(ctx, n); err != nil {
		return fail(err)
	}
	if err := e.deleteAutoscalers(ctx); err != nil {
		return fail(err)
	}
	e.cfg.log("N=%d: creating autoscalers (-serve=%s)", n, serve)
	if err := e.createAutoscalers(ctx, n, serve, prefix); err != nil {
		return fail(err)
	}

	a, err := e.startAgent(n, serve)
	if err != nil {
		return fail(err)
	}
	defer a.kill()
	e.cfg.log("N=%d: agent started; waiting for every status", n)
	for {
		got, err := e.withStatus(ctx, serve)
		if err != nil {
			return fail(err)
		}
		if got >= n {
			p.firstStatus = time.Since(a.started)
			break
		}
		if time.Since(a.started) > 20*time.Minute {
			return fail(fmt.Errorf("%d of %d Autoscalers have a status after 20m", got, n))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-a.exited:
			return fail(fmt.Errorf("agent exited; see %s", a.logPath))
		case <-time.After(time.Second):
		}
	}
	// Let the first round pass: a key's second reconcile comes 0.5–1.5
	// periods after its first, on its phase; from then on, one period.
	e.cfg.log("N=%d: every status in %v; settling for two sync periods", n, p.firstStatus.Round(time.Millisecond))
	if err := sleep(ctx, 2*e.cfg.syncPeriod); err != nil {
		return fail(err)
	}
	before, err := a.sample()
	if err != nil {
		return fail(err)
	}
	e.cfg.log("N=%d: measuring for %v", n, e.cfg.window)
	profiled := make(chan error, 1)
	if e.cfg.profileDir != "" {
		go func() {
			profiled <- a.profile(e.cfg.window, filepath.Join(e.cfg.profileDir, fmt.Sprintf("cpu-%d.pprof", n)))
		}()
	} else {
		profiled <- nil
	}
	if err := sleep(ctx, e.cfg.window); err != nil {
		return fail(err)
	}
	if err := <-profiled; err != nil {
		return fail(err)
	}
	after, err := a.sample()
	if err != nil {
		return fail(err)
	}
	p.load = loadAverage()
	reconciles := after.reconciles - before.reconciles
	if reconciles <= 0 {
		return fail(errors.New("no reconcile in the window"))
	}
	elapsed := after.at.Sub(before.at)
	p.reconcilesPerSec = reconciles / elapsed.Seconds()
	p.cpuPerReconcile = time.Duration(float64(after.cpu-before.cpu) / reconciles)
	p.requestsPerReconcile = (after.requests - before.requests) / reconciles
	p.writesPerReconcile = (after.puts - before.puts) / reconciles
	p.throttled = time.Duration((after.throttled - before.throttled) * float64(time.Second))
	p.heapLive = after.heapLive
	busy := after.reconcileSeconds - before.reconcileSeconds
	p.busyWorkers = busy / elapsed.Seconds()
	if busy > 0 {
		p.recommendShare = (after.recommendSeconds - before.recommendSeconds) / busy
	}
	p.heapPerAutoscaler = after.heapLive / float64(n)
	delta := map[float64]float64{}
	for le, c := range after.interval {
		delta[le] = c - before.interval[le]
	}
	p.intervalP50, p.intervalP99 = quantile(delta, 0.5), quantile(delta, 0.99)

	e.cfg.log("N=%d: stopping the agent", n)
	p.stopTime, p.stopErrors, p.stopKeyLines, err = a.stop()
	if err != nil {
		return fail(err)
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// loadAverage is the machine's 1, 5 and 15-minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// quantile is the q-quantile of a cumulative histogram (upper bound →
// count), interpolated linearly within the bucket as Prometheus'
// histogram_quantile does.
func quantile(buckets map[float64]float64, q float64) float64 {
	les := make([]float64, 0, len(buckets))
	for le := range buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 || buckets[les[len(les)-1]] == 0 {
		return math.NaN()
	}
	rank := q * buckets[les[len(les)-1]]
	lower, below := 0.0, 0.0
	for _, le := range les {
		c := buckets[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if c == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(c-below)
		}
		lower, below = le, c
	}
	return lower
}

// agentProc is a running setpoint-agent.
type agentProc struct {
	cmd         *exec.Cmd
	started     time.Time
	metricsAddr string
	logPath     string
	log         *os.File
	exited      chan struct{}
}

func (e *env) startAgent(n int, serve string) (*agentProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	a := &agentProc{metricsAddr: fmt.Sprintf("127.0.0.1:%d", port), logPath: filepath.Join(e.dir, fmt.Sprintf("agent-%d-%s.log", n, serve)), exited: make(chan struct{})}
	if a.log, err = os.Create(a.logPath); err != nil {
		return nil, err
	}
	// The agent's defaults, but what a test setup must say: where things
	// are, no TLS, one replica.
	args := []string{
		"-kubeconfig", e.kubeconfig,
		"-service-address", e.serverAddr, "-insecure",
		"-cluster-name", "scale",
		"-leader-elect=false",
		"-metrics-address", a.metricsAddr,
		"-serve", serve,
	}
	if e.cfg.profileDir != "" {
		args = append(args, "-profiling")
	}
	if e.cfg.syncPeriod != 15*time.Second {
		args = append(args, "-sync-period", e.cfg.syncPeriod.String())
	}
	a.cmd = exec.Command(e.agentBin, args...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	a.started = time.Now()
	if err := a.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	return a, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// profile writes the agent's CPU profile over d to path.
func (a *agentProc) profile(d time.Duration, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", a.metricsAddr, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// kill ends the agent if it still runs.
func (a *agentProc) kill() {
	select {
	case <-a.exited:
	default:
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
	a.log.Close()
}

// stop sends SIGTERM and waits for the exit; it returns how long that
// took and, among the lines logged after the signal, the error lines and
// those naming an Autoscaler.
func (a *agentProc) stop() (time.Duration, int, int, error) {
	off, err := a.log.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, 0, 0, err
	}
	select {
	case <-a.exited:
	case <-time.After(time.Minute):
		return 0, 0, 0, errors.New("agent did not exit within 1m of SIGTERM")
	}
	took := time.Since(start)
	f, err := os.Open(a.logPath)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, 0, 0, err
	}
	errLines, keyLines := 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "E") {
			errLines++
		}
		if strings.Contains(line, "autoscaler=") {
			keyLines++
		}
	}
	return took, errLines, keyLines, sc.Err()
}

// sample is what the agent's /metrics and /proc say at one time.
type sample struct {
	at                                              time.Time
	reconciles, requests, puts, throttled, heapLive float64
	reconcileSeconds, recommendSeconds              float64
	interval                                        map[float64]float64
	cpu                                             time.Duration
}

func (a *agentProc) sample() (sample, error) {
	s := sample{at: time.Now(), interval: map[float64]float64{}}
	resp, err := http.Get("http://" + a.metricsAddr + "/metrics")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, labels, value, ok := parseSample(sc.Text())
		if !ok {
			continue
		}
		switch name {
		case "setpoint_agent_reconciles_total":
			s.reconciles += value
		case "setpoint_agent_kube_requests_total":
			s.requests += value
			// Status writes are PUTs, an HPA's annotations a PATCH.
			if labels["method"] == "PUT" || labels["method"] == "PATCH" {
				s.puts += value
			}
		case "setpoint_agent_kube_client_throttled_seconds_total":
			s.throttled = value
		case "setpoint_agent_reconciliation_duration_seconds_sum":
			s.reconcileSeconds += value
		case "setpoint_agent_recommend_duration_seconds_sum":
			s.recommendSeconds += value
		case "go_gc_heap_live_bytes":
			s.heapLive = value
		case "setpoint_agent_reconcile_interval_ratio_bucket":
			le, err := strconv.ParseFloat(labels["le"], 64)
			if err == nil {
				s.interval[le] = value
			}
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	s.cpu, err = processCPU(a.cmd.Process.Pid)
	return s, err
}

// parseSample parses one line of the Prometheus text format.
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	head := line[:sp]
	labels = map[string]string{}
	if i := strings.IndexByte(head, '{'); i >= 0 {
		name = head[:i]
		for _, kv := range strings.Split(strings.TrimSuffix(head[i+1:], "}"), ",") {
			k, val, found := strings.Cut(kv, "=")
			if found {
				labels[k] = strings.Trim(val, `"`)
			}
		}
	} else {
		name = head
	}
	return name, labels, v, true
}

// processCPU is the user and system CPU time of process pid.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// printTable writes the points as a Markdown table.
func printTable(w io.Writer, cfg config, points []point) {
	fmt.Fprintf(w, "\nsetpoint-agent on its defaults, sync period %v, %d pods per target, window %v\n\n", cfg.syncPeriod, cfg.podsPer, cfg.window)
	fmt.Fprintln(w, "| N | serves | all statuses | reconciles/s | interval p50 / p99 (× period) | agent CPU / reconcile | live heap (per Autoscaler) | API requests / reconcile (writes) | throttled | busy workers (service share) | SIGTERM: exit, error lines, per-key lines | load avg |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, p := range points {
		if p.err != nil {
			fmt.Fprintf(w, "| %d | %s | failed: %v |\n", p.n, p.serve, p.err)
			continue
		}
		fmt.Fprintf(w, "| %d | %s | %.1f s | %.0f | %.2f / %.2f | %.2f ms | %.1f MB (%.1f KB) | %.2f (%.2f) | %v | %.1f (%.0f%%) | %.1f s, %d, %d | %s |\n",
			p.n, p.serve, p.firstStatus.Seconds(), p.reconcilesPerSec, p.intervalP50, p.intervalP99,
			float64(p.cpuPerReconcile)/float64(time.Millisecond), p.heapLive/1e6, p.heapPerAutoscaler/1e3,
			p.requestsPerReconcile, p.writesPerReconcile, p.throttled.Round(time.Millisecond), p.busyWorkers, 100*p.recommendShare,
			p.stopTime.Seconds(), p.stopErrors, p.stopKeyLines, p.load)
	}
}
