package etcdstore

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
)

// Backup implements store.Store: it writes a bbolt store file holding
// every record (read page by page, so concurrent writes may or may not be
// in it; each record is whole), which boltstore.Open accepts as it is — the
// way to move an etcd store to bbolt. The feed is not carried.
func (s *Store) Backup(ctx context.Context, size func(int64) error, w io.Writer) (int64, error) {
	dir, err := os.MkdirTemp("", "setpoint-etcd-backup-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	b, err := boltstore.Open(filepath.Join(dir, "backup.db"), boltstore.Options{MaxEvents: s.opts.MaxEvents, MaxHistory: s.opts.MaxHistory})
	if err != nil {
		return 0, err
	}
	defer b.Close()
	if _, err := store.Copy(ctx, b, s, store.CopyOptions{}); err != nil {
		return 0, err
	}
	return b.Backup(ctx, size, w)
}
