// Package lazyfs is a FUSE filesystem for power-loss tests, in the spirit
// of LazyFS (the filesystem etcd's robustness tests use): it keeps every
// file in memory in two versions, what reads see and what was last made
// durable by fsync (or fdatasync), and Cut drops everything written since a
// file's last fsync, as a power cut drops what only a page cache held.
//
// The filesystem is one flat directory of regular files. Creating,
// renaming and removing files take effect at once and survive a cut: only
// file contents (and sizes) are lazy. The test process serves the
// filesystem; the program under test (setpoint-server) writes through the
// kernel's FUSE mount. A cut is: kill the program, Unmount, Cut, Mount.
//
// The process that serves the filesystem must not use the mount itself:
// a page fault on a file of the mount (an mmap, as bbolt makes) blocks a
// thread the Go runtime may wait for while the server waits for the
// runtime. Read what survived with Durable instead.
//
// Mounting needs /dev/fuse and, as go-fuse mounts directly when it can,
// root (CAP_SYS_ADMIN); otherwise go-fuse falls back to fusermount.
package lazyfs

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// pageSize is the unit in which unsynced writes are tracked.
const pageSize = 4096

// file is one file's contents.
type file struct {
	ino     uint64
	mode    uint32
	live    []byte         // what reads see
	durable []byte         // as of the last fsync: what survives a cut
	dirty   map[int64]bool // pages where live may differ from durable
}

// markDirty records that bytes [from, to) of live may differ from durable.
func (f *file) markDirty(from, to int64) {
	for p := from / pageSize; p*pageSize < to; p++ {
		f.dirty[p] = true
	}
}

// resize returns b with length n; bytes beyond the old length are zero.
func resize(b []byte, n int64) []byte {
	old := int64(len(b))
	if n <= old {
		return b[:n]
	}
	if n <= int64(cap(b)) {
		b = b[:n]
		clear(b[old:])
		return b
	}
	nb := make([]byte, n, max(n, 2*int64(cap(b))))
	copy(nb, b)
	return nb
}

// copyPages copies the dirty pages of src into dst, which has src's length.
func copyPages(dst, src []byte, dirty map[int64]bool) {
	for p := range dirty {
		from := p * pageSize
		if from >= int64(len(src)) {
			continue
		}
		to := min(from+pageSize, int64(len(src)))
		copy(dst[from:to], src[from:to])
	}
}

// FS is the filesystem's state; it outlives mounts. It is safe for
// concurrent use.
type FS struct {
	mu      sync.Mutex
	files   map[string]*file
	nextIno uint64
	gen     uint64 // bumped by every cut: nodes of an older mount fail
	server  *fuse.Server
	dir     string
	// Stats.
	syncs, cuts, dropped int64
}

// New returns an empty filesystem.
func New() *FS {
	return &FS{files: map[string]*file{}, nextIno: 2}
}

// Stats reports the fsyncs served, the cuts made and the dirty pages the
// cuts dropped.
func (l *FS) Stats() (syncs, cuts, droppedPages int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.syncs, l.cuts, l.dropped
}

// Mount serves the filesystem at dir, an existing empty directory.
func (l *FS) Mount(dir string) error {
	l.mu.Lock()
	root := &dirNode{l: l, gen: l.gen}
	l.mu.Unlock()
	zero := time.Duration(0)
	server, err := fs.Mount(dir, root, &fs.Options{
		// No caching of attributes or names in the kernel: a file's size
		// must come from here after a cut and a remount.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMount: true,
			FsName:      "lazyfs",
			Name:        "lazyfs",
			// Several requests at once, as a disk would take them.
			MaxBackground: 64,
		},
	})
	if err != nil {
		return fmt.Errorf("lazyfs: mount %s: %w", dir, err)
	}
	l.server, l.dir = server, dir
	return nil
}

// Unmount stops serving; the program that used the mount must have exited.
func (l *FS) Unmount() error {
	if l.server == nil {
		return nil
	}
	var err error
	for range 50 {
		if err = l.server.Unmount(); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		// Last resort: detach, so that the next mount can proceed.
		if derr := syscall.Unmount(l.dir, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("lazyfs: unmount %s: %w (detach: %v)", l.dir, err, derr)
		}
	}
	l.server.Wait()
	l.server = nil
	return nil
}

// Cut simulates a power cut: every file loses what was written since its
// last fsync. Call it between Unmount and the next Mount; requests of the
// old mount still in flight are refused from now on.
func (l *FS) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.cuts++
	for _, f := range l.files {
		l.dropped += int64(len(f.dirty))
		f.live = resize(f.live, int64(len(f.durable)))
		copyPages(f.live, f.durable, f.dirty)
		clear(f.dirty)
	}
}

// Durable returns a copy of the durable contents of the file name: what a
// cut now would leave.
func (l *FS) Durable(name string) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.files[name]
	if !ok {
		return nil, false
	}
	return append([]byte(nil), f.durable...), true
}

// dirNode is the root directory.
type dirNode struct {
	fs.Inode
	l   *FS
	gen uint64
}

var (
	_ fs.NodeLookuper  = (*dirNode)(nil)
	_ fs.NodeReaddirer = (*dirNode)(nil)
	_ fs.NodeCreater   = (*dirNode)(nil)
	_ fs.NodeUnlinker  = (*dirNode)(nil)
	_ fs.NodeRenamer   = (*dirNode)(nil)
	_ fs.NodeGetattrer = (*dirNode)(nil)
)

// locked runs fn under the filesystem's lock unless the mount is stale.
func locked(l *FS, gen uint64, fn func() syscall.Errno) syscall.Errno {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != l.gen {
		return syscall.EIO
	}
	return fn()
}

func (d *dirNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o700
	return 0
}

// node returns the inode of f; the caller holds the lock.
func (d *dirNode) node(ctx context.Context, f *file, out *fuse.EntryOut) *fs.Inode {
	n := &fileNode{l: d.l, gen: d.gen, f: f}
	n.attr(&out.Attr)
	return d.NewInode(ctx, n, fs.StableAttr{Mode: syscall.S_IFREG, Ino: f.ino})
}

func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var node *fs.Inode
	errno := locked(d.l, d.gen, func() syscall.Errno {
		f, ok := d.l.files[name]
		if !ok {
			return syscall.ENOENT
		}
		node = d.node(ctx, f, out)
		return 0
	})
	return node, errno
}

func (d *dirNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	var entries []fuse.DirEntry
	errno := locked(d.l, d.gen, func() syscall.Errno {
		for name, f := range d.l.files {
			entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: f.ino})
		}
		return 0
	})
	if errno != 0 {
		return nil, errno
	}
	return fs.NewListDirStream(entries), 0
}

func (d *dirNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	var node *fs.Inode
	errno := locked(d.l, d.gen, func() syscall.Errno {
		f, ok := d.l.files[name]
		switch {
		case ok && flags&syscall.O_EXCL != 0:
			return syscall.EEXIST
		case ok && flags&syscall.O_TRUNC != 0:
			f.markDirty(0, int64(len(f.live)))
			f.live = f.live[:0]
		case !ok:
			f = &file{ino: d.l.nextIno, mode: mode & 0o7777, dirty: map[int64]bool{}}
			d.l.nextIno++
			d.l.files[name] = f
		}
		node = d.node(ctx, f, out)
		return 0
	})
	return node, nil, 0, errno
}

func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return locked(d.l, d.gen, func() syscall.Errno {
		if _, ok := d.l.files[name]; !ok {
			return syscall.ENOENT
		}
		delete(d.l.files, name)
		return 0
	})
}

func (d *dirNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if newParent.EmbeddedInode() != d.EmbeddedInode() || flags != 0 {
		return syscall.ENOTSUP
	}
	return locked(d.l, d.gen, func() syscall.Errno {
		f, ok := d.l.files[name]
		if !ok {
			return syscall.ENOENT
		}
		delete(d.l.files, name)
		d.l.files[newName] = f
		return 0
	})
}

// fileNode is a regular file; its operations work on the node, without
// file handles.
type fileNode struct {
	fs.Inode
	l   *FS
	gen uint64
	f   *file
}

var (
	_ fs.NodeOpener    = (*fileNode)(nil)
	_ fs.NodeReader    = (*fileNode)(nil)
	_ fs.NodeWriter    = (*fileNode)(nil)
	_ fs.NodeFsyncer   = (*fileNode)(nil)
	_ fs.NodeFlusher   = (*fileNode)(nil)
	_ fs.NodeGetattrer = (*fileNode)(nil)
	_ fs.NodeSetattrer = (*fileNode)(nil)
	_ fs.NodeAllocater = (*fileNode)(nil)
)

// attr fills out from the file; the caller holds the lock.
func (n *fileNode) attr(out *fuse.Attr) {
	out.Mode = syscall.S_IFREG | n.f.mode
	out.Size = uint64(len(n.f.live))
	out.Blocks = (out.Size + 511) / 512
	out.Ino = n.f.ino
	out.Nlink = 1
}

func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, locked(n.l, n.gen, func() syscall.Errno {
		if flags&syscall.O_TRUNC != 0 {
			n.f.markDirty(0, int64(len(n.f.live)))
			n.f.live = n.f.live[:0]
		}
		return 0
	})
}

func (n *fileNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return locked(n.l, n.gen, func() syscall.Errno {
		n.attr(&out.Attr)
		return 0
	})
}

func (n *fileNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return locked(n.l, n.gen, func() syscall.Errno {
		if mode, ok := in.GetMode(); ok {
			n.f.mode = mode & 0o7777
		}
		if size, ok := in.GetSize(); ok {
			n.truncate(int64(size))
		}
		n.attr(&out.Attr)
		return 0
	})
}

// truncate sets the live size; the caller holds the lock.
func (n *fileNode) truncate(size int64) {
	old := int64(len(n.f.live))
	n.f.markDirty(min(old, size), max(old, size))
	n.f.live = resize(n.f.live, size)
}

func (n *fileNode) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if mode != 0 {
		return syscall.ENOTSUP
	}
	return locked(n.l, n.gen, func() syscall.Errno {
		if end := int64(off + size); end > int64(len(n.f.live)) {
			n.truncate(end)
		}
		return 0
	})
}

func (n *fileNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	var read int
	errno := locked(n.l, n.gen, func() syscall.Errno {
		if off < int64(len(n.f.live)) {
			read = copy(dest, n.f.live[off:])
		}
		return 0
	})
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(dest[:read]), 0
}

func (n *fileNode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	errno := locked(n.l, n.gen, func() syscall.Errno {
		end := off + int64(len(data))
		if end > int64(len(n.f.live)) {
			n.truncate(end)
		}
		copy(n.f.live[off:end], data)
		n.f.markDirty(off, end)
		return 0
	})
	if errno != 0 {
		return 0, errno
	}
	return uint32(len(data)), 0
}

// Fsync makes the file's contents durable (fsync and fdatasync alike).
func (n *fileNode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	return locked(n.l, n.gen, func() syscall.Errno {
		f := n.f
		f.durable = resize(f.durable, int64(len(f.live)))
		copyPages(f.durable, f.live, f.dirty)
		clear(f.dirty)
		n.l.syncs++
		return 0
	})
}

// Flush (close) makes nothing durable.
func (n *fileNode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }
