// Package slowfs is a passthrough FUSE filesystem whose fsync can be made
// slow, for gray-failure tests: a disk that still answers reads and writes
// but takes seconds to make them durable (a failing drive, a saturated
// volume, a noisy neighbour on shared storage). Every operation goes to a
// backing directory on the real filesystem (go-fuse's loopback); only
// fsync and fdatasync wait, for as long as SetDelay says, before
// they are passed on.
//
// The test process serves the filesystem and the program under test
// (an etcd member) uses the mount. As with test/internal/lazyfs, the
// serving process must not mmap files of the mount itself.
//
// Mounting needs /dev/fuse and, as go-fuse mounts directly when it can,
// root (CAP_SYS_ADMIN); otherwise go-fuse falls back to fusermount.
package slowfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Disk is a mounted slowfs. Its methods are safe for concurrent use.
type Disk struct {
	dir    string
	server *fuse.Server

	mu    sync.Mutex
	delay time.Duration
	heal  chan struct{} // closed when the delay is lifted

	syncs, slowed atomic.Int64
}

// Mount serves backing, an existing directory, at dir, an existing empty
// directory. Fsync is not delayed until SetDelay.
func Mount(backing, dir string) (*Disk, error) {
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("slowfs: %w", err)
	}
	d := &Disk{dir: dir, heal: make(chan struct{})}
	server, err := fs.Mount(dir, &node{LoopbackNode: root.(*fs.LoopbackNode), d: d}, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMount: true,
			FsName:      "slowfs",
			Name:        "slowfs",
			// Several requests at once, as a disk takes them: a write
			// need not wait behind another file's slow fsync.
			MaxBackground: 64,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("slowfs: mount %s: %w", dir, err)
	}
	d.server = server
	return d, nil
}

// SetDelay makes every fsync and fdatasync of a file take d longer; 0
// lifts the delay, and the syncs waiting on it proceed at once.
func (d *Disk) SetDelay(delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if delay == 0 && d.delay != 0 {
		close(d.heal)
		d.heal = make(chan struct{})
	}
	d.delay = delay
}

// Stats reports the file syncs served and how many of them were delayed.
func (d *Disk) Stats() (syncs, delayed int64) {
	return d.syncs.Load(), d.slowed.Load()
}

// Unmount lifts the delay and stops serving; the programs that used the
// mount must have exited.
func (d *Disk) Unmount() error {
	d.SetDelay(0)
	var err error
	for range 50 {
		if err = d.server.Unmount(); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		if derr := syscall.Unmount(d.dir, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("slowfs: unmount %s: %w (detach: %v)", d.dir, err, derr)
		}
	}
	d.server.Wait()
	return nil
}

// wait holds a sync for the current delay, or until it is lifted.
func (d *Disk) wait() {
	d.syncs.Add(1)
	d.mu.Lock()
	delay, heal := d.delay, d.heal
	d.mu.Unlock()
	if delay == 0 {
		return
	}
	d.slowed.Add(1)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-heal:
	}
}

// node is a loopback node whose file syncs wait on its Disk.
type node struct {
	*fs.LoopbackNode
	d *Disk
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeFsyncer     = (*node)(nil)
)

// WrapChild makes every node of the tree a slowfs node.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), d: n.d}
}

// Fsync waits on the disk's delay, then syncs the file (fdatasync when
// the caller asked only for its data).
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	n.d.wait()
	if fsyncer, ok := f.(fs.FileFsyncer); ok {
		return fsyncer.Fsync(ctx, flags)
	}
	// No open handle (the kernel may sync a node by path): open it.
	file, err := os.Open(filepath.Join(n.RootData.Path, n.Path(n.Root())))
	if err != nil {
		return fs.ToErrno(err)
	}
	defer file.Close()
	return fs.ToErrno(file.Sync())
}
