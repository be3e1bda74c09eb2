// Command setpoint-loadgen plays many agents against a Setpoint server and
// reports what the server sustained: decisions per second, Recommend and
// Observe latency percentiles, errors by gRPC code, and the machine.
//
// Against a running server:
//
//	go run ./cmd/setpoint-loadgen -addr 127.0.0.1:7443 -targets 1000 -concurrency 64 -duration 10s
//
// With -embedded it starts a server in-process on a loopback port, over a
// bbolt file in a temporary directory (removed afterwards), and also reports
// the process's peak and current RSS and the store's commits:
//
//	go run ./cmd/setpoint-loadgen -embedded -concurrency 64 -duration 10s -out docs/results.md
//
// Each of -concurrency callers owns its share of -targets autoscalers,
// spread over -clusters clusters, and decides them in turn as fast as the
// server answers. Every request is a full snapshot: a CPU Utilization
// metric and an External metric, a behavior with scale-up and scale-down
// policies, and -pods pods with start times, readiness, container requests
// and pod metrics. CPU usage and the external value follow a slow wave with
// a phase per target, so decisions scale up, down or hold over the run.
// After a decision, with probability -observe-ratio, the caller reports the
// decision as applied with Observe. The request size stays at -pods: the
// Scale's replica count is -pods whatever was decided.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Config is setpoint-loadgen's configuration.
type Config struct {
	// Addr is the server's gRPC address; ignored with Embedded.
	Addr string
	// Token is the bearer token sent with every call; empty sends none.
	Token string
	// Targets is the number of distinct autoscalers.
	Targets int
	// Clusters is the number of clusters the targets are spread over; one
	// connection per cluster (at most one per caller).
	Clusters int
	// Concurrency is the number of concurrent callers.
	Concurrency int
	// Duration is how long the load runs.
	Duration time.Duration
	// Pods is the number of pods in each request.
	Pods int
	// ObserveRatio is the fraction of decisions followed by an
	// Observe(applied): 0 never, 1 always.
	ObserveRatio float64
	// Embedded starts a server in-process over a bbolt file in a
	// temporary directory instead of dialing Addr.
	Embedded bool
	// Out, when set, is a file the results are appended to as markdown.
	Out string
}

// RegisterFlags registers the configuration's flags, with their defaults,
// on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:7443", "server gRPC address (host:port); ignored with -embedded")
	fs.StringVar(&c.Token, "token", os.Getenv("SETPOINT_TOKEN"), "bearer token (default $SETPOINT_TOKEN)")
	fs.IntVar(&c.Targets, "targets", 1000, "distinct autoscalers")
	fs.IntVar(&c.Clusters, "clusters", 4, "clusters the targets are spread over (one connection each)")
	fs.IntVar(&c.Concurrency, "concurrency", 8, "concurrent callers")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to run")
	fs.IntVar(&c.Pods, "pods", 10, "pods per request")
	fs.Float64Var(&c.ObserveRatio, "observe-ratio", 0.5, "fraction of decisions followed by Observe(applied), 0..1")
	fs.BoolVar(&c.Embedded, "embedded", false, "start a server in-process over a bbolt file in a temporary directory")
	fs.StringVar(&c.Out, "out", "", "append the results as a markdown section to this file")
}

// Validate checks the configuration's values.
func (c *Config) Validate() error {
	var errs []error
	if !c.Embedded && c.Addr == "" {
		errs = append(errs, errors.New("-addr: must be set without -embedded"))
	}
	if c.Targets <= 0 || c.Clusters <= 0 || c.Concurrency <= 0 || c.Pods <= 0 {
		errs = append(errs, errors.New("-targets, -clusters, -concurrency and -pods must be > 0"))
	}
	if c.Concurrency > c.Targets {
		errs = append(errs, fmt.Errorf("-concurrency %d exceeds -targets %d: every caller owns at least one target", c.Concurrency, c.Targets))
	}
	if c.Clusters > c.Targets {
		errs = append(errs, fmt.Errorf("-clusters %d exceeds -targets %d", c.Clusters, c.Targets))
	}
	if c.Duration <= 0 {
		errs = append(errs, errors.New("-duration must be > 0"))
	}
	if !(c.ObserveRatio >= 0 && c.ObserveRatio <= 1) {
		errs = append(errs, errors.New("-observe-ratio must be within 0..1"))
	}
	return errors.Join(errs...)
}

func main() {
	var cfg Config
	fs := flag.NewFlagSet("setpoint-loadgen", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-loadgen:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	res, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-loadgen:", err)
		os.Exit(1)
	}
	if err := report(os.Stdout, cfg, res); err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-loadgen:", err)
		os.Exit(1)
	}
}

// report writes res to w and, with cfg.Out, appends it to that file.
func report(w io.Writer, cfg Config, res *Result) error {
	md := res.Markdown(cfg)
	if _, err := io.WriteString(w, md); err != nil {
		return err
	}
	if cfg.Out == "" {
		return nil
	}
	f, err := os.OpenFile(cfg.Out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, "\n"+md); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
