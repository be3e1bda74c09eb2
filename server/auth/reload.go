package auth

import (
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultReloadInterval is how often, at most, certificate and principal
// files are checked for changes.
const DefaultReloadInterval = 5 * time.Second

// ReloadOptions configure how files are reloaded when they change.
type ReloadOptions struct {
	// Interval is how often, at most, the files are read again to detect
	// a change (on the next handshake or call after it elapsed);
	// DefaultReloadInterval when zero.
	Interval time.Duration
	// Logger receives reloads and failed reloads; slog.Default() when nil.
	Logger *slog.Logger
	// Now is the clock of the checks; time.Now when nil.
	Now func() time.Time
}

func (o ReloadOptions) withDefaults() ReloadOptions {
	if o.Interval <= 0 {
		o.Interval = DefaultReloadInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// reloader keeps the value parsed from a set of files, and parses them
// again when their content changed. It checks lazily: on a call to current
// at least Interval after the last check, by one caller while the others
// keep using the current value. A file that cannot be read or parsed keeps
// the last good value (a half-rotated pair of files is retried at the next
// check). It starts no goroutine.
type reloader[T any] struct {
	name  string
	paths []string
	parse func(contents [][]byte) (T, error)
	o     ReloadOptions

	val atomic.Pointer[T]
	// checked is the time of the last check, in Unix nanoseconds.
	checked atomic.Int64
	// mu serializes checks; sum, the digest of the loaded files, is
	// guarded by it.
	mu  sync.Mutex
	sum [sha256.Size]byte
}

// newReloader reads and parses the files once; an error there is returned.
func newReloader[T any](name string, paths []string, parse func([][]byte) (T, error), o ReloadOptions) (*reloader[T], error) {
	r := &reloader[T]{name: name, paths: paths, parse: parse, o: o.withDefaults()}
	contents, sum, err := r.read()
	if err != nil {
		return nil, err
	}
	v, err := parse(contents)
	if err != nil {
		return nil, err
	}
	r.val.Store(&v)
	r.sum = sum
	r.checked.Store(r.o.Now().UnixNano())
	return r, nil
}

// current returns the value, first reloading it when the check interval
// elapsed and the files changed.
func (r *reloader[T]) current() T {
	if r.o.Now().UnixNano()-r.checked.Load() >= int64(r.o.Interval) && r.mu.TryLock() {
		r.check()
		r.mu.Unlock()
	}
	return *r.val.Load()
}

// check reloads the files when their content changed; r.mu is held.
func (r *reloader[T]) check() {
	r.checked.Store(r.o.Now().UnixNano())
	contents, sum, err := r.read()
	if err != nil {
		r.o.Logger.Warn("reload: cannot read; keeping the previous "+r.name, "err", err)
		return
	}
	if sum == r.sum {
		return
	}
	v, err := r.parse(contents)
	if err != nil {
		r.o.Logger.Warn("reload: invalid; keeping the previous "+r.name, "err", err)
		return
	}
	r.val.Store(&v)
	r.sum = sum
	r.o.Logger.Info("reloaded "+r.name, "files", r.paths)
}

// read returns the files' contents and a digest of them all.
func (r *reloader[T]) read() ([][]byte, [sha256.Size]byte, error) {
	h := sha256.New()
	contents := make([][]byte, len(r.paths))
	var errs []error
	for i, p := range r.paths {
		b, err := os.ReadFile(p)
		errs = append(errs, err)
		contents[i] = b
		h.Write([]byte(p))
		h.Write(b)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return contents, sum, errors.Join(errs...)
}
