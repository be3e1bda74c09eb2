//go:build !linux

package store

import "os"

// fdatasync makes f's data durable (fsync where fdatasync is not offered).
func fdatasync(f *os.File) error { return f.Sync() }

// newSyncer returns how the journal flushes: fsync, off Linux.
func newSyncer(bool) (sync func(*os.File) error, release func(), how string) {
	return fdatasync, func() {}, "fsync"
}
