package boltstore

// What the store writes to its write-ahead log (package wal) and how it
// applies it. bbolt's meta bucket holds the sequence number of the last
// entry applied (schema.MetaJournalSeq), written in the same transaction as
// the entry's writes, and the log's ID (schema.MetaJournalID). An entry is
// a setpoint.storage.v1.JournalEntry (journal.proto).

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
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

// journaledBatch is one journal entry's writes, waiting for the
// checkpointer.
type journaledBatch struct {
	seq    uint64
	writes []*pb.JournalWrite
	at     time.Time // when it was journaled
}

// appendEntry appends the journal entry of writes to dst.
func appendEntry(dst []byte, writes []*pb.JournalWrite) ([]byte, error) {
	e := pb.JournalEntry{Writes: writes}
	n := e.SizeVT()
	dst = slices.Grow(dst, n)[:len(dst)+n]
	_, err := e.MarshalToSizedBufferVT(dst[len(dst)-n:])
	return dst, err
}

// recover checks the layout of the file, replays the journal a crash
// left (every intact entry after the last one applied, written in the
// file's schema version) and migrates the file, in one transaction, then
// opens the journal emptied, ready for the next entry.
func (b *Store) recover(path string) error {
	var (
		version, applied uint64
		id               []byte
	)
	if err := b.db.Update(func(tx *bolt.Tx) (err error) {
		if version, err = schema.Init(tx); err != nil {
			return err
		}
		meta := tx.Bucket(schema.Meta)
		if id = bytes.Clone(meta.Get(schema.MetaJournalID)); id == nil {
			id = make([]byte, 16)
			_, _ = rand.Read(id) // never fails (crypto/rand)
			err = meta.Put(schema.MetaJournalID, id)
		}
		applied = schema.JournalSeq(tx)
		return err
	}); err != nil {
		return err
	}
	log, entries, err := wal.Open(path, wal.Options{ID: id, Applied: applied, FileMode: b.opts.FileMode})
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	b.journal = log
	var batches []*journaledBatch
	for _, e := range entries {
		entry, err := schema.ReadJournalEntry(version, e.Data)
		if err != nil {
			break // as a torn frame: nothing after it was answered
		}
		batches = append(batches, &journaledBatch{seq: e.Seq, writes: entry.Writes})
	}
	if len(batches) > 0 || version != schema.Version {
		if err := b.db.Update(func(tx *bolt.Tx) error {
			if len(batches) > 0 {
				if err := b.applyBatches(tx, batches); err != nil {
					return fmt.Errorf("replay the journal %s: %w", path+JournalSuffix, err)
				}
				applied = batches[len(batches)-1].seq
			}
			return schema.Migrate(tx, version)
		}); err != nil {
			return err
		}
	}
	// Emptied only once bbolt has the entries durably.
	if err := log.Reset(applied); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// put writes w in tx, whatever tx held for its key: the committer has
// checked the record when it journaled w. Its error leaves tx unusable.
func (b *Store) put(tx *bolt.Tx, w *pb.JournalWrite) error {
	records, index := tx.Bucket(schema.Records), tx.Bucket(schema.LastSeen)
	records.FillPercent = recordsFillPercent
	if !bytes.Equal(w.OldIndexKey, w.NewIndexKey) { // most writes leave the record in its hour: no index write
		if len(w.OldIndexKey) > 0 {
			if err := index.Delete(w.OldIndexKey); err != nil {
				return err
			}
		}
		if err := index.Put(w.NewIndexKey, []byte{}); err != nil {
			return err
		}
	}
	if err := records.Put(w.RecordKey, w.Value); err != nil {
		return err
	}
	changes := tx.Bucket(schema.Changes)
	changes.FillPercent = changesFillPercent
	for i, c := range w.Changes {
		if err := changes.Put(schema.RevisionKey(w.FirstRevision+uint64(i)), c); err != nil {
			return fmt.Errorf("append change: %w", err)
		}
	}
	if w.LoggedAt != nil {
		if err := b.unsafeLogEncoded(tx, w.RecordKey, w.LoggedAt.AsTime(), w.Logged); err != nil {
			return fmt.Errorf("decision log: %w", err)
		}
	}
	return nil
}

// journalEntry is the journal's form of w, the revisions of its changes
// numbered.
func (w *preparedUpdate) journalEntry() *pb.JournalWrite {
	e := &pb.JournalWrite{RecordKey: w.rk, Value: w.val, OldIndexKey: w.oldIndex, NewIndexKey: w.newIndex, Changes: w.encoded, Logged: w.logged}
	if len(w.changes) > 0 {
		e.FirstRevision = w.changes[0].Revision
	}
	if w.logged != nil {
		e.LoggedAt = timestamppb.New(w.rec.Last.At)
	}
	return e
}

// applyBatches writes batches in tx, then drops the changes beyond
// MaxChanges and records the last batch's sequence number as applied.
func (b *Store) applyBatches(tx *bolt.Tx, batches []*journaledBatch) error {
	var lastRev uint64
	for _, jb := range batches {
		for _, w := range jb.writes {
			if err := b.put(tx, w); err != nil {
				return fmt.Errorf("store: journal frame %d: %w", jb.seq, err)
			}
			if n := len(w.Changes); n > 0 {
				lastRev = max(lastRev, w.FirstRevision+uint64(n-1))
			}
		}
	}
	if lastRev > 0 {
		if err := b.trimChanges(tx, lastRev); err != nil {
			return err
		}
	}
	return schema.PutJournalSeq(tx, batches[len(batches)-1].seq)
}
