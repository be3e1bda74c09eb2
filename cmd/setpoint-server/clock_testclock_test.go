//go:build testclock

package main

import (
	"log/slog"
	"testing"
	"time"
)

// The test build's clock is offset by SETPOINT_TEST_CLOCK_OFFSET; a value
// that is not a duration is an error, none is the system clock.
func TestTestClockOffset(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		env    string
		offset time.Duration
		err    bool
	}{
		{env: "", offset: 0},
		{env: "-2s", offset: -2 * time.Second},
		{env: "30s", offset: 30 * time.Second},
		{env: "soon", err: true},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(clockOffsetEnv, tc.env)
			now, err := serverClock(log)
			if tc.err {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.env == "" {
				if now != nil {
					t.Fatal("a clock without an offset set; want nil (the system clock)")
				}
				return
			}
			before := time.Now()
			got := now()
			if d := got.Sub(before); d < tc.offset || d > tc.offset+time.Second {
				t.Errorf("clock is %v from the system's, want %v", d, tc.offset)
			}
		})
	}
}
