//go:build !testclock

package main

import (
	"log/slog"
	"testing"
)

// A released binary (built without the testclock tag) runs on the system
// clock whatever its environment says.
func TestReleaseBuildIgnoresTestClockOffset(t *testing.T) {
	t.Setenv("SETPOINT_TEST_CLOCK_OFFSET", "1h")
	now, err := serverClock(slog.New(slog.DiscardHandler))
	if err != nil || now != nil {
		t.Fatalf("serverClock: clock set %t, error %v; want the system clock (nil, nil)", now != nil, err)
	}
}
