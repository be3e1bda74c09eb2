package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable, and its size, without its other
// metadata.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// newSyncer returns how the journal flushes: through io_uring where the
// kernel offers it (uring_linux.go), else fdatasync. how says which, and
// why not io_uring.
func newSyncer(noURing bool) (sync func(*os.File) error, release func(), how string) {
	if noURing {
		return fdatasync, func() {}, "fdatasync (io_uring not wanted: Options.NoURing)"
	}
	u, err := newUringSyncer()
	if err != nil {
		return fdatasync, func() {}, "fdatasync (io_uring unavailable: " + err.Error() + ")"
	}
	return u.fdatasync, u.close, "io_uring"
}
