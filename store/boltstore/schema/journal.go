package schema

import (
	"encoding/binary"
	"errors"
	"time"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ErrJournalEntry is the error of a journal entry whose bytes are not a
// list of writes.
var ErrJournalEntry = errors.New("store: journal entry is not a list of writes")

// ReadJournalEntry decodes a journal entry (one wal frame's data) that a
// store of schema version wrote: Open replays the journal a crash left in
// the file's version, before it migrates the file. Its bytes fields share
// memory with b only in the format of versions 1 to 4.
func ReadJournalEntry(version uint64, b []byte) (*pb.JournalEntry, error) {
	if version < 5 {
		return readJournalV4(b)
	}
	e := &pb.JournalEntry{}
	if err := e.UnmarshalVT(b); err != nil {
		return nil, errors.Join(ErrJournalEntry, err)
	}
	return e, nil
}

// readJournalV4 decodes a journal entry of versions 1 to 4: migration
// only, for a journal that a crash of such a store left (nothing writes
// this format any more). Its bytes are
//
//	uvarint n, then n writes, each
//	  bytes record key, bytes value, bytes old index key (empty: none),
//	  bytes new index key, uvarint m, m × (uvarint revision, bytes change),
//	  bytes decision-log entry (empty: none), and when there is one
//	  zig-zag varint seconds and uvarint nanoseconds of its time (Unix)
//
// where bytes is a uvarint length and the bytes. A write's revisions are
// consecutive (its committer numbered them so).
func readJournalV4(b []byte) (*pb.JournalEntry, error) {
	r := v4Reader{b: b}
	count := r.uvarint()
	if count > uint64(len(b)) { // each write takes bytes: garbage
		return nil, ErrJournalEntry
	}
	e := &pb.JournalEntry{Writes: make([]*pb.JournalWrite, 0, count)}
	for range count {
		w := &pb.JournalWrite{RecordKey: r.bytes(), Value: r.bytes(), OldIndexKey: r.bytes(), NewIndexKey: r.bytes()}
		m := r.uvarint()
		if m > uint64(len(b)) {
			return nil, ErrJournalEntry
		}
		for i := range m {
			if rev := r.uvarint(); i == 0 {
				w.FirstRevision = rev
			} else if rev != w.FirstRevision+i {
				return nil, ErrJournalEntry
			}
			w.Changes = append(w.Changes, r.bytes())
		}
		if w.Logged = r.bytes(); len(w.Logged) > 0 {
			sec, n := binary.Varint(r.b) // zig-zag, as protowire wrote it
			if n <= 0 {
				return nil, ErrJournalEntry
			}
			r.b = r.b[n:]
			w.LoggedAt = timestamppb.New(time.Unix(sec, int64(r.uvarint())))
		}
		if r.err {
			return nil, ErrJournalEntry
		}
		e.Writes = append(e.Writes, w)
	}
	if r.err || len(r.b) != 0 {
		return nil, ErrJournalEntry
	}
	return e, nil
}

// v4Reader reads the fields of a version 4 journal entry; err records a
// short or malformed one, after which it returns zero values.
type v4Reader struct {
	b   []byte
	err bool
}

func (r *v4Reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns the next length-prefixed bytes; nil when they are empty.
func (r *v4Reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err, r.b = true, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	if n == 0 {
		return nil
	}
	return v
}
