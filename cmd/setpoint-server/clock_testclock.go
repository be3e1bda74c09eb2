//go:build testclock

package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"
)

// clockOffsetEnv names the environment variable that offsets the clock of
// a binary built with the testclock tag: a Go duration ("-2s", "30s")
// added to the system clock, so that test/ha can run servers whose clocks
// disagree as different machines' do. Only test builds read it.
const clockOffsetEnv = "SETPOINT_TEST_CLOCK_OFFSET"

// serverClock is the system clock offset by $SETPOINT_TEST_CLOCK_OFFSET
// (nil, the system clock, when it is unset); an offset that does not
// parse is an error.
func serverClock(log *slog.Logger) (func() time.Time, error) {
	v := os.Getenv(clockOffsetEnv)
	if v == "" {
		return nil, nil
	}
	off, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", clockOffsetEnv, err)
	}
	log.Warn("TEST BUILD: the server's clock is offset from the system clock", "offset", off)
	return func() time.Time { return time.Now().Add(off) }, nil
}
