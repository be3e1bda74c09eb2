package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/target"
)

// copyWorkers is how many records Copy writes (and reads back) at once:
// enough for bbolt to commit them in shared transactions and for etcd's
// round trips to overlap.
var copyWorkers = 16

// Copy writes every record of src into dst, as it is, then reads every
// record back from dst and compares it with what was copied; it returns
// how many records it wrote. It moves a store between backends (bbolt to
// etcd and back). Records src cannot decode fail the copy. The change feed
// is not copied: dst records each copied record's last decision and
// events as new changes, in no particular order.
func Copy(ctx context.Context, dst, src Store) (int, error) {
	var (
		copied  []target.Record
		written atomic.Int64
	)
	q := Query{PageSize: MaxPageSize}
	for {
		page, next, err := src.List(ctx, q)
		if err != nil {
			return int(written.Load()), fmt.Errorf("store: copy: read: %w", err)
		}
		err = each(ctx, page, func(rec target.Record) error {
			if _, err := dst.Update(ctx, rec.Key, func(r *target.Record) error {
				*r = rec
				return nil
			}); err != nil {
				return fmt.Errorf("store: copy %s: %w", rec.Key, err)
			}
			written.Add(1)
			return nil
		})
		if err != nil {
			return int(written.Load()), err
		}
		copied = append(copied, page...)
		if next == "" {
			break
		}
		q.PageToken = next
	}
	err := each(ctx, copied, func(want target.Record) error {
		got, err := dst.Get(ctx, want.Key)
		if err != nil {
			return fmt.Errorf("store: copy: verify %s: %w", want.Key, err)
		}
		if !cmp.Equal(want, got) {
			return fmt.Errorf("store: copy: verify %s: stored record differs: %s", want.Key, cmp.Diff(want, got))
		}
		return nil
	})
	return len(copied), err
}

// each calls fn with every record of recs, copyWorkers at a time, and
// returns the first error; after an error no further call starts.
func each(ctx context.Context, recs []target.Record, fn func(target.Record) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, copyWorkers)
	var wg sync.WaitGroup
	for _, rec := range recs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(rec); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}
