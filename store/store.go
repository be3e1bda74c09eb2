package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/setpointhq/setpoint/target"
)

// Errors returned by a Store. Callers test them with errors.Is.
var (
	// ErrNotFound: no record exists for the key.
	ErrNotFound = errors.New("store: target not found")
	// ErrCorrupt: the target's stored record could not be decoded; other
	// targets are unaffected.
	ErrCorrupt = errors.New("store: record cannot be decoded")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store: closed")
	// ErrInvalid: an argument cannot be used: a key too long to store, a
	// malformed page token, a Query with Namespace but no Cluster, a
	// negative page size.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrUnavailable: the store's backend did not answer in time or has
	// no quorum (an etcd cluster electing a leader, or out of reach); a
	// write may or may not have been made. Trying again later is right.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrSchemaVersion: the file's layout is not one this binary can use
	// (written by a newer version, or not a Setpoint store at all).
	ErrSchemaVersion = errors.New("store: unsupported schema version")
)

// CorruptError is the error for a record that cannot be decoded. It
// matches ErrCorrupt with errors.Is.
type CorruptError struct {
	// Key identifies the record.
	Key target.Key
	// Err is what the decoder reported.
	Err error
}

// Error describes the corrupt record.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrCorrupt, e.Key, e.Err)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the decoder's error.
func (e *CorruptError) Unwrap() error { return e.Err }

// Defaults and bounds every backend applies.
const (
	// DefaultMaxEvents is the default bound of target.Record.Events.
	DefaultMaxEvents = 64
	// DefaultMaxHistory is the default bound of each list of
	// target.Record.History.
	DefaultMaxHistory = 4096
	// DefaultPageSize is the page size of a List whose Query.PageSize is 0.
	DefaultPageSize = 100
	// MaxPageSize is the largest page List returns; larger page sizes are
	// lowered to it.
	MaxPageSize = 1000
)

// Query selects records for List.
type Query struct {
	// Cluster, when set, keeps only records of that cluster.
	Cluster string
	// Namespace, when set, keeps only records of that namespace (requires
	// Cluster).
	Namespace string
	// PageSize is the maximum number of records returned; 0 means the
	// store's default.
	PageSize int
	// PageToken continues a previous List; empty starts from the first key.
	PageToken string
}

// Store keeps per-target records durably, with a change feed, a count
// and backups: every capability the server uses is part of the interface.
// Implementations are safe for concurrent use.
type Store interface {
	// Update changes key's record as one transaction would: it passes fn
	// the stored record (a zero target.Record with only Key set when there
	// is none) and stores what fn leaves, under key whatever fn leaves in
	// rec.Key, if the stored record is still the one fn was given;
	// otherwise it runs fn again on the new record. So concurrent updates
	// of one key serialize and none is lost. It returns the stored record
	// once the change is durable. fn runs in the caller's goroutine, may
	// run more than once, must depend only on its argument and must not
	// keep it (rec is its own copy). If fn returns an error, nothing is
	// stored and that error is returned; a record fn leaves that cannot be
	// stored (a string that is not UTF-8, a time a timestamp cannot hold)
	// is an error too. When ctx ends first, Update returns ctx.Err() and
	// the change may or may not be stored (fn may have run); stored later,
	// it is stored like any other, with its changes, and an Update of the
	// same key that read the record before it runs its fn again.
	Update(ctx context.Context, key target.Key, fn func(rec *target.Record) error) (target.Record, error)
	// Decide is Update for a decision: fn replaces the record's last
	// decision with a new one (as target.Decide does) and reads of the
	// previous one only ID and At, so a store may leave the rest of it,
	// the largest part of a record, undecoded (fn may find it zero). If fn
	// returns nil but keeps the previous last decision, Decide stores
	// nothing and returns an error.
	Decide(ctx context.Context, key target.Key, fn func(rec *target.Record) error) (target.Record, error)
	// Get returns the record for key, ErrNotFound or ErrCorrupt.
	Get(ctx context.Context, key target.Key) (target.Record, error)
	// List returns records in key order and the token of the next page
	// (empty after the last page). Undecodable records are left out of the
	// page and reported, with the page, by an error joining one
	// *CorruptError per record left out; any other error comes without
	// records.
	List(ctx context.Context, q Query) (records []target.Record, nextPageToken string, err error)
	// Delete removes the record for key; ErrNotFound when there is none.
	Delete(ctx context.Context, key target.Key) error
	// Expire removes the records last seen before cutoff and returns how
	// many were removed.
	Expire(ctx context.Context, cutoff time.Time) (int, error)
	// Healthy reports whether the store can serve now: nil when it can,
	// ErrClosed after Close, the backend's error when its data cannot be
	// reached. The server answers its health checks with it.
	Healthy(ctx context.Context) error
	// Decisions returns one page of key's decision log, oldest first, and
	// the next page's token (empty after the last page); an unknown target
	// has an empty log.
	Decisions(ctx context.Context, key target.Key, q DecisionQuery) ([]target.LoggedDecision, string, error)
	// Close releases the store; later calls return ErrClosed.
	Close() error
	// Expect announces n more writes (Update, Decide, Delete) on their way
	// to the store: calls the caller has received and is still reading,
	// checking or converting. n < 0 takes back that many, never below
	// none; the caller takes each write back once, just before it calls
	// the store with it (or when it gives the write up). A store that
	// shares one commit among concurrent writes may hold a commit open for
	// announced writes, never longer than its batch delay, so a write
	// announced and never made delays others by at most that; a store may
	// ignore it.
	Expect(n int)

	// Feed is the change feed: every decision, observation and deletion,
	// numbered by a revision.
	Feed
	// Count returns the number of records and, read at the same moment,
	// the latest revision of the feed: the count is exact as of that
	// revision, and the feed's changes after it (Change.Created,
	// ChangeDeleted) keep it current.
	Count(ctx context.Context) (n int, rev uint64, err error)
	// Backup writes a consistent snapshot of the whole store to w while
	// the store keeps serving. It calls size with the snapshot's length in
	// bytes before the first write, and returns the number of bytes
	// written. The snapshot is a bbolt store file, whatever the backend:
	// boltstore.Open accepts it as it is.
	Backup(ctx context.Context, size func(int64) error, w io.Writer) (int64, error)
}
