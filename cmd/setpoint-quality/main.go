// Command setpoint-quality measures the quality of Setpoint's decisions in
// a closed loop in virtual time: a demand trace, pods that serve only
// after a start-up and readiness delay, per-pod utilization = demand over
// ready pods, and the autoscaler deciding every 15 s through the same
// target transitions (target.Decide, target.Observe) and engine the server
// runs. Days of load replay in seconds.
//
// For each generated trace and each start-up delay it runs two reactive
// references — the HPA as configured (tolerance 10%) and the same HPA
// with a scale-up tolerance of 1% — then a forecast on top of the better
// of the two, a schedule window (the morning-ramp trace) and a fallback
// through metric outages (the daily+outages trace), and reports per run
// the under-provisioned pod-minutes within and beyond the tolerance band,
// the overload minutes, pod-hours and rescales, per measured day. It then
// checks the acceptance bars (see bars.go) and exits 1 when one fails.
//
// Usage:
//
//	setpoint-quality [-days 7] [-startups 60s,5m] [-traces daily,spikes]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Config is the command's configuration.
type Config struct {
	// Days is the number of measured days per trace (the weekly trace
	// measures at least 7), after the warm-up days.
	Days int
	// Startups are the start-up + readiness delays to run.
	Startups []time.Duration
	// Traces, when set, selects the traces whose names start with one of
	// them.
	Traces []string
}

// RegisterFlags registers the configuration's flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Days, "days", 7, "measured days per trace, after the warm-up")
	fs.Func("startups", "comma-separated start-up + readiness delays (default 60s,5m)", func(s string) error {
		c.Startups = nil
		for _, f := range strings.Split(s, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			c.Startups = append(c.Startups, d)
		}
		return nil
	})
	fs.Func("traces", "comma-separated prefixes of trace names (default all)", func(s string) error {
		c.Traces = strings.Split(s, ",")
		return nil
	})
}

// Validate checks the configuration's values.
func (c *Config) Validate() error {
	if c.Days < 1 {
		return fmt.Errorf("-days must be >= 1, got %d", c.Days)
	}
	for _, d := range c.Startups {
		if d <= 0 || d >= time.Hour {
			return fmt.Errorf("-startups must be within (0, 1h), got %s", d)
		}
	}
	return nil
}

func main() {
	cfg := Config{Startups: []time.Duration{time.Minute, 5 * time.Minute}}
	cfg.RegisterFlags(flag.CommandLine)
	flag.Parse()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-quality:", err)
		os.Exit(2)
	}
	start := time.Now()
	rep, err := measure(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-quality:", err)
		os.Exit(1)
	}
	write(os.Stdout, rep)
	fmt.Fprintf(os.Stdout, "\n%d runs, %d decisions in %s\n", len(rep.Results), rep.Decisions, time.Since(start).Round(time.Millisecond))
	if !rep.Passed() {
		os.Exit(1)
	}
}

// write prints the report as Markdown: the results table, then the bars.
func write(w io.Writer, rep Report) {
	fmt.Fprintln(w, "| trace | start-up | setup | under in band (pod-min/day) | under beyond band (pod-min/day) | overload (min/day) | pod-hours/day | rescales/day |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|")
	for _, r := range rep.Results {
		days := rep.days(r.Trace)
		fmt.Fprintf(w, "| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.0f |\n", r.Trace, short(r.Startup), r.Setup,
			r.UnderInBand/days, r.UnderBeyond/days, r.OverloadMinutes/days, r.PodHours/days, float64(r.Rescales)/days)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| bar | trace | start-up | measured | result |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, b := range rep.Bars {
		verdict := "pass"
		if !b.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", b.Name, b.Trace, short(b.Startup), b.Detail, verdict)
	}
}

func short(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
