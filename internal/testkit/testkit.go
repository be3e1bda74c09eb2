// Package testkit holds the small helpers every package's tests share: a
// clock a test sets and steps, Eventually (and Poll, its form without a
// testing.TB) for conditions reached asynchronously, and Ptr. It imports
// the standard library only, so any test may use it.
package testkit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Clock is a clock a test controls, safe for concurrent use; inject its
// Now where code takes a clock. The zero value reads the zero time.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Step moves the clock forward by d.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Poll calls cond until it returns nil, and returns nil; or, when timeout
// passes or ctx ends first, an error wrapping cond's last error. A timeout
// of 0 polls until ctx ends. It waits 5 ms after the first call, doubling
// to at most 200 ms.
func Poll(ctx context.Context, timeout time.Duration, cond func() error) error {
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	wait := 5 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-deadline:
			return fmt.Errorf("not reached after %v: %w", timeout, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// Eventually polls cond as Poll does, within timeout or the test's end,
// and fails the test with what and cond's last error when it is not met.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Poll(t.Context(), timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }
