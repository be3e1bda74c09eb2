// Package etcdstore provides a store.Store kept in etcd, so that several
// setpoint-server processes share one durable history.
//
// Under a prefix P (Options.Prefix) it keeps:
//
//	P r/<key>      one record per target, in the bbolt store's codec
//	P seq          the revision of the latest change (8 bytes, big-endian)
//	P c/<rev>      one change of the feed, rev as 16 hex digits
//
// An Update reads the record (and, when it will record changes, the
// sequence key), runs the caller's function, and commits with one etcd
// transaction that compares the mod revisions it read: if another writer
// got there first the transaction fails and the function runs again on
// what that writer stored. Two servers deciding one target therefore
// serialize and neither decision is lost. Writes that record changes also
// compare the sequence key, so the feed's revisions are dense (1, 2, 3…)
// exactly as the bbolt store numbers them; writes that record no change
// (a target's LastSeen) compare only their record.
//
// The feed is kept as keys, not as etcd's own history, so etcd's
// compaction never removes a change the store still promises: the newest
// Options.MaxChanges are kept and older ones are answered with
// store.ErrOutOfRange, as the bbolt store answers.
//
// # Size budget
//
// etcd refuses requests larger than its --max-request-bytes (1.5 MiB by
// default). A write carries one record and at most a few changes; the
// store refuses, with store.ErrInvalid and before sending, a record whose
// encoded form is larger than MaxRecordBytes (1 MiB), leaving half a MiB
// for the key, the changes and the transaction's framing. Keys are bounded
// as the bbolt store bounds them.
package etcdstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// MaxRecordBytes is the largest encoded record the store sends to etcd.
const MaxRecordBytes = 1 << 20

// DefaultPrefix is the key prefix of Options.Prefix's zero value.
const DefaultPrefix = "/setpoint/"

// Options configure a Store. The zero value selects every default.
type Options struct {
	// Prefix is put before every key the store writes; "" means
	// DefaultPrefix. Stores with different prefixes share nothing.
	Prefix string
	// Limits bound each record as store.Options does for Bolt.
	store.Limits
	// DecisionRetention is how long each decision stays in its target's
	// decision log; 0 means store.DefaultDecisionRetention, negative keeps
	// no log.
	DecisionRetention time.Duration
	// MaxChanges is how many changes the feed keeps; 0 means
	// store.DefaultMaxChanges.
	MaxChanges int
	// Now stamps deletions in the change feed; time.Now when nil.
	Now func() time.Time
	// Observe, when set, is told how long each etcd request took and
	// whether a transaction lost a race (a conflict, then retried).
	Observe func(op string, d time.Duration, conflict bool)
}

// Store is a store.Store kept in etcd. Create it with New; it is safe for
// concurrent use.
type Store struct {
	cli    *clientv3.Client
	opts   Options
	prefix string

	cancel context.CancelFunc
	done   chan struct{}

	// feedMu serializes this process's updates: most move the feed
	// sequence, and would only conflict with each other in etcd.
	feedMu sync.Mutex

	mu        sync.Mutex
	cond      *sync.Cond
	delivered int64 // etcd revision the feed watcher has delivered up to
	closed    bool
	followers map[*int]func([]store.Change)
	watchErr  error
}

var _ store.Store = (*Store)(nil)

// New returns a Store on cli, which the Store does not close. It reads the
// current etcd revision and follows the change feed from there.
func New(ctx context.Context, cli *clientv3.Client, opts Options) (*Store, error) {
	if opts.MaxChanges < 0 || opts.MaxEvents < 0 || opts.MaxHistory < 0 {
		return nil, fmt.Errorf("%w: negative option", store.ErrInvalid)
	}
	opts.Prefix = cmp.Or(opts.Prefix, DefaultPrefix)
	opts.MaxChanges = cmp.Or(opts.MaxChanges, store.DefaultMaxChanges)
	opts.DecisionRetention = cmp.Or(opts.DecisionRetention, store.DefaultDecisionRetention)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{cli: cli, opts: opts, prefix: opts.Prefix, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	resp, err := cli.Get(ctx, s.seqKey())
	if err != nil {
		return nil, fmt.Errorf("etcdstore: %w", err)
	}
	s.delivered = resp.Header.Revision
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.watch(wctx, resp.Header.Revision+1)
	return s, nil
}

func (s *Store) seqKey() string { return s.prefix + "seq" }

func (s *Store) recKey(kb []byte) string { return s.prefix + "r/" + string(kb) }

func (s *Store) decisionKey(kb []byte, at time.Time) string {
	return s.prefix + "d/" + string(store.DecisionKey(kb, at))
}

func (s *Store) changeKey(rev uint64) string { return fmt.Sprintf("%sc/%016x", s.prefix, rev) }

// observe reports one etcd request to Options.Observe.
func (s *Store) observe(op string, start time.Time, conflict bool) {
	if s.opts.Observe != nil {
		s.opts.Observe(op, time.Since(start), conflict)
	}
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops following the feed; later calls return store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.cancel()
	<-s.done
	return nil
}

// Healthy reports whether etcd answers a linearizable read.
func (s *Store) Healthy(ctx context.Context) error {
	_, err := s.cli.Get(ctx, s.seqKey(), clientv3.WithCountOnly())
	return err
}

// readSeq returns the latest change revision and the sequence key's mod
// revision from a Get of it.
func readSeq(r *clientv3.GetResponse) (seq uint64, mod int64) {
	if len(r.Kvs) == 0 {
		return 0, 0
	}
	if len(r.Kvs[0].Value) == 8 {
		seq = binary.BigEndian.Uint64(r.Kvs[0].Value)
	}
	return seq, r.Kvs[0].ModRevision
}

// feedOps numbers cs after seq and returns the operations that store them,
// move the sequence key, and drop changes beyond MaxChanges.
func (s *Store) feedOps(cs []store.Change, seq uint64) ([]clientv3.Op, error) {
	var ops []clientv3.Op
	for i := range cs {
		seq++
		cs[i].Revision = seq
		v, err := store.EncodeChange(&cs[i])
		if err != nil {
			return nil, err
		}
		ops = append(ops, clientv3.OpPut(s.changeKey(seq), string(v)))
	}
	ops = append(ops, clientv3.OpPut(s.seqKey(), string(binary.BigEndian.AppendUint64(nil, seq))))
	if seq > uint64(s.opts.MaxChanges) {
		cutoff := seq - uint64(s.opts.MaxChanges) // keep revisions after cutoff
		ops = append(ops, clientv3.OpDelete(s.changeKey(0), clientv3.WithRange(s.changeKey(cutoff+1))))
	}
	return ops, nil
}

// Update implements store.Store: get, run fn, commit if neither the
// record nor (when changes are recorded) the feed moved; else again.
func (s *Store) Update(ctx context.Context, key target.Key, fn func(rec *target.Record) error) (target.Record, error) {
	if s.isClosed() {
		return target.Record{}, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return target.Record{}, err
	}
	kb, err := store.KeyBytes(key)
	if err != nil {
		return target.Record{}, err
	}
	rk := s.recKey(kb)
	// Holding feedMu, this server's own writes never conflict with each
	// other; only other servers' writes make a transaction fail.
	s.feedMu.Lock()
	defer s.feedMu.Unlock()
	for {
		start := time.Now()
		got, err := s.cli.Txn(ctx).Then(clientv3.OpGet(rk), clientv3.OpGet(s.seqKey())).Commit()
		s.observe("read", start, false)
		if err != nil {
			return target.Record{}, s.ctxErr(ctx, err)
		}
		recResp, seqResp := got.Responses[0].GetResponseRange(), got.Responses[1].GetResponseRange()
		rec, modRev := target.Record{Key: key}, int64(0)
		if len(recResp.Kvs) > 0 {
			modRev = recResp.Kvs[0].ModRevision
			if rec, err = store.DecodeRecord(key, recResp.Kvs[0].Value); err != nil {
				return target.Record{}, err
			}
		}
		changes, err := store.ApplyUpdate(key, &rec, modRev != 0, s.opts.Limits, fn)
		if err != nil {
			return target.Record{}, err
		}
		val, err := store.EncodeRecord(&rec)
		if err != nil {
			return target.Record{}, err
		}
		if len(val) > MaxRecordBytes {
			return target.Record{}, fmt.Errorf("%w: record of %s is %d bytes encoded, more than %d", store.ErrInvalid, key, len(val), MaxRecordBytes)
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(rk), "=", modRev)}
		ops := []clientv3.Op{clientv3.OpPut(rk, string(val))}
		if len(changes) > 0 {
			seq, seqMod := readSeq((*clientv3.GetResponse)(seqResp))
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.seqKey()), "=", seqMod))
			more, err := s.feedOps(changes, seq)
			if err != nil {
				return target.Record{}, err
			}
			ops = append(ops, more...)
			if changes[0].Kind == store.ChangeDecision && s.opts.DecisionRetention >= 0 {
				logged, err := store.EncodeLoggedDecision(rec.Last)
				if err != nil {
					return target.Record{}, fmt.Errorf("etcdstore: update %s: decision log: %w", key, err)
				}
				ops = append(ops,
					clientv3.OpDelete(s.decisionKey(kb, time.Time{}), clientv3.WithRange(s.decisionKey(kb, rec.Last.At.Add(-s.opts.DecisionRetention)))),
					clientv3.OpPut(s.decisionKey(kb, rec.Last.At), string(logged)))
			}
		}
		start = time.Now()
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			s.observe("commit", start, false)
			return target.Record{}, s.ctxErr(ctx, err)
		}
		s.observe("commit", start, !resp.Succeeded)
		if !resp.Succeeded {
			continue
		}
		if len(changes) > 0 {
			if err := s.waitDelivered(ctx, resp.Header.Revision); err != nil {
				return target.Record{}, err
			}
		}
		return rec, nil
	}
}

// ctxErr returns ctx's error when it has ended, else err wrapped.
func (s *Store) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.isClosed() {
		return store.ErrClosed
	}
	return fmt.Errorf("etcdstore: %w", err)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key target.Key) (target.Record, error) {
	if s.isClosed() {
		return target.Record{}, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return target.Record{}, err
	}
	kb, err := store.KeyBytes(key)
	if err != nil {
		return target.Record{}, err
	}
	start := time.Now()
	resp, err := s.cli.Get(ctx, s.recKey(kb))
	s.observe("get", start, false)
	if err != nil {
		return target.Record{}, s.ctxErr(ctx, err)
	}
	if len(resp.Kvs) == 0 {
		return target.Record{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	return store.DecodeRecord(key, resp.Kvs[0].Value)
}

// List implements store.Store with the bbolt store's paging and tokens.
func (s *Store) List(ctx context.Context, q store.Query) ([]target.Record, string, error) {
	if s.isClosed() {
		return nil, "", store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if q.Namespace != "" && q.Cluster == "" {
		return nil, "", fmt.Errorf("%w: a namespace filter requires a cluster", store.ErrInvalid)
	}
	prefix := store.KeyPrefix(q.Cluster, q.Namespace)
	size := cmp.Or(q.PageSize, store.DefaultPageSize)
	if size < 0 {
		return nil, "", fmt.Errorf("%w: negative page size %d", store.ErrInvalid, q.PageSize)
	}
	size = min(size, store.MaxPageSize)
	from := s.recKey(prefix)
	if q.PageToken != "" {
		after, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || !bytes.HasPrefix(after, prefix) {
			return nil, "", fmt.Errorf("%w: page token %q does not belong to this query", store.ErrInvalid, q.PageToken)
		}
		from = s.recKey(after) + "\x00"
	}
	end := clientv3.GetPrefixRangeEnd(s.recKey(prefix))
	start := time.Now()
	resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(size)+1))
	s.observe("list", start, false)
	if err != nil {
		return nil, "", s.ctxErr(ctx, err)
	}
	var (
		records []target.Record
		corrupt []error
		next    string
	)
	kvs := resp.Kvs
	if len(kvs) > size {
		kvs = kvs[:size]
		next = base64.RawURLEncoding.EncodeToString(kvs[size-1].Key[len(s.recKey(nil)):])
	}
	for _, kv := range kvs {
		key, err := store.ParseKeyBytes(kv.Key[len(s.recKey(nil)):])
		if err != nil {
			corrupt = append(corrupt, &store.CorruptError{Err: err})
			continue
		}
		rec, err := store.DecodeRecord(key, kv.Value)
		if err != nil {
			corrupt = append(corrupt, err)
			continue
		}
		records = append(records, rec)
	}
	return records, next, errors.Join(corrupt...)
}

// remove deletes the record at rk (as read at modRev) and records its
// deletion; ok is false when the record or the feed moved meanwhile.
func (s *Store) remove(ctx context.Context, key target.Key, rk string, modRev int64) (ok bool, err error) {
	start := time.Now()
	seqResp, err := s.cli.Get(ctx, s.seqKey())
	if err != nil {
		return false, s.ctxErr(ctx, err)
	}
	seq, seqMod := readSeq(seqResp)
	ops, err := s.feedOps([]store.Change{{Key: key, Kind: store.ChangeDeleted, At: s.opts.Now().UTC()}}, seq)
	if err != nil {
		return false, err
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(rk), "=", modRev),
		clientv3.Compare(clientv3.ModRevision(s.seqKey()), "=", seqMod),
	).Then(append([]clientv3.Op{clientv3.OpDelete(rk), clientv3.OpDelete(s.prefix+"d/"+rk[len(s.recKey(nil)):], clientv3.WithPrefix())}, ops...)...).Commit()
	if err != nil {
		s.observe("delete", start, false)
		return false, s.ctxErr(ctx, err)
	}
	s.observe("delete", start, !resp.Succeeded)
	if resp.Succeeded {
		return true, s.waitDelivered(ctx, resp.Header.Revision)
	}
	return false, nil
}

// Delete implements store.Store; it also removes an undecodable record.
func (s *Store) Delete(ctx context.Context, key target.Key) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	kb, err := store.KeyBytes(key)
	if err != nil {
		return err
	}
	rk := s.recKey(kb)
	for {
		resp, err := s.cli.Get(ctx, rk)
		if err != nil {
			return s.ctxErr(ctx, err)
		}
		if len(resp.Kvs) == 0 {
			return fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		ok, err := s.remove(ctx, key, rk, resp.Kvs[0].ModRevision)
		if err != nil || ok {
			return err
		}
	}
}

// Expire implements store.Store. It reads every record (a page at a time):
// its cost follows the size of the store. An undecodable record is kept.
func (s *Store) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	removed := 0
	from, end := s.recKey(nil), clientv3.GetPrefixRangeEnd(s.recKey(nil))
	for {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(store.MaxPageSize))
		if err != nil {
			return removed, s.ctxErr(ctx, err)
		}
		for _, kv := range resp.Kvs {
			key, err := store.ParseKeyBytes(kv.Key[len(s.recKey(nil)):])
			if err != nil {
				continue
			}
			rec, err := store.DecodeRecord(key, kv.Value)
			if err != nil || !rec.LastSeen.Before(cutoff) {
				continue
			}
			ok, err := s.remove(ctx, key, string(kv.Key), kv.ModRevision)
			if err != nil {
				return removed, err
			}
			if ok {
				removed++
			}
			// Not ok: the record was written meanwhile (seen again) or
			// the feed moved; the next Expire looks at it again.
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return removed, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Revision implements store.Feed.
func (s *Store) Revision(ctx context.Context) (uint64, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	resp, err := s.cli.Get(ctx, s.seqKey())
	if err != nil {
		return 0, s.ctxErr(ctx, err)
	}
	seq, _ := readSeq(resp)
	return seq, nil
}

// Count implements store.Store: the number of records and the latest
// revision, read at one etcd revision.
func (s *Store) Count(ctx context.Context) (int, uint64, error) {
	if s.isClosed() {
		return 0, 0, store.ErrClosed
	}
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.recKey(nil), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(s.seqKey()),
	).Commit()
	if err != nil {
		return 0, 0, s.ctxErr(ctx, err)
	}
	seq, _ := readSeq((*clientv3.GetResponse)(resp.Responses[1].GetResponseRange()))
	return int(resp.Responses[0].GetResponseRange().Count), seq, nil
}

// Changes implements store.Feed.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) ([]store.Change, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	end := clientv3.GetPrefixRangeEnd(s.prefix + "c/")
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.seqKey()),
		clientv3.OpGet(s.changeKey(0), clientv3.WithRange(end), clientv3.WithLimit(1)),
		clientv3.OpGet(s.changeKey(after+1), clientv3.WithRange(end), clientv3.WithLimit(int64(limit))),
	).Commit()
	if err != nil {
		return nil, s.ctxErr(ctx, err)
	}
	latest, _ := readSeq((*clientv3.GetResponse)(resp.Responses[0].GetResponseRange()))
	oldest := latest + 1
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		if oldest, err = s.parseChangeRev(kvs[0].Key); err != nil {
			return nil, err
		}
	}
	switch {
	case after > latest:
		return nil, fmt.Errorf("%w: revision %d is newer than the latest, %d", store.ErrOutOfRange, after, latest)
	case after+1 < oldest:
		return nil, fmt.Errorf("%w: changes after revision %d are no longer kept (the oldest kept is %d)", store.ErrOutOfRange, after, oldest)
	}
	var out []store.Change
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		c, err := s.decodeChangeKV(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (s *Store) parseChangeRev(k []byte) (uint64, error) {
	var rev uint64
	if _, err := fmt.Sscanf(string(k[len(s.prefix)+2:]), "%016x", &rev); err != nil {
		return 0, fmt.Errorf("%w: change key %q", store.ErrCorrupt, k)
	}
	return rev, nil
}

func (s *Store) decodeChangeKV(kv *mvccpb.KeyValue) (store.Change, error) {
	rev, err := s.parseChangeRev(kv.Key)
	if err != nil {
		return store.Change{}, err
	}
	return store.DecodeChange(rev, kv.Value)
}

// Follow implements store.Feed. fn sees every change of every server
// sharing the prefix, in revision order, from one watcher goroutine; a
// write of this Store returns only after its changes were handed to fn.
func (s *Store) Follow(fn func([]store.Change)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.followers == nil {
		s.followers = map[*int]func([]store.Change){}
	}
	id := new(int)
	s.followers[id] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.followers, id)
	}
}

// watch follows the change keys from etcd revision rev until ctx ends.
// Followers are called with s.mu held, so stop waits for a call under way.
func (s *Store) watch(ctx context.Context, rev int64) {
	defer close(s.done)
	for ctx.Err() == nil {
		wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), s.prefix+"c/", clientv3.WithPrefix(), clientv3.WithRev(rev))
		for wr := range wch {
			if err := wr.Err(); err != nil {
				if wr.CompactRevision > rev {
					rev = wr.CompactRevision // changes in between are still in Changes
				}
				break
			}
			var cs []store.Change
			for _, ev := range wr.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				if c, err := s.decodeChangeKV(ev.Kv); err == nil {
					cs = append(cs, c)
				}
			}
			s.mu.Lock()
			if len(cs) > 0 {
				for _, f := range s.followers {
					f(cs)
				}
			}
			r := wr.Header.Revision
			if len(wr.Events) > 0 {
				r = max(r, wr.Events[len(wr.Events)-1].Kv.ModRevision)
			}
			if r > s.delivered {
				s.delivered = r
				s.cond.Broadcast()
			}
			s.mu.Unlock()
			rev = max(rev, r+1)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitDelivered waits until the watcher has handed etcd revision rev to
// the followers, or ctx ends.
func (s *Store) waitDelivered(ctx context.Context, rev int64) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.delivered < rev && !s.closed {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.cond.Wait()
	}
	return nil
}
