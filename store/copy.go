package store

import (
	"context"
	"fmt"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/target"
)

// Copy writes every record of src into dst, as it is, then reads every
// record back from dst and compares it with what was copied; it returns
// how many records it copied. It moves a store between backends (bbolt to
// etcd and back). Records src cannot decode fail the copy. The change feed
// is not copied: dst records each copied record's last decision and
// events as new changes.
func Copy(ctx context.Context, dst, src Store) (int, error) {
	var copied []target.Record
	q := Query{PageSize: MaxPageSize}
	for {
		page, next, err := src.List(ctx, q)
		if err != nil {
			return len(copied), fmt.Errorf("store: copy: read: %w", err)
		}
		for _, rec := range page {
			if _, err := dst.Update(ctx, rec.Key, func(r *target.Record) error {
				*r = rec
				return nil
			}); err != nil {
				return len(copied), fmt.Errorf("store: copy %s: %w", rec.Key, err)
			}
			copied = append(copied, rec)
		}
		if next == "" {
			break
		}
		q.PageToken = next
	}
	for _, want := range copied {
		got, err := dst.Get(ctx, want.Key)
		if err != nil {
			return len(copied), fmt.Errorf("store: copy: verify %s: %w", want.Key, err)
		}
		if !cmp.Equal(want, got) {
			return len(copied), fmt.Errorf("store: copy: verify %s: stored record differs: %s", want.Key, cmp.Diff(want, got))
		}
	}
	return len(copied), nil
}
