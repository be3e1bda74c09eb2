package store

// An fdatasync that does not hold a processor while the disk flushes.
//
// A goroutine blocked in a system call keeps its P (one of GOMAXPROCS)
// until the runtime's monitor takes it back, tens of microseconds to
// milliseconds later; an fdatasync lasts 0.2–1 ms on the virtual disks we
// measure, so on two processors every journal sync left one of them idle
// for most of its duration (a fifth of a core at 64 calls in flight,
// measured as iowait). Submitted through io_uring, the flush runs in a
// kernel worker and the goroutine waits on an eventfd in the network
// poller, without a processor. Where io_uring is unavailable (an old
// kernel, a container whose seccomp profile refuses it), the journal uses
// fdatasync as before.

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring's ABI (include/uapi/linux/io_uring.h).
const (
	uringOffSQRing     = 0
	uringOffSQEs       = 0x10000000
	uringOpFsync       = 3
	uringFsyncDatasync = 1
	uringRegEventfd    = 4
	uringFeatSingleMap = 1
	uringSQESize       = 64
	uringCQESize       = 16
)

// uringPoll is how often a flush waiting under load looks at the ring:
// a fraction of a flush (0.2–1 ms), a few microseconds of processor each.
const uringPoll = 50 * time.Microsecond

// uringParams is struct io_uring_params.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

// uringSyncer flushes files through an io_uring of its own: one flush at
// a time.
type uringSyncer struct {
	mu    sync.Mutex
	fd    int
	ring  []byte // the submission and completion rings (one mapping)
	sqes  []byte
	ev    *os.File // the eventfd the ring signals completions on
	p     uringParams
	evBuf [8]byte
	tag   uint64 // the last entry's user data
}

// newUringSyncer sets up a small io_uring, or fails where the kernel (or
// a seccomp profile) refuses it.
func newUringSyncer() (*uringSyncer, error) {
	var p uringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	u := &uringSyncer{fd: int(fd), p: p}
	fail := func(err error) (*uringSyncer, error) {
		u.close()
		return nil, err
	}
	if p.features&uringFeatSingleMap == 0 {
		return fail(errors.New("io_uring: no single mapping of the rings (kernel older than 5.4)"))
	}
	size := max(int(p.sqOff.array)+int(p.sqEntries)*4, int(p.cqOff.cqes)+int(p.cqEntries)*uringCQESize)
	var err error
	if u.ring, err = unix.Mmap(u.fd, uringOffSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(fmt.Errorf("io_uring: map rings: %w", err))
	}
	if u.sqes, err = unix.Mmap(u.fd, uringOffSQEs, int(p.sqEntries)*uringSQESize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(fmt.Errorf("io_uring: map entries: %w", err))
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fail(fmt.Errorf("io_uring: eventfd: %w", err))
	}
	u.ev = os.NewFile(uintptr(efd), "io_uring-eventfd") // non-blocking: waits in the poller
	efd32 := int32(efd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(u.fd), uringRegEventfd, uintptr(unsafe.Pointer(&efd32)), 1, 0, 0); errno != 0 {
		return fail(fmt.Errorf("io_uring: register eventfd: %w", errno))
	}
	return u, nil
}

func (u *uringSyncer) u32(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&u.ring[off])) }

// fdatasync flushes f's data (and size) to the disk and returns when the
// disk has it, waiting without a processor.
func (u *uringSyncer) fdatasync(f *os.File) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fd uintptr
	if err := sc.Control(func(d uintptr) { fd = d }); err != nil {
		return err
	}
	// One entry per call, told apart by its tag: a call that failed
	// half-way may leave its entry to be submitted, or its completion to
	// be reaped, by the next.
	u.tag++
	tag := u.tag
	tail := atomic.LoadUint32(u.u32(u.p.sqOff.tail))
	idx := tail & atomic.LoadUint32(u.u32(u.p.sqOff.ringMask))
	sqe := u.sqes[idx*uringSQESize : (idx+1)*uringSQESize]
	clear(sqe)
	sqe[0] = uringOpFsync
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(fd)
	*(*uint32)(unsafe.Pointer(&sqe[28])) = uringFsyncDatasync
	*(*uint64)(unsafe.Pointer(&sqe[32])) = tag
	*(*uint32)(unsafe.Pointer(&u.ring[u.p.sqOff.array+idx*4])) = idx
	atomic.StoreUint32(u.u32(u.p.sqOff.tail), tail+1)
	for {
		pending := atomic.LoadUint32(u.u32(u.p.sqOff.tail)) - atomic.LoadUint32(u.u32(u.p.sqOff.head))
		if pending == 0 {
			break
		}
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), uintptr(pending), 0, 0, 0, 0)
		if errno != 0 && errno != unix.EINTR {
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
	for {
		mask := atomic.LoadUint32(u.u32(u.p.cqOff.ringMask))
		for head := atomic.LoadUint32(u.u32(u.p.cqOff.head)); head != atomic.LoadUint32(u.u32(u.p.cqOff.tail)); head++ {
			cqe := u.ring[u.p.cqOff.cqes+(head&mask)*uringCQESize:]
			got, res := *(*uint64)(unsafe.Pointer(&cqe[0])), *(*int32)(unsafe.Pointer(&cqe[8]))
			atomic.StoreUint32(u.u32(u.p.cqOff.head), head+1)
			if got != tag {
				continue // an earlier call's, which gave up
			}
			if res < 0 {
				return fmt.Errorf("fdatasync (io_uring): %w", unix.Errno(-res))
			}
			return nil
		}
		// Parks the goroutine in the poller until the ring signals or the
		// deadline passes. An idle process wakes on the signal at once;
		// under load the poller is consulted only when a processor runs
		// out of work or every 10 ms, while an expired deadline readies
		// the goroutine at the next switch on its processor (a timer), so
		// the ring is looked at every uringPoll.
		if err := u.ev.SetReadDeadline(time.Now().Add(uringPoll)); err != nil {
			return fmt.Errorf("io_uring: wait: %w", err)
		}
		if _, err := u.ev.Read(u.evBuf[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("io_uring: wait: %w", err)
		}
	}
}

// close releases the ring.
func (u *uringSyncer) close() {
	if u.ev != nil {
		_ = u.ev.Close()
	}
	if u.sqes != nil {
		_ = unix.Munmap(u.sqes)
	}
	if u.ring != nil {
		_ = unix.Munmap(u.ring)
	}
	_ = unix.Close(u.fd)
}
