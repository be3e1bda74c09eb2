package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/store/boltstore"
)

// Report is what one run of setpoint-bench measured.
type Report struct {
	// Command reproduces the run.
	Command string `json:"command"`
	// Machine describes where it ran.
	Machine Machine `json:"machine"`
	// Phases are the real server's results, then the baseline's.
	Phases []*PhaseResult `json:"phases"`
	// Ratio is the real server's Recommend throughput divided by the
	// baseline's; 0 without -baseline.
	Ratio float64 `json:"throughput_ratio,omitempty"`
	// EtcdRatio is the etcd-backed server's Recommend throughput divided
	// by the bbolt-backed one's; 0 without -etcd.
	EtcdRatio float64 `json:"etcd_bbolt_ratio,omitempty"`
	// EtcdRawRatio is the etcd-backed server's Recommend throughput
	// divided by the raw etcd phases' transactions per second (a read and
	// a compare-and-put of a record's size, etcd's own ceiling); 0
	// without -etcd.
	EtcdRawRatio float64 `json:"etcd_raw_ratio,omitempty"`
	// EtcdRawRounds is EtcdRawRatio in each round: the etcd phase's
	// throughput over the raw phase's that follows it.
	EtcdRawRounds []float64 `json:"etcd_raw_rounds,omitempty"`
	// RSS is this process's memory at the end (server, load generator and
	// baseline together) when the server is in-process.
	RSS *RSS `json:"rss,omitempty"`
	// Scale is the scale mode's figures; nil without -fill.
	Scale *ScaleResult `json:"scale,omitempty"`
}

// Machine describes the machine a run was made on.
type Machine struct {
	CPU        string `json:"cpu"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	Load       string `json:"load_average"` // /proc/loadavg at the start
}

// Latency summarizes the latencies of one kind of call, in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// StoreFigures are the embedded store's counters during the real phases.
type StoreFigures struct {
	Commits         uint64  `json:"commits"`
	Writes          uint64  `json:"writes"`
	WritesPerCommit float64 `json:"writes_per_commit"`
	MaxBatch        uint64  `json:"max_batch"`
	FileBytes       int64   `json:"file_bytes"`
	// Checkpoints are the bbolt transactions that wrote the journaled
	// writes into the file.
	Checkpoints uint64 `json:"checkpoints"`
}

// PhaseResult is what the phases against one server measured.
type PhaseResult struct {
	// Name is "setpoint" (the server), "baseline" (the no-op server),
	// "etcd" (the server on etcd) or "etcd-raw" (etcd alone: its
	// Decisions, Throughput and Recommend latency are those of a read and
	// compare-and-put transaction).
	Name string `json:"name"`
	// Throughput is the successful Recommend calls per second.
	Throughput float64 `json:"recommend_per_s"`
	// Decisions counts the successful Recommend calls; Rescales those
	// whose decision was to rescale, Undecided those whose decision carries
	// an error (the engine could not decide).
	Decisions int `json:"recommend_ok"`
	Rescales  int `json:"rescales"`
	Undecided int `json:"undecided"`
	// Observes counts the successful Observe calls.
	Observes  int     `json:"observe_ok"`
	Recommend Latency `json:"recommend_latency"`
	Observe   Latency `json:"observe_latency"`
	// Errors counts the failed calls by method and gRPC code, e.g.
	// "Recommend ResourceExhausted"; ErrorCount is their sum.
	Errors     map[string]int `json:"errors"`
	ErrorCount int            `json:"error_count"`
	// Seconds is the phases' wall time; CPUPerCall the process's CPU
	// (user+sys, client and server together) per successful call, in µs.
	Seconds    float64 `json:"seconds"`
	CPUPerCall float64 `json:"cpu_us_per_call"`
	CoresBusy  float64 `json:"cores_busy"`
	// Store is the embedded store's figures; nil for the baseline or a
	// remote server.
	Store *StoreFigures `json:"store,omitempty"`
	// Etcd is the etcd store's requests (the etcd phases only).
	Etcd *EtcdFigures `json:"etcd,omitempty"`
	// EtcdCPUPerCall is the etcd members' CPU (user+sys) per successful
	// call, in µs, when this process launched them.
	EtcdCPUPerCall float64 `json:"etcd_cpu_us_per_call,omitempty"`
	etcdCPU        time.Duration

	Elapsed                 time.Duration   `json:"-"`
	CPU                     time.Duration   `json:"-"`
	recommendSamples, obsSm []time.Duration // until finish
}

func newPhaseResult(name string) *PhaseResult {
	return &PhaseResult{Name: name, Errors: map[string]int{}}
}

// add merges c's counts and samples into r.
func (r *PhaseResult) add(c *caller) {
	r.Decisions += c.decisions
	r.Rescales += c.rescales
	r.Undecided += c.undecided
	r.Observes += c.observes
	r.recommendSamples = append(r.recommendSamples, c.recommend...)
	r.obsSm = append(r.obsSm, c.observe...)
	for k, n := range c.errors {
		r.Errors[k] += n
	}
}

// merge adds another phase's result (of the same server) to r.
func (r *PhaseResult) merge(o *PhaseResult) {
	r.Decisions += o.Decisions
	r.Rescales += o.Rescales
	r.Undecided += o.Undecided
	r.Observes += o.Observes
	r.recommendSamples = append(r.recommendSamples, o.recommendSamples...)
	r.obsSm = append(r.obsSm, o.obsSm...)
	for k, n := range o.Errors {
		r.Errors[k] += n
	}
	r.Elapsed += o.Elapsed
	r.CPU += o.CPU
	r.etcdCPU += o.etcdCPU
}

// addStore adds the store's counters between before and after.
func (r *PhaseResult) addStore(before, after boltstore.Stats) {
	if r.Store == nil {
		r.Store = &StoreFigures{}
	}
	r.Store.Commits += after.Commits - before.Commits
	r.Store.Writes += after.Writes - before.Writes
	r.Store.MaxBatch = after.MaxBatch
	r.Store.Checkpoints += after.Checkpoints - before.Checkpoints
}

// finish computes the summary fields from the merged samples.
func (r *PhaseResult) finish() {
	slices.Sort(r.recommendSamples)
	slices.Sort(r.obsSm)
	r.Recommend, r.Observe = latency(r.recommendSamples), latency(r.obsSm)
	r.Seconds = r.Elapsed.Seconds()
	if r.Seconds > 0 {
		r.Throughput = float64(r.Decisions) / r.Seconds
		r.CoresBusy = r.CPU.Seconds() / r.Seconds
	}
	if calls := r.Decisions + r.Observes; calls > 0 {
		r.CPUPerCall = float64(r.CPU.Microseconds()) / float64(calls)
		r.EtcdCPUPerCall = float64(r.etcdCPU.Microseconds()) / float64(calls)
	}
	if r.Etcd != nil {
		r.Etcd.finish(r.Decisions + r.Observes)
	}
	r.ErrorCount = 0
	for _, n := range r.Errors {
		r.ErrorCount += n
	}
	if r.Store != nil {
		r.Store.WritesPerCommit = float64(r.Store.Writes) / float64(max(r.Store.Commits, 1))
	}
}

// latency summarizes sorted ascending samples.
func latency(sorted []time.Duration) Latency {
	return Latency{Count: len(sorted), P50: ms(percentile(sorted, 0.5)), P90: ms(percentile(sorted, 0.9)),
		P99: ms(percentile(sorted, 0.99)), Max: ms(percentile(sorted, 1))}
}

// percentile returns the q-quantile (0..1) of sorted ascending samples,
// the smallest sample at least q of the samples are ≤ to; 0 without
// samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ms converts d to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// mib converts bytes to MiB.
func mib(n int64) float64 { return float64(n) / (1 << 20) }

// JSONBytes returns the report as indented JSON.
func (r *Report) JSONBytes() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Table returns the report as text tables: one row per server and call.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", r.Command)
	fmt.Fprintf(&b, "%s, %d CPUs, GOMAXPROCS %d, %s, load average %s\n\n", r.Machine.CPU, r.Machine.NumCPU, r.Machine.GOMAXPROCS, r.Machine.Go, r.Machine.Load)
	fmt.Fprintf(&b, "%-9s %-9s %8s %10s %8s %8s %8s %8s %7s %8s\n", "server", "call", "ok", "calls/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors", "cpu µs")
	for _, p := range r.Phases {
		recommend := "Recommend"
		if p.Name == phaseEtcdRaw {
			recommend = "read+CAS"
		}
		for _, c := range []struct {
			name string
			l    Latency
		}{{recommend, p.Recommend}, {"Observe", p.Observe}} {
			if c.l.Count == 0 && c.name == "Observe" {
				continue
			}
			errs := 0
			for k, n := range p.Errors {
				if strings.HasPrefix(k, c.name+" ") {
					errs += n
				}
			}
			fmt.Fprintf(&b, "%-9s %-9s %8d %10.0f %8.2f %8.2f %8.2f %8.2f %7d %8.0f\n", p.Name, c.name, c.l.Count,
				float64(c.l.Count)/max(p.Seconds, 1e-9), c.l.P50, c.l.P90, c.l.P99, c.l.Max, errs, p.CPUPerCall)
		}
	}
	if r.Ratio > 0 {
		fmt.Fprintf(&b, "\nreal/baseline Recommend throughput: %.2f\n", r.Ratio)
	}
	if r.EtcdRatio > 0 {
		fmt.Fprintf(&b, "etcd/bbolt Recommend throughput: %.2f\n", r.EtcdRatio)
	}
	if r.EtcdRawRatio > 0 {
		fmt.Fprintf(&b, "etcd/raw etcd (Recommend against read + compare-and-put of a record's size): %.2f (rounds: %.2f)\n", r.EtcdRawRatio, r.EtcdRawRounds)
	}
	for _, p := range r.Phases {
		if p.ErrorCount > 0 {
			var es []string
			for _, k := range slices.Sorted(maps.Keys(p.Errors)) {
				es = append(es, fmt.Sprintf("%s × %d", k, p.Errors[k]))
			}
			fmt.Fprintf(&b, "%s errors: %s\n", p.Name, strings.Join(es, ", "))
		}
		if p.Undecided > 0 {
			fmt.Fprintf(&b, "%s: %d decisions could not decide\n", p.Name, p.Undecided)
		}
		if s := p.Store; s != nil {
			fmt.Fprintf(&b, "store: %d commits (journal flushes) for %d writes, %.1f writes/commit, largest commit %d writes; %d checkpoints into bbolt; file %.1f MiB\n",
				s.Commits, s.Writes, s.WritesPerCommit, s.MaxBatch, s.Checkpoints, mib(s.FileBytes))
		}
		if e := p.Etcd; e != nil {
			fmt.Fprintf(&b, "etcd: %s; %d transactions (%.2f ms mean, %d conflicts), %d reads, %d other requests: %.2f requests and %.0f WAL bytes (all members) per call",
				e.Where, e.Commits, e.CommitMs, e.Conflicts, e.Reads, e.Other, e.RequestsPerDecision, e.WALBytesPerCall)
			if p.EtcdCPUPerCall > 0 {
				fmt.Fprintf(&b, ", members' cpu %.0f µs per call", p.EtcdCPUPerCall)
			}
			if e.ValueBytes > 0 {
				fmt.Fprintf(&b, "; values of %d bytes", e.ValueBytes)
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s: %.1f s, %.2f cores busy (whole process)\n", p.Name, p.Seconds, p.CoresBusy)
	}
	if r.RSS != nil {
		fmt.Fprintf(&b, "process RSS (server, load generator and baseline): peak %.0f MiB, at end %.0f MiB (anon %.0f MiB, files %.0f MiB)\n",
			mib(r.RSS.Peak), mib(r.RSS.Current), mib(r.RSS.Anon), mib(r.RSS.File))
	}
	if s := r.Scale; s != nil {
		b.WriteString(s.table())
	}
	return b.String()
}

// RSS is a process's resident set size, in bytes.
type RSS struct {
	// Peak is VmHWM, the largest RSS the process had.
	Peak int64 `json:"peak_bytes"`
	// Current is VmRSS.
	Current int64 `json:"current_bytes"`
	// Anon is RssAnon: the heap, stacks and other anonymous memory.
	Anon int64 `json:"anon_bytes"`
	// File is RssFile: mapped files, among them the bbolt file.
	File int64 `json:"file_bytes"`
}

// readRSS returns this process's memory from /proc/self/status; nil where
// it cannot be read.
func readRSS() *RSS {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil
	}
	defer f.Close()
	var r RSS
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		for _, field := range []struct {
			format string
			v      *int64
		}{{"VmHWM: %d kB", &r.Peak}, {"VmRSS: %d kB", &r.Current}, {"RssAnon: %d kB", &r.Anon}, {"RssFile: %d kB", &r.File}} {
			if n, _ := fmt.Sscanf(sc.Text(), field.format, &kb); n == 1 {
				*field.v = kb << 10
			}
		}
	}
	return &r
}

// machine describes this machine.
func machine() Machine {
	m := Machine{CPU: "unknown CPU", NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	return m
}

// args returns the flags that reproduce cfg (the token left out).
func (c Config) args() string {
	var b strings.Builder
	if c.Addr != "" {
		fmt.Fprintf(&b, "-addr %s ", c.Addr)
	}
	fmt.Fprintf(&b, "-targets %d -clusters %d -pods %d -metrics %d -concurrency %d -duration %s -rounds %d -observe-ratio %g",
		c.Targets, c.Clusters, c.Pods, c.Metrics, c.Concurrency, c.Duration, c.Rounds, c.ObserveRatio)
	if c.Requests > 0 {
		fmt.Fprintf(&b, " -requests %d", c.Requests)
	}
	if c.Baseline {
		b.WriteString(" -baseline")
	}
	if c.Fill > 0 {
		fmt.Fprintf(&b, " -fill %d", c.Fill)
	}
	if c.Etcd {
		b.WriteString(" -etcd")
		if c.EtcdEndpoints != "" {
			fmt.Fprintf(&b, " -etcd-endpoints %s", c.EtcdEndpoints)
		} else {
			fmt.Fprintf(&b, " -etcd-members %d", c.EtcdMembers)
		}
		if c.EtcdNoFsync {
			b.WriteString(" -etcd-no-fsync")
		}
	}
	return b.String()
}
