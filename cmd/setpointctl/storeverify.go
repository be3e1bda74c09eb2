package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/store"
	tgt "github.com/setpointhq/setpoint/target"
)

// comparison is what compareStores found.
type comparison struct {
	// compared counts the targets of the source.
	compared int
	// missing are targets of the source the destination does not hold.
	missing []tgt.Key
	// differs are targets whose records differ, with the fields that do.
	differs []fieldDiff
	// corrupt are targets of the source the destination cannot decode.
	corrupt []tgt.Key
	// extra are targets only the destination holds.
	extra []tgt.Key
	// srcCorrupt are records the source cannot decode (not compared).
	srcCorrupt []tgt.Key
}

// fieldDiff names a target and the fields of its record that differ.
type fieldDiff struct {
	key    tgt.Key
	fields []string
}

func (c *comparison) ok() bool {
	return len(c.missing)+len(c.differs)+len(c.corrupt)+len(c.extra)+len(c.srcCorrupt) == 0
}

// summary counts what differs in one line.
func (c *comparison) summary() string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{
		{len(c.missing), "missing"}, {len(c.differs), "different"}, {len(c.corrupt), "undecodable in the copy"},
		{len(c.extra), "only in the copy"}, {len(c.srcCorrupt), "undecodable in the source"},
	} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return fmt.Sprintf("%s compared: %s", targets(c.compared), strings.Join(parts, ", "))
}

// maxListed bounds the targets print names per kind of difference.
const maxListed = 20

// print lists what differs, at most maxListed targets of each kind.
func (c *comparison) print(w io.Writer, src, dst location) {
	list := func(title string, keys []tgt.Key, detail func(i int) string) {
		if len(keys) == 0 {
			return
		}
		fmt.Fprintf(w, "%s (%d):\n", title, len(keys))
		for i, k := range keys {
			if i == maxListed {
				fmt.Fprintf(w, "  … and %d more\n", len(keys)-maxListed)
				break
			}
			fmt.Fprintf(w, "  %s%s\n", k.String(), detail(i))
		}
	}
	none := func(int) string { return "" }
	list("missing from "+dst.String(), c.missing, none)
	dk := make([]tgt.Key, len(c.differs))
	for i, d := range c.differs {
		dk[i] = d.key
	}
	list("different in "+dst.String(), dk, func(i int) string { return ": " + strings.Join(c.differs[i].fields, ", ") })
	list("cannot be decoded in "+dst.String(), c.corrupt, none)
	list("only in "+dst.String(), c.extra, none)
	list("cannot be decoded in "+src.String()+" (not compared)", c.srcCorrupt, none)
}

// readers is how many targets compareStores reads back at once.
const readers = 16

// compareStores reads every target of src (of clusters, when any are
// named), reads it back from dst and compares the two records; then it
// lists dst (those clusters of it) for targets src does not hold. Errors
// other than a record's are returned as they are.
func compareStores(ctx context.Context, src, dst store.Store, clusters []string) (*comparison, error) {
	c := &comparison{}
	seen := map[tgt.Key]bool{}
	qs := []store.Query{{}}
	if len(clusters) > 0 {
		qs = qs[:0]
		for _, cl := range clusters {
			qs = append(qs, store.Query{Cluster: cl})
		}
	}
	err := eachPage(ctx, src, qs, func(page []tgt.Record) error {
		got, errs := readBack(ctx, dst, page)
		for i, r := range page {
			c.compared++
			seen[r.Key] = true
			switch err := errs[i]; {
			case errors.Is(err, store.ErrNotFound):
				c.missing = append(c.missing, r.Key)
			case errors.Is(err, store.ErrCorrupt):
				c.corrupt = append(c.corrupt, r.Key)
			case err != nil:
				return fmt.Errorf("read %s back: %w", r.Key, err)
			default:
				if fields := differentFields(r, got[i]); len(fields) > 0 {
					c.differs = append(c.differs, fieldDiff{r.Key, fields})
				}
			}
		}
		return nil
	}, func(k tgt.Key) {
		seen[k] = true
		c.srcCorrupt = append(c.srcCorrupt, k)
	})
	if err != nil {
		return nil, err
	}
	other := func(k tgt.Key) {
		if !seen[k] {
			c.extra = append(c.extra, k)
		}
	}
	err = eachPage(ctx, dst, qs, func(page []tgt.Record) error {
		for _, r := range page {
			other(r.Key)
		}
		return nil
	}, other)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// readBack gets the record of each of page's keys from s, readers at a
// time: got[i] and errs[i] answer page[i].
func readBack(ctx context.Context, s store.Store, page []tgt.Record) (got []tgt.Record, errs []error) {
	got, errs = make([]tgt.Record, len(page)), make([]error, len(page))
	sem := make(chan struct{}, readers)
	var wg sync.WaitGroup
	for i, r := range page {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got[i], errs[i] = s.Get(ctx, r.Key)
		})
	}
	wg.Wait()
	return got, errs
}

// eachPage calls fn with every page of the records of s that each of qs
// selects, in key order, and corrupt with the key of every such record s
// cannot decode.
func eachPage(ctx context.Context, s store.Store, qs []store.Query, fn func([]tgt.Record) error, corrupt func(tgt.Key)) error {
	for _, q := range qs {
		q.PageSize = store.MaxPageSize
		for {
			page, next, err := s.List(ctx, q)
			if err != nil && !errors.Is(err, store.ErrCorrupt) {
				return err
			}
			for _, ce := range corruptErrors(err) {
				corrupt(ce.Key)
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

// corruptErrors returns the CorruptErrors err holds (List joins them).
func corruptErrors(err error) []*store.CorruptError {
	var out []*store.CorruptError
	var walk func(error)
	walk = func(err error) {
		if ce, ok := err.(*store.CorruptError); ok {
			out = append(out, ce)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// differentFields names the fields of tgt.Record in which a and b
// differ.
func differentFields(a, b tgt.Record) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		if !cmp.Equal(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, va.Type().Field(i).Name)
		}
	}
	return out
}
