// Command twin runs a fleet on loopback for a person to look at: N cluster
// twins (internal/twin: kube-apiserver, the workload controllers,
// kube-scheduler, kwok nodes and pods, closed-loop load), each with its
// own setpoint-agent and mTLS identity, against the HA Setpoint service
// (servers on a three-member etcd) whose first server serves the web
// console. Each cluster's Deployment "shop/web" is scaled by a Setpoint
// Autoscaler under the chosen load trace. It prints where to look, a line
// per cluster every few seconds, and stops everything on Ctrl-C.
//
//	make twin                             # 3 clusters, the ramp trace
//	make twin TWIN_FLAGS='-clusters 2 -trace diurnal -speed 10'
//	make twin TWIN_FLAGS='-screenshot docs/img'   # write the console's PNGs and stop
//
// With -screenshot DIR it waits until the trace has peaked and every
// cluster has settled at more than one Ready replica, writes the console's
// targets list and cluster a's target page as PNGs (headless Chromium,
// signed in with the printed token), and stops.
//
// It runs setpoint-server and setpoint-agent from ./bin (make build) and
// the kube binaries from hack/kube-binaries.sh's cache. docs/fleet-twin.md.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/twin"
)

// config is the command's flags.
type config struct {
	clusters    int
	servers     int
	trace       string
	speed       float64
	sync        time.Duration
	downscale   time.Duration
	bin         string
	root        string
	statusEvery time.Duration
	screenshot  string
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.clusters, "clusters", 3, "cluster twins to run (named a, b, c, …)")
	fs.IntVar(&c.servers, "servers", 3, "setpoint-server replicas on the three-member etcd")
	fs.StringVar(&c.trace, "trace", "ramp", "load trace of every cluster: steady, ramp, spike, diurnal or flapping")
	fs.Float64Var(&c.speed, "speed", 4, "stretch the trace by this factor (1: the CI test's minute; larger: slower)")
	fs.DurationVar(&c.sync, "sync-period", 5*time.Second, "the agents' sync period")
	fs.DurationVar(&c.downscale, "downscale-stabilization", time.Minute, "the agents' default scale-down window")
	fs.StringVar(&c.bin, "bin", "bin", "directory with setpoint-server and setpoint-agent (make build)")
	fs.StringVar(&c.root, "root", ".", "the repository root (deploy-ha's manifests give the flags)")
	fs.DurationVar(&c.statusEvery, "status-every", 5*time.Second, "how often to print each cluster's line")
	fs.StringVar(&c.screenshot, "screenshot", "", "once the clusters have scaled up, write the console's pages as PNGs in this directory and stop")
}

func (c *config) validate() error {
	if c.clusters < 1 || c.clusters > 26 {
		return fmt.Errorf("-clusters %d: want 1 to 26", c.clusters)
	}
	if c.servers < 1 {
		return fmt.Errorf("-servers %d: want at least 1", c.servers)
	}
	if _, err := traceNamed(c.trace); err != nil {
		return err
	}
	if c.speed <= 0 {
		return fmt.Errorf("-speed %v: want more than 0", c.speed)
	}
	if c.screenshot != "" {
		if fi, err := os.Stat(c.screenshot); err != nil || !fi.IsDir() {
			return fmt.Errorf("-screenshot %q: want an existing directory", c.screenshot)
		}
	}
	return nil
}

// traceNamed returns the trace called name, at the CI test's pace.
func traceNamed(name string) (twin.Trace, error) {
	switch name {
	case "steady":
		return twin.Steady(450, time.Minute), nil
	case "ramp":
		return twin.Ramp(150, 700, 15*time.Second, 15*time.Second), nil
	case "spike":
		return twin.Spike(150, 800, 15*time.Second, 30*time.Second, 30*time.Second), nil
	case "diurnal":
		return twin.Diurnal(100, 800, 2*time.Minute), nil
	case "flapping":
		return twin.Flapping(200, 600, 30*time.Second, 4), nil
	}
	return twin.Trace{}, fmt.Errorf("-trace %q: want steady, ramp, spike, diurnal or flapping", name)
}

func main() {
	var c config
	c.registerFlags(flag.CommandLine)
	flag.Parse()
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "twin:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "twin:", err)
		os.Exit(1)
	}
}

// run starts the fleet, reports until ctx ends, and stops it all.
func run(ctx context.Context, c config) (err error) {
	began := time.Now()
	dir, err := os.MkdirTemp("", "setpoint-twin-")
	if err != nil {
		return err
	}
	// cleanups run in reverse order at the end, whatever happened.
	var cleanups []func() error
	defer func() {
		fmt.Println("twin: stopping")
		for i := len(cleanups) - 1; i >= 0; i-- {
			err = errors.Join(err, cleanups[i]())
		}
		err = errors.Join(err, os.RemoveAll(dir))
		fmt.Println("twin: stopped")
	}()
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	etcdBin, err := kubetest.EtcdBinary(startCtx)
	if err != nil {
		return err
	}
	etcdDir := filepath.Join(dir, "etcd")
	if err := os.Mkdir(etcdDir, 0o700); err != nil {
		return err
	}
	etcd, err := etcdtest.Launch(startCtx, etcdtest.LaunchOptions{Binary: etcdBin, Dir: etcdDir, Members: 3, NoFsync: true})
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() error { etcd.Stop(); return nil })

	names := make([]string, c.clusters)
	for i := range names {
		names[i] = string(rune('a' + i))
	}
	token := rand.Text()
	svc, err := twin.StartService(startCtx, twin.ServiceOptions{
		Binary: filepath.Join(c.bin, "setpoint-server"), Root: c.root, Dir: filepath.Join(dir, "service"),
		Servers: c.servers, Etcd: etcd.Endpoints, Clusters: names, Console: true, ConsoleToken: token,
	})
	if err != nil {
		return err
	}
	cleanups = append(cleanups, svc.Stop)
	fmt.Printf("twin: %d setpoint-servers on a 3-member etcd, serving in %v\n", c.servers, time.Since(began).Round(time.Millisecond))

	crd, err := kubetest.AutoscalerCRD()
	if err != nil {
		return err
	}
	twins := make([]*twin.Twin, len(names))
	for i, name := range names {
		opts := twin.Options{Cluster: kubetest.Options{CRDs: [][]byte{crd}, EtcdPrefix: "/" + name}}
		if i > 0 {
			opts.Cluster.EtcdURL = twins[0].Cluster.EtcdURL()
		}
		tw, err := twin.Start(startCtx, opts)
		if err != nil {
			return fmt.Errorf("twin %s: %w", name, err)
		}
		twins[i] = tw
		// Twins on the first one's etcd stop before it.
		cleanups = append(cleanups, tw.Stop)
		fmt.Printf("twin: cluster %s ready at %v\n", name, time.Since(began).Round(time.Millisecond))
	}
	tr, _ := traceNamed(c.trace)
	tr = tr.Scaled(c.speed)
	loads := make([]*twin.Load, len(names))
	kubeconfigs := make([]string, len(names))
	for i, name := range names {
		tw := twins[i]
		if err := tw.CreateNamespace(startCtx, "shop"); err != nil {
			return err
		}
		if _, err := tw.Cluster.Client().AppsV1().Deployments("shop").Create(startCtx, twin.Deployment("web", map[string]string{"app": "web"}, 1, 200), metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := tw.CreateAutoscaler(startCtx, "shop", twin.Autoscaler("web", 1, 10, 50)); err != nil {
			return err
		}
		a, err := twin.StartAgent(twin.AgentOptions{
			Binary: filepath.Join(c.bin, "setpoint-agent"), Root: c.root, Dir: dir, Twin: tw, Service: svc, Cluster: name,
			SyncPeriod: c.sync, DownscaleStabilization: c.downscale,
			Flags: []string{"-console-url=" + svc.ConsoleURL},
		})
		if err != nil {
			return err
		}
		cleanups = append(cleanups, a.Stop)
		kubeconfigs[i] = filepath.Join(dir, "kubeconfig-"+name)
		if err := tw.Cluster.WriteKubeconfig(kubeconfigs[i]); err != nil {
			return err
		}
		loads[i] = tw.AddWorkload(twin.Workload{Namespace: "shop", Selector: map[string]string{"app": "web"}, Trace: tr,
			Noise: 0.03, Burst: 50, BurstFor: 10 * time.Second, Idle: 5, Seed: uint64(i + 1)})
	}

	pki := svc.PKI
	fmt.Printf(`
twin: up in %v; %d clusters, trace %s, Ctrl-C stops everything.

  console   %s   (self-signed CA %s; sign in with the token below)
  token     %s   (a platform principal that sees every cluster)
  CLI       ./bin/setpointctl --addr %s --ca %s --cert %s --key %s --server-name localhost list
  kubectl   %s
  logs      %s (server-*.log, agent-*.log); each twin's processes log under its kube dir
`, time.Since(began).Round(time.Millisecond), len(names), tr, svc.ConsoleURL, filepath.Join(pki, "ca.crt"), token,
		svc.Addrs(), filepath.Join(pki, "ca.crt"), filepath.Join(pki, "platform.crt"), filepath.Join(pki, "platform.key"),
		kubectlLines(names, kubeconfigs), filepath.Join(dir, "service"))
	fmt.Println()

	// shot gets the outcome of -screenshot's capture; it stays empty without.
	shot := make(chan error, 1)
	if c.screenshot != "" {
		go func() {
			settle := 3 * c.sync
			if err := waitScaled(ctx, twins, loads[0], tr, settle, peakAt(tr)+5*time.Minute); err != nil {
				shot <- err
				return
			}
			shot <- capture(ctx, svc.ConsoleURL, token, names, c.screenshot)
		}()
	}
	tick := time.NewTicker(c.statusEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-shot:
			return err
		case <-tick.C:
		}
		for i, name := range names {
			s := loads[i].Last()
			d, err := twins[i].Cluster.Client().AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
			replicas := "?"
			if err == nil && d.Spec.Replicas != nil {
				replicas = fmt.Sprint(*d.Spec.Replicas)
			}
			fmt.Printf("%8v  cluster %s  demand %4.0fm  replicas %2s  running %2d  Ready %2d  cpu/Ready pod %4.0fm (target 100m)\n",
				s.At.Round(time.Second), name, s.Demand, replicas, s.Running, s.Ready, s.PerReadyPod)
		}
	}
}

// kubectlLines is one kubectl command per cluster.
func kubectlLines(names, kubeconfigs []string) string {
	var lines []string
	for i, name := range names {
		lines = append(lines, fmt.Sprintf("kubectl --kubeconfig %s get autoscalers,deploy,pods -n shop   # cluster %s", kubeconfigs[i], name))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n            ")
}
