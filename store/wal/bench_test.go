package wal_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/setpointhq/setpoint/store/wal"
)

// BenchmarkAppend appends 16 KiB entries (a batch of about 16 decisions)
// and flushes each, to a segment that grows with each entry and to one
// preallocated (as etcd preallocates its WAL segments), whose flushes
// need not record a new size.
func BenchmarkAppend(b *testing.B) {
	for _, prealloc := range []bool{false, true} {
		name := "growing"
		if prealloc {
			name = "preallocated"
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "db")
			l, _, err := wal.Open(path, wal.Options{ID: []byte("id"), FileMode: 0o600})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if err := l.Reset(0); err != nil {
				b.Fatal(err)
			}
			data := make([]byte, 16<<10)
			if prealloc {
				f, err := unix.Open(path+wal.Suffix, unix.O_RDWR, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := unix.Fallocate(f, 0, 0, int64(b.N+1)*int64(len(data)+32)); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fsync(f); err != nil {
					b.Fatal(err)
				}
				unix.Close(f)
			}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for range b.N {
				if _, err := l.Append(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
