package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/target"
)

// copyWorkers is how many records Copy writes (and reads back), and
// DeleteClusters deletes, at once: enough for bbolt to commit them in
// shared transactions and for etcd's round trips to overlap.
var copyWorkers = 16

// CopyOptions select the records Copy copies.
type CopyOptions struct {
	// Clusters, when not empty, limits the copy to the targets of these
	// clusters (exact names; an empty name is refused, duplicates count
	// once). The destination may then hold other clusters' targets: it is
	// another shard. Empty copies every target.
	Clusters []string
}

// queries returns the List queries that select what o names: one per
// cluster, or one for the whole store.
func (o CopyOptions) queries() ([]Query, error) {
	if len(o.Clusters) == 0 {
		return []Query{{PageSize: MaxPageSize}}, nil
	}
	var qs []Query
	seen := map[string]bool{}
	for _, c := range o.Clusters {
		if c == "" {
			return nil, fmt.Errorf("%w: an empty cluster name (it would select every cluster)", ErrInvalid)
		}
		if !seen[c] {
			seen[c] = true
			qs = append(qs, Query{Cluster: c, PageSize: MaxPageSize})
		}
	}
	return qs, nil
}

// OccupiedError is Copy's refusal of a destination that already holds
// targets of what it would copy; nothing was written.
type OccupiedError struct {
	// Clusters counts the destination's targets of each cluster named in
	// CopyOptions.Clusters that it holds any of; nil for a whole-store copy.
	Clusters map[string]int
	// Targets is how many targets that makes; for a whole-store copy,
	// every target of the destination.
	Targets int
}

// Error says how many targets the destination holds, per cluster when
// the copy names clusters.
func (e *OccupiedError) Error() string {
	if e.Clusters == nil {
		return fmt.Sprintf("store: copy: the destination is not empty: it holds %d targets", e.Targets)
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(e.Clusters)) {
		parts = append(parts, fmt.Sprintf("%q (%d)", c, e.Clusters[c]))
	}
	return fmt.Sprintf("store: copy: the destination already holds %d targets of the clusters to copy: %s", e.Targets, strings.Join(parts, ", "))
}

// Copy writes the records of src that opts selects into dst, as they are,
// reads each back from dst and compares it with what was copied, and
// returns how many records it wrote. It moves a store between backends
// (bbolt to etcd and back) and, with opts.Clusters, clusters between
// shards. dst must hold none of the targets Copy may write — for a
// whole-store copy no target at all, with Clusters no target of those
// clusters — or Copy writes nothing and returns an *OccupiedError; so
// after a failed copy, the selected targets dst holds are exactly those
// Copy wrote (DeleteClusters removes them). Records src cannot decode fail
// the copy. The change feed is not copied: dst records each copied
// record's last decision and events as new changes, in no particular
// order.
func Copy(ctx context.Context, dst, src Store, opts CopyOptions) (int, error) {
	qs, err := opts.queries()
	if err != nil {
		return 0, err
	}
	if err := unoccupied(ctx, dst, len(opts.Clusters) > 0, qs); err != nil {
		return 0, err
	}
	var written atomic.Int64
	err = pages(ctx, src, qs, "copy", func(page []target.Record) error {
		err := each(ctx, page, func(rec target.Record) error {
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
			return err
		}
		return each(ctx, page, func(want target.Record) error {
			got, err := dst.Get(ctx, want.Key)
			if err != nil {
				return fmt.Errorf("store: copy: verify %s: %w", want.Key, err)
			}
			if !gocmp.Equal(want, got) {
				return fmt.Errorf("store: copy: verify %s: stored record differs: %s", want.Key, gocmp.Diff(want, got))
			}
			return nil
		})
	})
	return int(written.Load()), err
}

// unoccupied returns an *OccupiedError when dst holds targets of what the
// queries qs select: of their clusters when byCluster, else of any.
func unoccupied(ctx context.Context, dst Store, byCluster bool, qs []Query) error {
	occ := &OccupiedError{}
	if !byCluster {
		n, _, err := dst.Count(ctx)
		if err != nil {
			return fmt.Errorf("store: copy: destination: %w", err)
		}
		occ.Targets = n
	} else {
		occ.Clusters = map[string]int{}
		for _, q := range qs {
			n, err := count(ctx, dst, q)
			if err != nil {
				return fmt.Errorf("store: copy: destination: %w", err)
			}
			if n > 0 {
				occ.Clusters[q.Cluster] = n
				occ.Targets += n
			}
		}
	}
	if occ.Targets > 0 {
		return occ
	}
	return nil
}

// count returns how many records of s q selects, those s cannot decode
// included.
func count(ctx context.Context, s Store, q Query) (int, error) {
	n := 0
	for {
		page, next, err := s.List(ctx, q)
		switch u, ok := err.(interface{ Unwrap() []error }); {
		case err == nil:
		case errors.Is(err, ErrCorrupt) && ok:
			n += len(u.Unwrap())
		case errors.Is(err, ErrCorrupt):
			n++
		default:
			return n, err
		}
		n += len(page)
		if next == "" {
			return n, nil
		}
		q.PageToken = next
	}
}

// pages calls fn with each page of the records of s that the queries qs
// select, query by query, in key order; a record s cannot decode stops it
// with that error, wrapped as what (copy, delete) failed.
func pages(ctx context.Context, s Store, qs []Query, what string, fn func([]target.Record) error) error {
	for _, q := range qs {
		for {
			page, next, err := s.List(ctx, q)
			if err != nil {
				return fmt.Errorf("store: %s: read: %w", what, err)
			}
			if err := fn(page); err != nil {
				return err
			}
			if next == "" {
				break
			}
			q.PageToken = next
		}
	}
	return nil
}

// DeleteClusters deletes every target of the named clusters (exact names;
// an empty name is refused) from s and returns how many it deleted, with
// their decision logs; the change feed records each deletion. It is how a
// move between shards ends, once the copy is verified, and how the
// targets a failed Copy wrote are removed. A record s cannot decode stops
// it, as does the first failed deletion; what was deleted stays deleted,
// and calling it again deletes the rest.
func DeleteClusters(ctx context.Context, s Store, clusters []string) (int, error) {
	if len(clusters) == 0 {
		return 0, fmt.Errorf("%w: delete: no cluster named", ErrInvalid)
	}
	qs, err := CopyOptions{Clusters: clusters}.queries()
	if err != nil {
		return 0, err
	}
	var deleted atomic.Int64
	// Each page's keys sort before the next page's token, so deleting them
	// does not move it.
	err = pages(ctx, s, qs, "delete", func(page []target.Record) error {
		return each(ctx, page, func(rec target.Record) error {
			if err := s.Delete(ctx, rec.Key); err != nil {
				return fmt.Errorf("store: delete %s: %w", rec.Key, err)
			}
			deleted.Add(1)
			return nil
		})
	})
	return int(deleted.Load()), err
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
