package main

import (
	"testing"
	"time"
)

func TestPeakAt(t *testing.T) {
	for _, tc := range []struct {
		trace string
		want  time.Duration
	}{
		{"ramp", 30 * time.Second},                   // hold 15 s, rise 15 s
		{"spike", 15*time.Second + time.Millisecond}, // the jump just after 15 s
		{"diurnal", time.Minute},                     // half the 2-minute period
	} {
		tr, err := traceNamed(tc.trace)
		if err != nil {
			t.Fatal(err)
		}
		if got := peakAt(tr); got != tc.want {
			t.Errorf("peakAt(%s) = %v, want %v (points %v)", tc.trace, got, tc.want, tr.Points)
		}
		if got := peakAt(tr.Scaled(4)); got != 4*tc.want {
			t.Errorf("peakAt(%s scaled 4x) = %v, want %v", tc.trace, got, 4*tc.want)
		}
	}
}

func TestValidateScreenshotDir(t *testing.T) {
	c := config{clusters: 2, servers: 3, trace: "ramp", speed: 4, screenshot: t.TempDir()}
	if err := c.validate(); err != nil {
		t.Errorf("an existing directory: %v", err)
	}
	c.screenshot = t.TempDir() + "/missing"
	if err := c.validate(); err == nil {
		t.Error("a missing -screenshot directory passed validation")
	}
}
