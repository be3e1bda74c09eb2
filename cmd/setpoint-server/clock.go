//go:build !testclock

package main

import (
	"log/slog"
	"time"
)

// serverClock is the server's clock: nil, the system clock. A binary
// built with the testclock tag (clock_testclock.go) can run its clock
// offset instead, for the clock-skew tests of test/ha; a binary built
// without it, as every released one is, has no way to.
func serverClock(*slog.Logger) (func() time.Time, error) { return nil, nil }
