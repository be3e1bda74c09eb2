package boltstore

// What the store writes to its write-ahead log (package wal) and how it
// applies it. bbolt's meta bucket holds the sequence number of the last
// entry applied (schema.MetaJournalSeq), written in the same transaction as
// the entry's writes, and the log's ID (schema.MetaJournalID). An entry's
// bytes are
//
//	uvarint n, then n writes, each
//	  bytes record key, bytes value, bytes old index key (empty: none),
//	  bytes new index key, uvarint m, m × (uvarint revision, bytes change),
//	  bytes decision-log entry (empty: none), and when there is one
//	  varint seconds and uvarint nanoseconds of its time (Unix, UTC)
//
// where bytes is a uvarint length and the bytes.

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/store/wal"
)

// JournalSuffix names a store's journal: the store file's path and this
// suffix. The journal exists while the store is open (and after a crash,
// until the next Open replays it).
const JournalSuffix = wal.Suffix

// OldJournalSuffix names the journal's previous segment: the store file's
// path and this suffix. It holds the frames written before the journal
// last grew past its limit, until the checkpointer has applied them all
// (and after a crash, until the next Open replays it).
const OldJournalSuffix = wal.OldSuffix

// DefaultJournalSegmentBytes is Options.JournalSegmentBytes's default: the
// journal's size past which the committer starts a new segment, keeping
// the frames written so far in the old one until the checkpointer has
// applied them. It is a few seconds of writes at full load, replayed in
// well under a second. Writes wait for the checkpointer only when the old
// segment is still needed at the next rotation.
const DefaultJournalSegmentBytes = 32 << 20

// maxPendingWrites bounds the journaled writes not yet applied to bbolt:
// beyond it the committer waits for the checkpointer before answering
// more, so a slow disk holds callers back instead of growing memory.
const maxPendingWrites = 16384

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

// journaledBatch is one journal entry's writes, waiting for the
// checkpointer.
type journaledBatch struct {
	seq    uint64
	writes []journalWrite
	at     time.Time // when it was journaled
}

// appendWrites appends the journal entry of writes to dst.
func appendWrites(dst []byte, writes []journalWrite) []byte {
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
	return dst
}

// errEntry is the error of a journal entry whose bytes are not writes.
var errEntry = errors.New("store: journal entry is not a list of writes")

// readWrites decodes a journal entry's writes; errEntry when b is not
// one. The writes share memory with b.
func readWrites(b []byte) ([]journalWrite, error) {
	r := frameReader{b: b}
	count := r.varint()
	if count > uint64(len(b)) { // each write takes bytes: garbage
		return nil, errEntry
	}
	writes := make([]journalWrite, 0, count)
	for range count {
		var w journalWrite
		w.rk, w.val, w.oldIndex, w.newIndex = r.bytes(), r.bytes(), r.bytes(), r.bytes()
		if len(w.oldIndex) == 0 {
			w.oldIndex = nil
		}
		m := r.varint()
		if m > uint64(len(b)) {
			return nil, errEntry
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
			return nil, errEntry
		}
		writes = append(writes, w)
	}
	if r.err || len(r.b) != 0 {
		return nil, errEntry
	}
	return writes, nil
}

// frameReader reads a journal entry; err records a short or malformed
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

// openJournal replays the journal of the store at path into db (every
// intact entry after the last one applied, in one transaction) and returns
// it emptied, ready for the next entry.
func (b *Store) openJournal(path string) (*wal.Log, error) {
	var (
		applied uint64
		id      []byte
	)
	if err := b.db.View(func(tx *bolt.Tx) error {
		applied, id = schema.JournalSeq(tx), bytes.Clone(tx.Bucket(schema.Meta).Get(schema.MetaJournalID))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: journal: %w", err)
	}
	if id == nil {
		id = make([]byte, 16)
		_, _ = rand.Read(id) // never fails (crypto/rand)
		if err := b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(schema.Meta).Put(schema.MetaJournalID, id) }); err != nil {
			return nil, fmt.Errorf("store: journal: %w", err)
		}
	}
	log, entries, err := wal.Open(path, wal.Options{ID: id, Applied: applied, FileMode: b.opts.FileMode})
	if err != nil {
		return nil, fmt.Errorf("store: journal: %w", err)
	}
	var batches []*journaledBatch
	for _, e := range entries {
		writes, err := readWrites(e.Data)
		if err != nil {
			break // as a torn frame: nothing after it was answered
		}
		batches = append(batches, &journaledBatch{seq: e.Seq, writes: writes})
	}
	fail := func(err error) (*wal.Log, error) {
		_ = log.Close()
		return nil, fmt.Errorf("store: journal %s: %w", path+JournalSuffix, err)
	}
	if len(batches) > 0 {
		if err := b.db.Update(func(tx *bolt.Tx) error { return b.applyBatches(tx, batches) }); err != nil {
			return fail(fmt.Errorf("replay: %w", err))
		}
		applied = batches[len(batches)-1].seq
	}
	// Emptied only once bbolt has the entries durably.
	if err := log.Reset(applied); err != nil {
		return fail(err)
	}
	return log, nil
}

// put writes w in tx, whatever tx held for its key: the committer has
// checked the record when it journaled w. Its error leaves tx unusable.
func (b *Store) put(tx *bolt.Tx, w *journalWrite) error {
	records, index := tx.Bucket(schema.Records), tx.Bucket(schema.LastSeen)
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
		changes := tx.Bucket(schema.Changes)
		changes.FillPercent = changesFillPercent
		for i, rev := range w.revs {
			if err := changes.Put(schema.RevisionKey(rev), w.changes[i]); err != nil {
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
func (b *Store) applyBatches(tx *bolt.Tx, batches []*journaledBatch) error {
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
	return schema.PutJournalSeq(tx, batches[len(batches)-1].seq)
}
