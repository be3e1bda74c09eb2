package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestQualityBars is the short form of `make quality` that CI runs: one
// measured day of a periodic, an aperiodic, the schedule and the fallback
// trace at a 5-minute start-up, through the real engine and target code,
// with the acceptance bars asserted.
func TestQualityBars(t *testing.T) {
	rep, err := measure(Config{Days: 1, Startups: []time.Duration{5 * time.Minute},
		Traces: []string{"daily", "random-walk", "morning-ramp", "daily+outages"}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	write(&out, rep)
	t.Log("\n" + out.String())
	want := map[string]string{
		"daily":         "periodic:",
		"random-walk":   "aperiodic:",
		"morning-ramp":  "schedule:",
		"daily+outages": "fallback",
	}
	for trace, bar := range want {
		found := false
		for _, b := range rep.Bars {
			if b.Trace == trace && strings.HasPrefix(b.Name, bar) {
				found = true
				if !b.Pass {
					t.Errorf("%s, %s: %s", trace, b.Name, b.Detail)
				}
			}
		}
		if !found {
			t.Errorf("no %q bar for %s", bar, trace)
		}
	}
	// The periodic bar must be earned, not met by a reference that never
	// fell short: on the periodic traces both references leave a quarter
	// or more of their under-provisioning beyond the band, and overload
	// (the issue measured about 40%, and an hour a day over four traces).
	for _, r := range rep.Results {
		if (r.Trace == "daily" || r.Trace == "morning-ramp") && (r.Setup == hpa.Name || r.Setup == hpaTol1.Name) {
			if share := r.UnderBeyond / (r.UnderBeyond + r.UnderInBand); !(share >= 0.25) || r.OverloadMinutes == 0 {
				t.Errorf("%s, %s: %.0f%% of the under-provisioning beyond the band, %.1f overload minutes; want ≥ 25%% and some: the trace is too gentle to test the forecast",
					r.Trace, r.Setup, 100*share, r.OverloadMinutes)
			}
		}
		if r.Trace == "daily+outages" && r.Setup == hpa.Name && r.OverloadMinutes == 0 {
			t.Errorf("the outages cause no overload without a fallback: the fallback case tests nothing")
		}
	}
}

// TestConstantDemandSettles checks the loop's accounting on a demand it
// can meet exactly: 6 cores need 10 pods at 60%; once settled nothing is
// under-provisioned, nothing rescales, and the pod-hours are 10 a hour.
func TestConstantDemandSettles(t *testing.T) {
	tr := Trace{Name: "constant", Warmup: 1, Demand: make([]float64, 2*day)}
	for i := range tr.Demand {
		tr.Demand[i] = 6
	}
	r, err := run(tr, hpa, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r.UnderInBand != 0 || r.UnderBeyond != 0 || r.OverloadMinutes != 0 || r.Rescales != 0 {
		t.Errorf("result %+v; want nothing under-provisioned and no rescale", r)
	}
	if r.PodHours < 239.9 || r.PodHours > 240.1 {
		t.Errorf("%.2f pod-hours; want 240 (10 pods for a day)", r.PodHours)
	}
}

// TestStepCountsUnderProvisioning checks the accounting of a step up the
// HPA cannot follow at once: from 3 cores to 12, pods ready 5 minutes
// after they are asked for.
func TestStepCountsUnderProvisioning(t *testing.T) {
	tr := Trace{Name: "step", Warmup: 0, Demand: make([]float64, day/24)} // an hour
	for i := range tr.Demand {
		tr.Demand[i] = 3
		if i >= 40 { // 10 minutes in
			tr.Demand[i] = 12
		}
	}
	r, err := run(tr, hpa, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// 12 cores need 20 pods; 5 are ready when the step comes, so for at
	// least 5 minutes 15 are missing beyond the band (18.2 - 5) and the
	// demand (12) exceeds what 5 pods serve.
	if r.UnderBeyond < 5*13 || r.OverloadMinutes < 5 || r.Rescales == 0 {
		t.Errorf("result %+v; want ≥ 65 pod-min beyond the band, ≥ 5 overload minutes and a rescale", r)
	}
}

func TestShrinkRemovesUnreadyFirst(t *testing.T) {
	now := epoch
	pods := []pod{
		{name: "a", readyAt: now.Add(-time.Hour)},
		{name: "b", readyAt: now.Add(time.Minute)}, // not ready yet
		{name: "c", readyAt: now.Add(-time.Minute)},
	}
	got := shrink(pods, 2, now)
	if len(got) != 1 || got[0].name != "a" {
		t.Errorf("kept %+v; want a (b unready goes first, then the newest, c)", got)
	}
}
