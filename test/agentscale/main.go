// Command agentscale measures setpoint-agent at scale: the real agent
// binary, on its defaults, against the real kube-apiserver and etcd
// (internal/kubetest), the fake metrics API server and an in-process
// Setpoint server, all on this machine, with N Autoscalers (each a
// Deployment with 2 running pods at its CPU target) for each N given.
//
// For each N it starts a fresh agent on fresh Autoscalers and reports:
// the time until every Autoscaler has a status; over a steady window, the
// reconciles per second, the interval between two reconciles of a key
// over the sync period (p50, p99, from the agent's
// setpoint_agent_reconcile_interval_ratio), the agent's CPU per reconcile
// (/proc), its live heap per Autoscaler (go_gc_heap_live_bytes), its
// requests to the Kubernetes API per reconcile, and the client-side
// throttling; then it stops the agent with SIGTERM and counts the error
// lines it logged while stopping. The machine's load average is reported
// with each point: the figures are only as clean as the machine is idle.
//
// Usage (make agent-scale runs it; docs/benchmarks.md has the figures):
//
//	go run ./test/agentscale -n 100,500,1000,2000,5000
//
// -serve autoscalers,hpas measures native mode (the agent serving
// HorizontalPodAutoscalers) after Autoscalers at each N, in the same run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	var cfg config
	fs := flag.NewFlagSet("agentscale", flag.ExitOnError)
	ns := fs.String("n", "100,500,1000,2000,5000", "comma-separated counts of Autoscalers, run in increasing order")
	fs.DurationVar(&cfg.syncPeriod, "sync-period", 15*time.Second, "the agent's -sync-period (its default is 15s)")
	fs.DurationVar(&cfg.window, "window", 0, "steady-state measurement window (default: 2 sync periods)")
	serves := fs.String("serve", "autoscalers", "comma-separated -serve values measured at each N, in order: autoscalers, hpas (native mode)")
	fs.IntVar(&cfg.podsPer, "pods", 2, "running pods per target")
	fs.StringVar(&cfg.profileDir, "cpuprofile-dir", "", "write the agent's CPU profile over each window to DIR/cpu-N.pprof (runs the agent with -profiling)")
	fs.StringVar(&cfg.kubeBin, "kube-bin-dir", "", "directory of kube-apiserver and etcd (default: internal/kubetest's)")
	_ = fs.Parse(os.Args[1:])
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "agentscale: bad -n %q\n", s)
			os.Exit(2)
		}
		cfg.counts = append(cfg.counts, n)
	}
	for _, s := range strings.Split(*serves, ",") {
		switch s = strings.TrimSpace(s); s {
		case "autoscalers", "hpas":
			cfg.serves = append(cfg.serves, s)
		default:
			fmt.Fprintf(os.Stderr, "agentscale: bad -serve %q: autoscalers or hpas\n", s)
			os.Exit(2)
		}
	}
	if cfg.window == 0 {
		cfg.window = 2 * cfg.syncPeriod
	}
	cfg.log = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s agentscale: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	points, err := run(ctx, cfg)
	printTable(os.Stdout, cfg, points)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentscale:", err)
		os.Exit(1)
	}
}
