package store

// This file is the journal: the write-ahead log that makes an Update
// durable before bbolt has it.
//
// The committer appends each batch of Updates to the journal as one frame
// and answers the batch after one fdatasync of the journal; a second
// goroutine, the checkpointer, applies the journaled batches to bbolt in
// larger transactions of its own (bbolt's commit, with its two fsyncs,
// runs alongside the next batches instead of in front of them). The file
// next to the store's, <path>.journal, holds the frames not yet known to
// be applied. Once it grows past Options.JournalSegmentBytes it becomes
// <path>.journal.old, removed when the checkpointer has applied it, while
// a new <path>.journal takes the next frames (so the committer does not
// wait for a checkpoint to empty the journal). bbolt's meta bucket holds
// the sequence number of the last frame applied (keyMetaJournalSeq),
// written in the same transaction as the frame's writes. Open replays the frames after it, so a write
// answered before a crash or a power cut is in bbolt after the next Open.
//
// A frame is
//
//	uint32 length of the payload, little-endian
//	uint32 CRC-32C of the store's journal ID and the payload, little-endian
//	payload: uvarint seq, uvarint n, then n writes, each
//	  bytes record key, bytes value, bytes old index key (empty: none),
//	  bytes new index key, uvarint m, m × (uvarint revision, bytes change),
//	  bytes decision-log entry (empty: none), and when there is one
//	  varint seconds and uvarint nanoseconds of its time (Unix, UTC)
//
// where bytes is a uvarint length and the bytes. The journal ID is random
// bytes the bbolt file keeps (keyMetaJournalID): a journal replays only
// onto the file it belongs to (or a backup of it), never onto another
// store's file put in its place. Frames carry consecutive
// sequence numbers; replay stops at the first frame that is short, fails
// its checksum, or does not carry the next number (the tail a crash left
// half written, or older frames beyond the end of a journal emptied since).

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
)

// JournalSuffix names a store's journal: the store file's path and this
// suffix. The journal exists while the store is open (and after a crash,
// until the next Open replays it).
const JournalSuffix = ".journal"

// OldJournalSuffix names the journal's previous segment: the store file's
// path and this suffix. It holds the frames written before the journal
// last grew past its limit, until the checkpointer has applied them all
// (and after a crash, until the next Open replays it).
const OldJournalSuffix = ".journal.old"

// DefaultJournalSegmentBytes is Options.JournalSegmentBytes's default: the
// journal's size past which the committer starts a new segment, keeping
// the frames written so far in the old one until the checkpointer has
// applied them. It is a few seconds of writes at full load, replayed in
// well under a second. Writes wait for the checkpointer only when the old
// segment is still needed at the next rotation.
const DefaultJournalSegmentBytes = 32 << 20

// maxFrameBytes bounds a frame's payload on replay: a larger length is the
// garbage of a torn or stale tail, not a frame.
const maxFrameBytes = 1 << 30

// maxPendingWrites bounds the journaled writes not yet applied to bbolt:
// beyond it the committer waits for the checkpointer before answering
// more, so a slow disk holds callers back instead of growing memory.
const maxPendingWrites = 16384

// keyMetaJournalSeq is the meta key whose value is the sequence number of
// the last journal frame applied, an 8-byte big-endian integer (absent: 0).
var keyMetaJournalSeq = []byte("journal_seq")

// keyMetaJournalID is the meta key whose value is the file's journal ID,
// 16 random bytes written at the first Open that needs them.
var keyMetaJournalID = []byte("journal_id")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// journalWrite is one journaled Update: the bytes it writes to bbolt,
// whatever the record held before (the committer has checked that).
type journalWrite struct {
	rk, val            []byte
	oldIndex, newIndex []byte   // the last-seen index keys; oldIndex nil when there was none
	revs               []uint64 // the change feed's revisions, one per change
	changes            [][]byte // the encoded changes
	logged             []byte   // the decision log's entry, or nil
	at                 time.Time
}

// journaledBatch is one journal frame's writes, waiting for the
// checkpointer.
type journaledBatch struct {
	seq    uint64
	writes []journalWrite
	at     time.Time // when it was journaled
}

// appendFrame appends the frame of seq and writes to dst; seed is the
// CRC-32C of the journal ID.
func appendFrame(dst []byte, seed uint32, seq uint64, writes []journalWrite) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, 8)...)
	dst = protowire.AppendVarint(dst, seq)
	dst = protowire.AppendVarint(dst, uint64(len(writes)))
	for i := range writes {
		w := &writes[i]
		dst = protowire.AppendBytes(dst, w.rk)
		dst = protowire.AppendBytes(dst, w.val)
		dst = protowire.AppendBytes(dst, w.oldIndex)
		dst = protowire.AppendBytes(dst, w.newIndex)
		dst = protowire.AppendVarint(dst, uint64(len(w.revs)))
		for j, rev := range w.revs {
			dst = protowire.AppendVarint(dst, rev)
			dst = protowire.AppendBytes(dst, w.changes[j])
		}
		dst = protowire.AppendBytes(dst, w.logged)
		if len(w.logged) > 0 {
			dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(w.at.Unix()))
			dst = protowire.AppendVarint(dst, uint64(w.at.Nanosecond()))
		}
	}
	payload := dst[start+8:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Update(seed, castagnoli, payload))
	return dst
}

// errFrame is the error of bytes that are not a whole, intact frame.
var errFrame = errors.New("not a journal frame")

// readFrame decodes the frame at the start of b, written with seed, and
// returns it with its length in bytes; errFrame when b does not start with
// an intact frame of that journal. The writes share memory with b.
func readFrame(b []byte, seed uint32) (batch journaledBatch, n int, err error) {
	if len(b) < 8 {
		return batch, 0, errFrame
	}
	size := binary.LittleEndian.Uint32(b)
	if size == 0 || size > maxFrameBytes || uint64(len(b)-8) < uint64(size) {
		return batch, 0, errFrame
	}
	payload := b[8 : 8+size]
	if crc32.Update(seed, castagnoli, payload) != binary.LittleEndian.Uint32(b[4:]) {
		return batch, 0, errFrame
	}
	r := frameReader{b: payload}
	batch.seq = r.varint()
	count := r.varint()
	if count > uint64(len(payload)) { // each write takes bytes: garbage
		return batch, 0, errFrame
	}
	batch.writes = make([]journalWrite, 0, count)
	for range count {
		var w journalWrite
		w.rk, w.val, w.oldIndex, w.newIndex = r.bytes(), r.bytes(), r.bytes(), r.bytes()
		if len(w.oldIndex) == 0 {
			w.oldIndex = nil
		}
		m := r.varint()
		if m > uint64(len(payload)) {
			return batch, 0, errFrame
		}
		for range m {
			w.revs = append(w.revs, r.varint())
			w.changes = append(w.changes, r.bytes())
		}
		if w.logged = r.bytes(); len(w.logged) > 0 {
			sec := protowire.DecodeZigZag(r.varint())
			w.at = time.Unix(sec, int64(r.varint())).UTC()
		} else {
			w.logged = nil
		}
		if r.err {
			return batch, 0, errFrame
		}
		batch.writes = append(batch.writes, w)
	}
	if r.err || len(r.b) != 0 {
		return batch, 0, errFrame
	}
	return batch, 8 + int(size), nil
}

// frameReader reads a frame's payload; err records a short or malformed
// field, after which it returns zero values.
type frameReader struct {
	b   []byte
	err bool
}

func (r *frameReader) varint() uint64 {
	v, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		r.err, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *frameReader) bytes() []byte {
	v, n := protowire.ConsumeBytes(r.b)
	if n < 0 {
		r.err, r.b = true, nil
		return nil
	}
	r.b = r.b[n:]
	return v
}

// put writes w in tx, whatever tx held for its key: the committer has
// checked the record when it journaled w. Its error leaves tx unusable.
func (b *Bolt) put(tx *bolt.Tx, w *journalWrite) error {
	records, index := tx.Bucket(bucketRecords), tx.Bucket(bucketLastSeen)
	records.FillPercent = recordsFillPercent
	if string(w.oldIndex) != string(w.newIndex) { // most writes leave the record in its hour: no index write
		if w.oldIndex != nil {
			if err := index.Delete(w.oldIndex); err != nil {
				return err
			}
		}
		if err := index.Put(w.newIndex, []byte{}); err != nil {
			return err
		}
	}
	if err := records.Put(w.rk, w.val); err != nil {
		return err
	}
	if len(w.revs) > 0 {
		changes := tx.Bucket(bucketChanges)
		changes.FillPercent = changesFillPercent
		for i, rev := range w.revs {
			if err := changes.Put(revisionKey(rev), w.changes[i]); err != nil {
				return fmt.Errorf("append change: %w", err)
			}
		}
	}
	if w.logged != nil {
		if err := b.unsafeLogEncoded(tx, w.rk, w.at, w.logged); err != nil {
			return fmt.Errorf("decision log: %w", err)
		}
	}
	return nil
}

// applyBatches writes batches in tx, then drops the changes beyond
// MaxChanges and records the last batch's sequence number as applied.
func (b *Bolt) applyBatches(tx *bolt.Tx, batches []*journaledBatch) error {
	var lastRev uint64
	for _, jb := range batches {
		for i := range jb.writes {
			w := &jb.writes[i]
			if err := b.put(tx, w); err != nil {
				return fmt.Errorf("store: journal frame %d: %w", jb.seq, err)
			}
			if n := len(w.revs); n > 0 {
				lastRev = max(lastRev, w.revs[n-1])
			}
		}
	}
	if lastRev > 0 {
		if err := b.trimChangesTo(tx, lastRev); err != nil {
			return err
		}
	}
	return putJournalSeq(tx, batches[len(batches)-1].seq)
}

// journalSeq returns the sequence number of the last frame applied in tx.
func journalSeq(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(bucketMeta).Get(keyMetaJournalSeq); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func putJournalSeq(tx *bolt.Tx, seq uint64) error {
	return tx.Bucket(bucketMeta).Put(keyMetaJournalSeq, binary.BigEndian.AppendUint64(nil, seq))
}

// journal is the open journal file (committer goroutine only, after Open).
type journal struct {
	f *os.File
	// path and oldPath are the segments' names (JournalSuffix,
	// OldJournalSuffix); oldLast is the last sequence number in the old
	// segment, 0 when there is none.
	path, oldPath string
	oldLast       uint64
	off           int64  // where the next frame goes
	seq           uint64 // the last frame's sequence number (written or applied)
	buf           []byte // the frame being written, reused
	// seed is the CRC-32C of the file's journal ID, where each frame's
	// checksum starts.
	seed uint32
}

// openJournal replays the journal of the store at path into db (every
// intact frame after the last one applied, of the old segment and then the
// current one, in one transaction) and returns it emptied, ready for the
// next frame.
func (b *Bolt) openJournal(path string) (*journal, error) {
	jpath, oldPath := path+JournalSuffix, path+OldJournalSuffix
	f, err := os.OpenFile(jpath, os.O_RDWR|os.O_CREATE, b.opts.FileMode)
	if err != nil {
		return nil, fmt.Errorf("store: open journal: %w", err)
	}
	fail := func(err error) (*journal, error) {
		_ = f.Close()
		return nil, fmt.Errorf("store: journal %s: %w", jpath, err)
	}
	old, err := os.ReadFile(oldPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	data, err := os.ReadFile(jpath)
	if err != nil {
		return fail(err)
	}
	var (
		applied uint64
		id      []byte
	)
	if err := b.db.View(func(tx *bolt.Tx) error {
		applied, id = journalSeq(tx), bytes.Clone(tx.Bucket(bucketMeta).Get(keyMetaJournalID))
		return nil
	}); err != nil {
		return fail(err)
	}
	if id == nil {
		id = make([]byte, 16)
		_, _ = rand.Read(id) // never fails (crypto/rand)
		if err := b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyMetaJournalID, id) }); err != nil {
			return fail(err)
		}
	}
	seed := crc32.Checksum(id, castagnoli)
	var batches []*journaledBatch
	next := applied + 1
	for _, segment := range [][]byte{old, data} { // each ends at its first torn frame
		for len(segment) > 0 {
			jb, n, err := readFrame(segment, seed)
			if err != nil || jb.seq > next {
				break
			}
			segment = segment[n:]
			if jb.seq == next {
				batches = append(batches, &jb)
				next++
			}
		}
	}
	if len(batches) > 0 {
		if err := b.db.Update(func(tx *bolt.Tx) error { return b.applyBatches(tx, batches) }); err != nil {
			return fail(fmt.Errorf("replay: %w", err))
		}
		applied = batches[len(batches)-1].seq
	}
	// Emptied only once bbolt has the frames durably; the directory is
	// synced so that the file's creation survives a power cut.
	if err := f.Truncate(0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Remove(oldPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	if err := syncDir(filepath.Dir(jpath)); err != nil {
		return fail(err)
	}
	j := &journal{f: f, path: jpath, oldPath: oldPath, seq: applied, seed: seed}
	return j, nil
}

// append writes the frame of writes as the next one and makes it durable.
// On an error the journal is as before (the next frame overwrites what
// this one left).
func (j *journal) append(writes []journalWrite) error {
	j.buf = appendFrame(j.buf[:0], j.seed, j.seq+1, writes)
	if _, err := j.f.WriteAt(j.buf, j.off); err != nil {
		return err
	}
	if err := fdatasync(j.f); err != nil {
		return err
	}
	j.off += int64(len(j.buf))
	j.seq++
	if cap(j.buf) > 4<<20 {
		j.buf = nil // an outsized batch's buffer is not kept
	}
	return nil
}

// close closes the journal's file.
func (j *journal) close() error {
	return j.f.Close()
}

// rotate makes the current segment the old one and starts an empty
// current segment; the old segment must be gone (dropOld). The directory
// is synced before any frame goes to the new segment, so that a power cut
// cannot lose the renaming under frames already answered.
func (j *journal) rotate(mode os.FileMode) error {
	if err := os.Rename(j.path, j.oldPath); err != nil {
		return err
	}
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		// The frames are all in the old segment, which replay reads; the
		// current one's file is made again by the next rotation or Open.
		return err
	}
	if err := syncDir(filepath.Dir(j.path)); err != nil {
		_ = f.Close()
		return err
	}
	_ = j.f.Close() // synced: every frame in it was flushed before its answer
	j.f, j.off, j.oldLast = f, 0, j.seq
	return nil
}

// dropOld removes the old segment, once every frame of it is applied. A
// power cut may bring it back: its frames are applied ones, which replay
// skips.
func (j *journal) dropOld() error {
	if err := os.Remove(j.oldPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	j.oldLast = 0
	return nil
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
