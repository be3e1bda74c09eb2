// Command setpoint-bench measures what a Setpoint server sustains over real
// gRPC on loopback — throughput and Recommend/Observe latency percentiles —
// and, with -baseline, what the same requests cost against a no-op
// implementation of the same gRPC service in the same run: the transport
// floor, the honest yardstick on a shared machine.
//
// An in-process server over a bbolt file in a temporary directory (the
// default), 64 callers, 10 pods and 2 metrics per request, 10 s per phase,
// with the baseline:
//
//	go run ./cmd/setpoint-bench -concurrency 64 -duration 10s -baseline
//
// Against a server already running on this machine (loopback only):
//
//	go run ./cmd/setpoint-bench -addr 127.0.0.1:7443 -token "$SETPOINT_TOKEN" -concurrency 64
//
// Each of -concurrency callers owns its share of -targets request
// templates and sends them in turn, as fast as the server answers. Every
// request is a full snapshot: -metrics metrics (a CPU Utilization metric,
// then External metrics), a behavior with scale-up and scale-down policies,
// and -pods pods with start times, readiness, two containers' requests and
// pod metrics. Usage follows a slow wave with a phase per target, so
// decisions scale up, down or hold. With probability -observe-ratio a
// decision is followed by Observe(applied), as an agent does after scaling.
//
// A phase ends after -duration or -requests Recommend calls, whichever
// comes first. With -rounds N the real phase and the baseline phase
// alternate N times and their samples are merged, so that noise from other
// work on the machine falls on both.
//
// Scale mode: -fill N fills the embedded store, before the run, with N
// targets carrying a full steady-state history (the record a target has
// after ten minutes of decisions every 15 s), reports the file size, the
// bytes per history entry, the time from opening the store to answering the
// first Recommend and the memory the process gained, and then addresses its
// calls at random targets among the N:
//
//	go run ./cmd/setpoint-bench -fill 1000000 -concurrency 64 -duration 10s -baseline
//
// Etcd mode: -etcd also starts a server on the etcd store (store/etcdstore)
// in this process, over a 3-member etcd cluster on loopback it launches
// from the etcd binary `make kube-binaries` builds (or -etcd-binary, or
// the running cluster at -etcd-endpoints), and measures it in the same
// rounds as the bbolt server and the baseline, reporting etcd/bbolt. In
// the same rounds it measures etcd alone doing what a decision asks of it
// at least — a read and a compare-and-put transaction of a value the size
// of the records the server stored, from as many callers — and reports
// etcd/raw, the share of etcd's own ceiling on this machine the server
// reaches; and for both, the requests, the bytes the members wrote to
// their write-ahead logs (their /metrics) and the members' CPU per call:
//
//	go run ./cmd/setpoint-bench -concurrency 64 -duration 10s -rounds 3 -baseline -etcd
//
// The report is a table on standard output; -json FILE also writes it as
// JSON (-json - writes only JSON to standard output).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/setpointhq/setpoint/internal/netaddr"
)

// MaxDuration bounds -duration: the bench never runs unattended for long.
const MaxDuration = 10 * time.Minute

// Config is setpoint-bench's configuration.
type Config struct {
	// Addr is a running server's gRPC address on loopback; empty starts
	// one in-process over a bbolt file in a temporary directory.
	Addr string
	// Token is the bearer token sent with every call; empty sends none.
	Token string
	// Targets is the number of distinct request templates (autoscalers).
	Targets int
	// Clusters is the number of clusters the targets are spread over; one
	// connection per cluster (at most one per caller).
	Clusters int
	// Pods is the number of pods in each request.
	Pods int
	// Metrics is the number of metrics per target: a CPU Utilization
	// metric, then External metrics.
	Metrics int
	// Concurrency is the number of concurrent callers (calls in flight).
	Concurrency int
	// Duration bounds each phase in time.
	Duration time.Duration
	// Requests bounds each phase in Recommend calls; 0 means no bound but
	// Duration.
	Requests int
	// Rounds is how many times the real and baseline phases alternate.
	Rounds int
	// ObserveRatio is the fraction of decisions followed by an
	// Observe(applied): 0 never, 1 always.
	ObserveRatio float64
	// Baseline also runs every phase against a no-op server.
	Baseline bool
	// Fill, when > 0, fills the embedded store with Fill targets of full
	// history before the run, and the calls address them all.
	Fill int
	// FillDecisions is how many decisions, 15 s apart, each filled target
	// has in its decision log (1: its one record write).
	FillDecisions int
	// Dir, when set, is the directory of the embedded store's file, kept
	// afterwards; empty uses a temporary directory, removed.
	Dir string
	// JSON, when set, is a file the report is written to as JSON; "-" is
	// standard output, instead of the table.
	JSON string
	// CPUProfile, when set, is a file the CPU profile of the first real
	// phase (RecordPhase) is written to.
	CPUProfile string
	// CheckpointInterval is the embedded bbolt store's
	// Options.CheckpointInterval (0: its default).
	CheckpointInterval time.Duration
	// Trace, when set, is a file the execution trace of the first real
	// phase (RecordPhase) is written to (go tool trace): where calls wait.
	Trace string
	// RecordPhase is the phase CPUProfile and Trace record the first
	// round of: "setpoint" (the server on bbolt) or "etcd" (the server on
	// etcd, with Etcd).
	RecordPhase string
	// Etcd also measures a server on the etcd store, in the same rounds.
	Etcd bool
	// EtcdEndpoints, when set, are a running etcd cluster's client URLs
	// (comma-separated) for Etcd; empty launches one.
	EtcdEndpoints string
	// EtcdBinary is the etcd binary to launch; empty uses the one `make
	// kube-binaries` builds.
	EtcdBinary string
	// EtcdMembers is the size of the launched cluster.
	EtcdMembers int
	// EtcdNoFsync launches the members with --unsafe-no-fsync.
	EtcdNoFsync bool
}

// RegisterFlags registers the configuration's flags, with their defaults,
// on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", "", "a running server's gRPC address on loopback (host:port); empty starts one in-process")
	fs.StringVar(&c.Token, "token", os.Getenv("SETPOINT_TOKEN"), "bearer token (default $SETPOINT_TOKEN)")
	fs.IntVar(&c.Targets, "targets", 1000, "distinct autoscalers (request templates)")
	fs.IntVar(&c.Clusters, "clusters", 4, "clusters the targets are spread over (one connection each)")
	fs.IntVar(&c.Pods, "pods", 10, "pods per request")
	fs.IntVar(&c.Metrics, "metrics", 2, "metrics per target: cpu Utilization, then External metrics")
	fs.IntVar(&c.Concurrency, "concurrency", 64, "concurrent callers (calls in flight)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long each phase runs (at most 10m)")
	fs.IntVar(&c.Requests, "requests", 0, "Recommend calls per phase at most; 0: only -duration bounds it")
	fs.IntVar(&c.Rounds, "rounds", 1, "times the real and baseline phases alternate")
	fs.Float64Var(&c.ObserveRatio, "observe-ratio", 0, "fraction of decisions followed by Observe(applied), 0..1")
	fs.BoolVar(&c.Baseline, "baseline", false, "also run the same requests against a no-op server and report real/baseline")
	fs.IntVar(&c.Fill, "fill", 0, "scale mode: fill the in-process store with this many targets of full history first")
	fs.IntVar(&c.FillDecisions, "fill-decisions", 1, "scale mode: decisions, 15 s apart, in each filled target's decision log (720 is 3 hours, the default retention)")
	fs.StringVar(&c.Dir, "dir", "", "directory of the in-process store's file (kept); default a temporary directory (removed)")
	fs.StringVar(&c.JSON, "json", "", "also write the report as JSON to this file; - writes only JSON to stdout")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the first real phase (-record-phase) to this file")
	fs.DurationVar(&c.CheckpointInterval, "checkpoint-interval", 0, "the embedded store's checkpoint interval, as setpoint-server -checkpoint-interval (0: the store's default)")
	fs.StringVar(&c.Trace, "trace", "", "write an execution trace of the first real phase (-record-phase) to this file (go tool trace)")
	fs.StringVar(&c.RecordPhase, "record-phase", phaseReal, "the phase -cpuprofile and -trace record: setpoint (bbolt) or etcd (with -etcd)")
	fs.BoolVar(&c.Etcd, "etcd", false, "also measure a server on the etcd store in the same rounds, and report etcd/bbolt")
	fs.StringVar(&c.EtcdEndpoints, "etcd-endpoints", "", "with -etcd: a running etcd cluster's client URLs, comma-separated; empty launches one on loopback")
	fs.StringVar(&c.EtcdBinary, "etcd-binary", "", "with -etcd: the etcd binary to launch; empty uses the one make kube-binaries builds")
	fs.IntVar(&c.EtcdMembers, "etcd-members", 3, "with -etcd: members of the launched cluster")
	fs.BoolVar(&c.EtcdNoFsync, "etcd-no-fsync", false, "with -etcd: launch the members with --unsafe-no-fsync")
}

// Validate checks the configuration's values.
func (c *Config) Validate() error {
	var errs []error
	if c.Addr != "" && !netaddr.Loopback(c.Addr) {
		errs = append(errs, fmt.Errorf("-addr %q: must be a loopback address (host:port)", c.Addr))
	}
	if c.Targets <= 0 || c.Clusters <= 0 || c.Concurrency <= 0 || c.Pods <= 0 || c.Metrics <= 0 || c.Rounds <= 0 {
		errs = append(errs, errors.New("-targets, -clusters, -concurrency, -pods, -metrics and -rounds must be > 0"))
	}
	if c.Concurrency > c.Targets {
		errs = append(errs, fmt.Errorf("-concurrency %d exceeds -targets %d: every caller owns at least one target", c.Concurrency, c.Targets))
	}
	if c.Clusters > c.Targets {
		errs = append(errs, fmt.Errorf("-clusters %d exceeds -targets %d", c.Clusters, c.Targets))
	}
	if c.Duration <= 0 || c.Duration > MaxDuration {
		errs = append(errs, fmt.Errorf("-duration must be within (0, %s]", MaxDuration))
	}
	if c.FillDecisions < 1 {
		errs = append(errs, errors.New("-fill-decisions must be ≥ 1"))
	}
	if c.Requests < 0 || c.Fill < 0 {
		errs = append(errs, errors.New("-requests and -fill must be ≥ 0"))
	}
	if c.Fill > 0 && c.Addr != "" {
		errs = append(errs, errors.New("-fill needs the in-process server: leave -addr empty"))
	}
	if c.Etcd && (c.Addr != "" || c.Fill > 0) {
		errs = append(errs, errors.New("-etcd compares in-process servers: leave -addr and -fill unset"))
	}
	if !c.Etcd && (c.EtcdEndpoints != "" || c.EtcdBinary != "" || c.EtcdNoFsync) {
		errs = append(errs, errors.New("-etcd-* flags need -etcd"))
	}
	if c.RecordPhase != phaseReal && (c.RecordPhase != phaseEtcd || !c.Etcd) {
		errs = append(errs, errors.New("-record-phase must be setpoint, or etcd with -etcd"))
	}
	if c.EtcdMembers <= 0 {
		errs = append(errs, errors.New("-etcd-members must be > 0"))
	}
	if !(c.ObserveRatio >= 0 && c.ObserveRatio <= 1) {
		errs = append(errs, errors.New("-observe-ratio must be within 0..1"))
	}
	return errors.Join(errs...)
}

func main() {
	var cfg Config
	fs := flag.NewFlagSet("setpoint-bench", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rep, err := run(ctx, cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-bench:", err)
		os.Exit(1)
	}
	if err := write(cfg, rep); err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-bench:", err)
		os.Exit(1)
	}
}

// write prints rep as a table (unless -json -) and writes its JSON form
// where cfg.JSON says.
func write(cfg Config, rep *Report) error {
	if cfg.JSON != "-" {
		if _, err := os.Stdout.WriteString(rep.Table()); err != nil {
			return err
		}
	}
	if cfg.JSON == "" {
		return nil
	}
	data, err := rep.JSONBytes()
	if err != nil {
		return err
	}
	if cfg.JSON == "-" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return os.WriteFile(cfg.JSON, data, 0o644)
}
