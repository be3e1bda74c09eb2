package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ExpiryOptions configure RunExpiry.
type ExpiryOptions struct {
	// Every is the time between two passes; it must be positive.
	Every time.Duration
	// MaxIdle is how long a target may go unseen (no Recommend or Observe)
	// before it is removed; it must be positive.
	MaxIdle time.Duration
	// Now is the clock the cutoff Now()-MaxIdle is computed from; nil means
	// time.Now. The interval between passes is always real time.
	Now func() time.Time
	// Report, when set, is called after each pass with the number of
	// records removed and the pass's error, for logs and metrics. It runs
	// on RunExpiry's goroutine.
	Report func(removed int, err error)
}

// RunExpiry removes the targets of s that have not been seen for
// opts.MaxIdle: one pass at once, then one every opts.Every, until ctx ends
// (it then returns nil) or s is closed (ErrClosed). A failed pass is
// reported and the next one runs as planned. It blocks: run it on a
// goroutine whose lifetime the caller manages, and stop it before closing
// s.
func RunExpiry(ctx context.Context, s Store, opts ExpiryOptions) error {
	if opts.Every <= 0 || opts.MaxIdle <= 0 {
		return fmt.Errorf("%w: expiry needs a positive interval and idle time, got every=%v maxIdle=%v", ErrInvalid, opts.Every, opts.MaxIdle)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	tick := time.NewTicker(opts.Every)
	defer tick.Stop()
	for {
		n, err := s.Expire(ctx, now().Add(-opts.MaxIdle))
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrClosed):
			return err
		}
		if opts.Report != nil {
			opts.Report(n, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
