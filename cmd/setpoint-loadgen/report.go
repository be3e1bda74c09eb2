package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/store"
)

// Result is what one run measured.
type Result struct {
	// Elapsed is the wall time from the first call to the last answer.
	Elapsed time.Duration
	// Decisions counts the successful Recommend calls; Rescales those
	// whose decision was to rescale, Undecided those whose decision carries
	// an error (the engine could not decide).
	Decisions, Rescales, Undecided int
	// Observes counts the successful Observe calls.
	Observes int
	// Recommend and Observe are the latencies of the successful calls,
	// sorted ascending.
	Recommend, Observe []time.Duration
	// Errors counts the failed calls by method and gRPC code, e.g.
	// "Recommend ResourceExhausted".
	Errors map[string]int
	// Store is the embedded store's commit statistics; nil when not
	// embedded.
	Store *store.Stats
	// RSS is this process's memory (server and load generator) when
	// embedded; zero otherwise.
	RSS RSS
	// StoreBytes is the embedded store file's size at the end, in bytes.
	StoreBytes int64
	// CPU is the user and system CPU time this process (load generator,
	// and the server when embedded) spent during the run.
	CPU time.Duration
}

// RSS is a process's resident set size, in bytes.
type RSS struct {
	// Peak is VmHWM, the largest RSS the process had.
	Peak int64
	// Current is VmRSS at the end of the run.
	Current int64
	// File is RssFile at the end of the run: mapped files, among them the
	// bbolt file.
	File int64
}

// add merges c's counts and samples into r; sort sorts the samples once
// all are in.
func (r *Result) add(c *caller) {
	r.Decisions += c.decisions
	r.Rescales += c.rescales
	r.Undecided += c.undecided
	r.Observes += c.observes
	r.Recommend = append(r.Recommend, c.recommend...)
	r.Observe = append(r.Observe, c.observe...)
	for k, n := range c.errors {
		r.Errors[k] += n
	}
}

func (r *Result) sort() {
	slices.Sort(r.Recommend)
	slices.Sort(r.Observe)
}

// Throughput is the successful decisions per second.
func (r *Result) Throughput() float64 { return float64(r.Decisions) / r.Elapsed.Seconds() }

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

// Markdown returns the run as a markdown section: the command, throughput,
// latency, errors, server figures and the machine.
func (r *Result) Markdown(cfg Config) string {
	var b strings.Builder
	mode := "against " + cfg.Addr
	if cfg.Embedded {
		mode = "embedded server"
	}
	fmt.Fprintf(&b, "### %d callers, %d targets, %d pods per request (%s)\n\n", cfg.Concurrency, cfg.Targets, cfg.Pods, mode)
	fmt.Fprintf(&b, "    go run ./cmd/setpoint-loadgen %s\n\n", cfg.args())
	fmt.Fprintf(&b, "%d decisions in %.1f s: **%.0f decisions/s**; %d rescaled, %d could not decide; %d Observe(applied).\n\n",
		r.Decisions, r.Elapsed.Seconds(), r.Throughput(), r.Rescales, r.Undecided, r.Observes)
	b.WriteString("| call | count | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n")
	for _, c := range []struct {
		name string
		s    []time.Duration
	}{{"Recommend", r.Recommend}, {"Observe", r.Observe}} {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", c.name, len(c.s),
			ms(percentile(c.s, 0.5)), ms(percentile(c.s, 0.9)), ms(percentile(c.s, 0.99)), ms(percentile(c.s, 1)))
	}
	b.WriteString("\nErrors: ")
	if len(r.Errors) == 0 {
		b.WriteString("none.\n")
	} else {
		var es []string
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			es = append(es, fmt.Sprintf("%s × %d", k, r.Errors[k]))
		}
		b.WriteString(strings.Join(es, ", ") + ".\n")
	}
	fmt.Fprintf(&b, "\nCPU (user+sys) of this process: %.1f s, %.2f cores busy, %.0f µs per decision (its Observe calls included).\n",
		r.CPU.Seconds(), r.CPU.Seconds()/r.Elapsed.Seconds(), float64(r.CPU.Microseconds())/float64(max(r.Decisions, 1)))
	if r.Store != nil {
		fmt.Fprintf(&b, "Store: %d commits (fsyncs) for %d writes, %.1f writes/commit, largest commit %d writes; file %.0f MiB.\n",
			r.Store.Commits, r.Store.Writes, float64(r.Store.Writes)/float64(max(r.Store.Commits, 1)), r.Store.MaxBatch, mib(r.StoreBytes))
	}
	if r.RSS.Peak > 0 {
		fmt.Fprintf(&b, "RSS of the process (server and load generator): peak %.0f MiB, at end %.0f MiB of which %.0f MiB mapped files (the binary and the bbolt file).\n",
			mib(r.RSS.Peak), mib(r.RSS.Current), mib(r.RSS.File))
	}
	fmt.Fprintf(&b, "\nMachine: %s; GOMAXPROCS %d (%d CPUs); %s %s/%s.\n", cpuModel(), runtime.GOMAXPROCS(0), runtime.NumCPU(),
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// args returns the flags that reproduce cfg.
func (c Config) args() string {
	target := "-addr " + c.Addr
	if c.Embedded {
		target = "-embedded"
	}
	return fmt.Sprintf("%s -targets %d -clusters %d -concurrency %d -duration %s -pods %d -observe-ratio %g",
		target, c.Targets, c.Clusters, c.Concurrency, c.Duration, c.Pods, c.ObserveRatio)
}

// ms formats d in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// mib converts bytes to MiB.
func mib(n int64) float64 { return float64(n) / (1 << 20) }

// readRSS returns this process's VmHWM and VmRSS from /proc/self/status;
// zero where it cannot be read.
func readRSS() RSS {
	var r RSS
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return r
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "VmHWM: %d kB", &kb); n == 1 {
			r.Peak = kb << 10
		}
		if n, _ := fmt.Sscanf(sc.Text(), "VmRSS: %d kB", &kb); n == 1 {
			r.Current = kb << 10
		}
		if n, _ := fmt.Sscanf(sc.Text(), "RssFile: %d kB", &kb); n == 1 {
			r.File = kb << 10
		}
	}
	return r
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "unknown
// CPU".
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
