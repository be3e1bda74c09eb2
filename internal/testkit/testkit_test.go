package testkit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := testkit.NewClock(t0)
	c.Step(15 * time.Second)
	if got, want := c.Now(), t0.Add(15*time.Second); !got.Equal(want) {
		t.Errorf("after Step: %v, want %v", got, want)
	}
	c.Set(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Errorf("after Set: %v, want %v", got, t0)
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	if err := testkit.Poll(t.Context(), time.Minute, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Errorf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
	last := errors.New("still not")
	if err := testkit.Poll(t.Context(), 20*time.Millisecond, func() error { return last }); !errors.Is(err, last) {
		t.Errorf("Poll past its timeout = %v, want the last error", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := testkit.Poll(ctx, time.Minute, func() error { return last }); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll with an ended context = %v, want context.Canceled", err)
	}
}
