package differential

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/server"
)

// settings are the controller-wide HPA settings both sides run with: the
// kube-controller-manager flags and the agent's Settings say the same.
type settings struct {
	sync                 time.Duration
	tolerance            float64
	cpuInitialization    time.Duration
	initialReadiness     time.Duration
	downscaleStabilizing time.Duration
}

// short are CI's settings: the controller defaults, with the sync period
// and the default scale-down window cut so that a case takes seconds.
var short = settings{sync: time.Second, tolerance: 0.1, cpuInitialization: 5 * time.Minute, initialReadiness: 30 * time.Second, downscaleStabilizing: 5 * time.Second}

// long are the controller defaults but for the sync period.
var long = settings{sync: 5 * time.Second, tolerance: 0.1, cpuInitialization: 5 * time.Minute, initialReadiness: 30 * time.Second, downscaleStabilizing: 5 * time.Minute}

// env is what every case shares.
var env struct {
	// withKCM is the API server kube-controller-manager's HPA controller
	// serves; the Setpoint agents there serve Autoscalers only.
	withKCM *kubetest.Cluster
	// native is a second API server with no controller manager, where
	// the Setpoint agents serve HorizontalPodAutoscalers themselves.
	native *kubetest.Cluster
	// metrics serves the metrics APIs to both API servers.
	metrics  *metricsserver.Server
	kcm      *kubetest.ControllerManager
	settings settings
	// scale stretches every wait: 1 in CI, more in long runs.
	scale time.Duration
}

func TestMain(m *testing.M) {
	if os.Getenv("SETPOINT_DIFFERENTIAL_SKIP") != "" {
		fmt.Println("differential: skipped (SETPOINT_DIFFERENTIAL_SKIP is set)")
		os.Exit(0)
	}
	env.settings, env.scale = short, 1
	// The cases mostly wait out sync periods and windows: run them all at
	// once, not GOMAXPROCS at a time, unless -parallel says otherwise.
	flag.Parse()
	parallel := false
	flag.Visit(func(f *flag.Flag) { parallel = parallel || f.Name == "test.parallel" })
	if !parallel {
		if err := flag.Set("test.parallel", fmt.Sprint(len(cases()))); err != nil {
			fmt.Fprintln(os.Stderr, "differential:", err)
			os.Exit(1)
		}
	}
	if os.Getenv("SETPOINT_DIFFERENTIAL_LONG") != "" {
		env.settings, env.scale = long, 5
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "differential:", err)
		os.Exit(1)
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
	// The two API servers start side by side.
	var clusters [2]*kubetest.Cluster
	var errs [2]error
	var wg sync.WaitGroup
	for i := range clusters {
		wg.Go(func() { clusters[i], errs[i] = kubetest.Start(ctx, kubetest.Options{CRDs: [][]byte{crd}}) })
	}
	wg.Wait()
	for _, c := range clusters {
		if c != nil {
			defer c.Stop()
		}
	}
	if err := errors.Join(errs[:]...); err != nil {
		return 0, err
	}
	env.withKCM, env.native = clusters[0], clusters[1]
	if env.metrics, err = metricsserver.StartRegistered(ctx, env.withKCM, env.native); err != nil {
		return 0, err
	}
	defer env.metrics.Close()
	s := env.settings
	env.kcm, err = env.withKCM.StartControllerManager(ctx, kubetest.ControllerManagerOptions{Flags: []string{
		"--horizontal-pod-autoscaler-sync-period=" + s.sync.String(),
		"--horizontal-pod-autoscaler-tolerance=" + fmt.Sprint(s.tolerance),
		"--horizontal-pod-autoscaler-cpu-initialization-period=" + s.cpuInitialization.String(),
		"--horizontal-pod-autoscaler-initial-readiness-delay=" + s.initialReadiness.String(),
		"--horizontal-pod-autoscaler-downscale-stabilization=" + s.downscaleStabilizing.String(),
	}})
	if err != nil {
		return 0, err
	}
	fmt.Printf("differential: two apiservers, metrics APIs, CRD and kube-controller-manager ready in %v\n", time.Since(start).Round(time.Millisecond))
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "differential: kube-controller-manager log (last lines):\n%s\n", env.kcm.Log(40))
	}
	return code, nil
}

// startAgent runs a Setpoint agent for namespace ns of cluster c, serving
// the kinds serve names, against the Setpoint server at addr, until the
// test ends or the returned stop is called (stop may be called more than
// once). It runs with the same controller settings as
// kube-controller-manager.
func startAgent(t *testing.T, c *kubetest.Cluster, ns, addr string, serve agent.Serve) (stop func()) {
	t.Helper()
	clients, err := agent.NewKubeClients(c.Config(), agent.KubeClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithValues("ns", ns)))
	recorders := agent.StartEventRecorders(ctx, clients.Kube)
	s := env.settings
	opts := clients.Options()
	opts.Service = agent.NewGRPCService(conn)
	opts.Events, opts.HPAEvents = recorders.Autoscalers, recorders.HPAs
	opts.Serve = serve
	// The server keeps the two API servers' targets apart by cluster.
	opts.Cluster = "with-kcm"
	if c == env.native {
		opts.Cluster = "native"
	}
	opts.Settings = agent.Settings{
		Tolerance:                    ptr.To(s.tolerance),
		CPUInitializationPeriod:      ptr.To(s.cpuInitialization),
		InitialReadinessDelay:        ptr.To(s.initialReadiness),
		DownscaleStabilizationWindow: ptr.To(s.downscaleStabilizing),
	}
	opts.SyncPeriod = s.sync
	opts.RecommendTimeout = 5 * time.Second
	opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, s.sync)
	// The informers are the caller's, as in cmd/setpoint-agent: started
	// once the controller has added its handlers, shut down after it.
	kube := informers.NewSharedInformerFactoryWithOptions(clients.Kube, 0, informers.WithNamespace(ns))
	dynamic := dynamicinformer.NewFilteredDynamicSharedInformerFactory(clients.Dynamic, 0, ns, nil)
	opts.Informers = agent.InformersFrom(serve, kube, dynamic)
	ctrl, err := agent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	kube.Start(ctx.Done())
	dynamic.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ctrl.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("agent: %v", err)
		}
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		<-done
		kube.Shutdown()
		dynamic.Shutdown()
		recorders.Stop()
		conn.Close()
	})
	t.Cleanup(stop)
	return stop
}

// startServer runs the Setpoint server for the test.
func startServer(t *testing.T) string {
	return servertest.Start(t, servertest.Config{Options: server.Options{ShutdownTimeout: time.Second, ExpireAfter: -1}}).Addr
}
