package boltstore

import (
	"context"
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
)

// Backup writes a consistent snapshot of the store file to w; see
// store.Store.Backup. The snapshot is taken in one read-only transaction, so it holds
// exactly the writes committed before Backup began, and writes go on
// committing while it is written (bbolt keeps the pages the snapshot
// reads until it ends). A slow w therefore holds on to old pages and the
// file may grow meanwhile; it never blocks writers. When ctx ends, the next
// write to w fails with ctx.Err().
func (b *Store) Backup(ctx context.Context, size func(int64) error, w io.Writer) (int64, error) {
	var n int64
	err := b.viewLatest(ctx, func(tx *bolt.Tx) error {
		if err := size(tx.Size()); err != nil {
			return err
		}
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx: ctx, w: w})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store: backup: %w", err)
	}
	return n, nil
}

// ctxWriter fails its writes once ctx has ended.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
