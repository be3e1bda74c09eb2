// Package wal is the store's write-ahead log: numbered entries of opaque
// bytes appended to a file and made durable before the caller answers, read
// back after a crash up to the first entry a crash tore.
//
// A log lives next to the file it protects, at that path plus Suffix; once
// the caller rotates it, the previous segment is kept at the path plus
// OldSuffix until the caller has applied its entries and drops it. Entries
// carry consecutive sequence numbers, given by Append. Each is one frame:
//
//	uint32 length of the payload, little-endian
//	uint32 CRC-32C of the log's ID (Seed) and the payload, little-endian
//	payload: uvarint sequence number, then the entry's bytes
//
// Open reads the old segment and then the current one, each up to its
// first frame that is short, fails its checksum (a torn tail, or another
// log's frames) or does not carry the next number (older frames beyond the
// end of a segment emptied since), and returns the entries the caller has
// not applied. Reset repairs the log once the caller has made them durable
// elsewhere: the current segment is emptied and the old one removed, so a
// torn tail is never appended after.
//
// A Log is not safe for concurrent use: one goroutine appends, rotates and
// drops (the store's committer).
package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Suffix names a log's current segment: the protected file's path and
// this suffix.
const Suffix = ".journal"

// OldSuffix names a log's previous segment: the protected file's path and
// this suffix. It holds the entries appended before the last Rotate until
// DropOld.
const OldSuffix = ".journal.old"

// Entry is one entry of a log.
type Entry struct {
	// Seq is the entry's sequence number: the previous entry's plus one.
	Seq uint64
	// Data is the entry's bytes, as appended.
	Data []byte
}

// Options configures Open.
type Options struct {
	// ID identifies the log: frames written with another ID do not read
	// (a log found next to another file than its own replays nothing).
	ID []byte
	// Applied is the sequence number of the last entry the caller has
	// applied: Open returns the entries after it.
	Applied uint64
	// FileMode is the segments' permissions when they are created.
	FileMode os.FileMode
}

// Log is an open write-ahead log.
type Log struct {
	f             *os.File
	path, oldPath string
	mode          os.FileMode
	// oldLast is the last sequence number in the old segment, 0 when
	// there is none.
	oldLast uint64
	off     int64  // where the next frame goes
	seq     uint64 // the last entry's sequence number (appended or applied)
	buf     []byte // the frame being written, reused
	seed    uint32
}

// Open opens the log of the file at path, creating it if need be, and
// returns it with the intact entries after opts.Applied, in order, whose
// Data share no memory with the log. Call Reset once they are applied,
// before the first Append.
func Open(path string, opts Options) (*Log, []Entry, error) {
	l := &Log{path: path + Suffix, oldPath: path + OldSuffix, mode: opts.FileMode, seq: opts.Applied, seed: Seed(opts.ID)}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, opts.FileMode)
	if err != nil {
		return nil, nil, fmt.Errorf("wal: open: %w", err)
	}
	l.f = f
	old, err := os.ReadFile(l.oldPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = f.Close()
		return nil, nil, fmt.Errorf("wal: %w", err)
	}
	cur, err := os.ReadFile(l.path)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("wal: %w", err)
	}
	var entries []Entry
	next := opts.Applied + 1
	for _, segment := range [][]byte{old, cur} { // each ends at its first torn frame
		for len(segment) > 0 {
			e, n, err := readFrame(segment, l.seed)
			if err != nil || e.Seq > next {
				break
			}
			segment = segment[n:]
			if e.Seq == next {
				entries = append(entries, e)
				next++
			}
		}
	}
	return l, entries, nil
}

// Reset empties the log, once the caller has made every entry up to last
// durable elsewhere; the next Append is last+1. The directory is synced,
// so that the empty segment survives a power cut.
func (l *Log) Reset(last uint64) error {
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := os.Remove(l.oldPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("wal: %w", err)
	}
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	l.off, l.seq, l.oldLast = 0, last, 0
	return nil
}

// Append writes data as the next entry, makes it durable and returns its
// sequence number. On an error the log is as before (the next entry
// overwrites what this one left).
func (l *Log) Append(data []byte) (uint64, error) {
	l.buf = appendFrame(l.buf[:0], l.seed, l.seq+1, data)
	if _, err := l.f.WriteAt(l.buf, l.off); err != nil {
		return 0, err
	}
	if err := fdatasync(l.f); err != nil {
		return 0, err
	}
	l.off += int64(len(l.buf))
	l.seq++
	if cap(l.buf) > 4<<20 {
		l.buf = nil // an outsized entry's buffer is not kept
	}
	return l.seq, nil
}

// Seq returns the last entry's sequence number.
func (l *Log) Seq() uint64 { return l.seq }

// Size returns the current segment's size in bytes.
func (l *Log) Size() int64 { return l.off }

// OldLast returns the last sequence number in the old segment, 0 when
// there is none.
func (l *Log) OldLast() uint64 { return l.oldLast }

// Rotate makes the current segment the old one and starts an empty
// current segment; the old segment must be gone (DropOld). The directory
// is synced before any entry goes to the new segment, so that a power cut
// cannot lose the renaming under entries already answered.
func (l *Log) Rotate() error {
	if err := os.Rename(l.path, l.oldPath); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, l.mode)
	if err != nil {
		// The entries are all in the old segment, which Open reads; the
		// current one's file is made again by the next Rotate or Open.
		return err
	}
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		_ = f.Close()
		return err
	}
	_ = l.f.Close() // synced: every entry in it was flushed by Append
	l.f, l.off, l.oldLast = f, 0, l.seq
	return nil
}

// DropOld removes the old segment, once the caller has applied every
// entry of it. A power cut may bring it back: its entries are applied
// ones, which Open skips.
func (l *Log) DropOld() error {
	if err := os.Remove(l.oldPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l.oldLast = 0
	return nil
}

// Close closes the log's file, keeping its segments.
func (l *Log) Close() error { return l.f.Close() }

// Remove removes both segments of a closed log whose entries the caller
// has all applied.
func (l *Log) Remove() error {
	return errors.Join(os.Remove(l.path), l.DropOld())
}

// syncDir makes the entries of directory dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// A filesystem that cannot sync a directory (EINVAL, ENOTSUP: FUSE
	// filesystems among them) is taken at its word.
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}
