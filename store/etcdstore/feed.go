package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
)

// This file is the change feed (the package doc says what it is). A
// change's revision is the etcd revision of its write shifted left by
// subBits, plus its index: the n changes of a write take the last n
// indexes, so the last change of every write ends in subBits one bits, and
// a revision names the etcd revision a reader resumes from (the next one,
// after a write's last change).

// subBits is how many low bits of a change's revision number the changes
// of one write; the rest is the write's etcd revision.
const subBits = 16

// maxChangesPerWrite is the most changes one write may record.
const maxChangesPerWrite = 1 << subBits

// lastIndex is the index of the last change of a write.
const lastIndex = maxChangesPerWrite - 1

// changeRevision is the revision of the i-th of the n changes of the
// write at etcd revision rev.
func changeRevision(rev int64, i, n int) uint64 {
	return uint64(rev)<<subBits | uint64(maxChangesPerWrite-n+i)
}

// etcdRevision is the etcd revision of the write that recorded the change
// of revision r.
func etcdRevision(r uint64) int64 { return int64(r >> subBits) }

// resumeFrom is the etcd revision from which the feed holds the changes
// after revision r.
func resumeFrom(r uint64) int64 {
	if r&lastIndex == lastIndex {
		return etcdRevision(r) + 1
	}
	return etcdRevision(r)
}

// keptAfter is the earliest revision after which the feed holds every
// change once etcd has compacted its history up to revision compact: the
// last change of the write before compact.
func keptAfter(compact int64) uint64 { return uint64(compact)<<subBits - 1 }

func (s *Store) feedKey() string { return s.prefix + "feed" }

// feedValue is the feed key's value for the writes of one transaction,
// in the order their records are put (pb.EtcdFeed).
func feedValue(writes []*pb.EtcdFeedWrite) ([]byte, error) {
	if n := changesIn(writes); n > maxChangesPerWrite {
		return nil, fmt.Errorf("%w: one transaction records %d changes, more than %d", store.ErrInvalid, n, maxChangesPerWrite)
	}
	return (&pb.EtcdFeed{Writes: writes}).MarshalVT()
}

// changesIn is how many changes writes record.
func changesIn(writes []*pb.EtcdFeedWrite) int {
	n := 0
	for _, w := range writes {
		n += len(w.Changes)
		if w.Decided {
			n++
		}
	}
	return n
}

// decodeChanges is the inverse of feedValue for the value written at etcd
// revision rev; it numbers the changes. recs are the records put at rev,
// in order: a decided write takes its decision from the record in its
// place.
func (s *Store) decodeChanges(rev int64, b []byte, recs []*mvccpb.KeyValue) ([]store.Change, error) {
	var f pb.EtcdFeed
	if err := f.UnmarshalVT(b); err != nil {
		return nil, fmt.Errorf("%w: feed entry at etcd revision %d: %v", store.ErrCorrupt, rev, err)
	}
	n := changesIn(f.Writes)
	if n > maxChangesPerWrite {
		return nil, fmt.Errorf("%w: feed entry at etcd revision %d: %d changes", store.ErrCorrupt, rev, n)
	}
	out := make([]store.Change, 0, n)
	for i, w := range f.Writes {
		if w.Decided {
			r := changeRevision(rev, len(out), n)
			if i >= len(recs) {
				return nil, fmt.Errorf("%w: change %d: its write put no record", store.ErrCorrupt, r)
			}
			key, err := record.ParseKey(recs[i].Key[len(s.recKey(nil)):])
			if err != nil {
				return nil, fmt.Errorf("%w: change %d: %v", store.ErrCorrupt, r, err)
			}
			c, err := record.DecisionChange(r, key, recs[i].Value, w.Created)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		for _, v := range w.Changes {
			c, err := record.DecodeChange(changeRevision(rev, len(out), n), v)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// latestOf returns the revision of the latest change from a read of the
// feed key: 0 before the first. The feed key is put only by writes that
// record changes.
func latestOf(kvs []*mvccpb.KeyValue) uint64 {
	if len(kvs) == 0 {
		return 0
	}
	return changeRevision(kvs[0].ModRevision, 0, 1) // a write's last change
}

// watchEnd is where the watch of the feed ends: it covers the feed key and
// every record (the keys between them are neither), so that a feed entry
// comes with the records its transaction put.
func (s *Store) watchEnd() string { return clientv3.GetPrefixRangeEnd(s.recKey(nil)) }

// feedEvents keeps, across a watch's responses, the records put at the
// latest revision, and returns the changes of a watch response's events.
type feedEvents struct {
	s    *Store
	recs []*mvccpb.KeyValue // the records put at the latest revision, in order
}

// changes returns the changes the feed key's puts among evs record, each
// with the etcd revision of its write (for a caller that stops at one).
// The puts of records are kept for the feed entry of their transaction,
// which comes after them in the same revision.
func (f *feedEvents) changes(evs []*clientv3.Event, each func(rev int64, cs []store.Change, err error) bool) {
	fk := f.s.feedKey()
	for _, ev := range evs {
		if ev.Type != clientv3.EventTypePut {
			continue
		}
		if len(f.recs) > 0 && f.recs[0].ModRevision != ev.Kv.ModRevision {
			f.recs = f.recs[:0]
		}
		if string(ev.Kv.Key) != fk {
			f.recs = append(f.recs, ev.Kv)
			continue
		}
		cs, err := f.s.decodeChanges(ev.Kv.ModRevision, ev.Kv.Value, f.recs)
		if !each(ev.Kv.ModRevision, cs, err) {
			return
		}
	}
}

// Revision implements store.Feed: the revision of the latest change, read
// linearizably.
func (s *Store) Revision(ctx context.Context) (uint64, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	resp, err := s.get(ctx, "revision", s.feedKey())
	if err != nil {
		return 0, s.ctxErr(ctx, err)
	}
	return latestOf(resp.Kvs), nil
}

// Count implements store.Store: the number of records and the latest
// change's revision, read at one etcd revision.
func (s *Store) Count(ctx context.Context) (int, uint64, error) {
	if s.isClosed() {
		return 0, 0, store.ErrClosed
	}
	resp, err := s.txn(ctx, "count", nil, []clientv3.Op{
		clientv3.OpGet(s.recKey(nil), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(s.feedKey()),
	}, nil)
	if err != nil {
		return 0, 0, s.ctxErr(ctx, err)
	}
	return int(resp.Responses[0].GetResponseRange().Count), latestOf(resp.Responses[1].GetResponseRange().Kvs), nil
}

// Changes implements store.Feed by watching the feed key from the etcd
// revision of `after` up to the latest change. Changes that etcd has
// compacted away are answered with store.ErrOutOfRange, naming the oldest
// revision still kept.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) ([]store.Change, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	start := time.Now()
	defer func() { s.observe("changes", start, false) }()
	resp, err := s.get(ctx, "", s.feedKey())
	if err != nil {
		return nil, s.ctxErr(ctx, err)
	}
	latest := latestOf(resp.Kvs)
	switch {
	case after > latest:
		return nil, fmt.Errorf("%w: revision %d is newer than the latest, %d", store.ErrOutOfRange, after, latest)
	case after == latest:
		return nil, nil
	}
	// No change is older than the feed key itself: a fresh prefix on a
	// compacted cluster still reads from its beginning.
	from := max(resumeFrom(after), resp.Kvs[0].CreateRevision)
	last := resp.Kvs[0].ModRevision
	var out []store.Change
	err = s.members.run(ctx, true, func(actx context.Context, m *member) (err error) {
		out, err = s.changesOn(actx, m, after, from, last, limit)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrOutOfRange) && !errors.Is(err, store.ErrCorrupt) {
		return nil, s.ctxErr(ctx, err)
	}
	return out, err
}

// changesOn reads at most limit changes after revision `after` with a
// watch on member m from etcd revision from up to last, in one attempt
// (ctx).
func (s *Store) changesOn(ctx context.Context, m *member, after uint64, from, last int64, limit int) ([]store.Change, error) {
	var (
		out  []store.Change
		done bool
		ferr error
	)
	f := feedEvents{s: s}
	for wr := range m.watcher.Watch(ctx, s.feedKey(), clientv3.WithRange(s.watchEnd()), clientv3.WithRev(from)) {
		if wr.CompactRevision != 0 {
			return nil, fmt.Errorf("%w: changes after revision %d are no longer kept (those after %d are)", store.ErrOutOfRange, after, keptAfter(wr.CompactRevision))
		}
		if err := wr.Err(); err != nil {
			return nil, err
		}
		f.changes(wr.Events, func(rev int64, cs []store.Change, err error) bool {
			if err != nil {
				ferr, done = err, true
				return false
			}
			for _, c := range cs {
				if c.Revision <= after {
					continue
				}
				if out = append(out, c); len(out) == limit {
					done = true
					return false
				}
			}
			done = rev >= last
			return !done
		})
		if ferr != nil {
			return nil, ferr
		}
		if done {
			return out, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unavailable, "the feed watch ended")
}

// Follow implements store.Feed. fn sees every change of every server
// sharing the prefix, in revision order, from one watcher goroutine. A
// write of this Store returns once its changes were handed to fn, or once
// it has waited Options.DeliveryWait for that, whichever comes first: a
// feed held up (its member hung, until the watch moves to another, about
// Options.ProbeInterval+ProbeTimeout) delays writes by at most
// DeliveryWait and never fails them, and their changes reach fn when the
// feed catches up, in order, none missed.
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

// watch follows the feed key from etcd revision rev until ctx ends, hands
// its changes to the followers and drops the cached records they make
// stale. It watches on one healthy member and moves to another when that
// one fails a probe (members.go) or loses its leader (WithRequireLeader).
// Followers are called with s.mu held, so stop waits for a call under
// way.
func (s *Store) watch(ctx context.Context, rev int64) {
	defer close(s.done)
	for ctx.Err() == nil {
		m := s.members.pick(nil)
		s.feedOn.Store(m.endpoint)
		wctx, end := m.begin(ctx, 0, true)
		wch := m.watcher.Watch(wctx, s.feedKey(), clientv3.WithRange(s.watchEnd()), clientv3.WithRev(rev))
		f := feedEvents{s: s}
		for wr := range wch {
			if err := wr.Err(); err != nil {
				if wr.CompactRevision > rev {
					// Fell behind etcd's compaction: the changes in
					// between are gone. The followers are told, and
					// the cache, which those changes would have
					// corrected, is dropped.
					if s.opts.Logger != nil {
						s.opts.Logger.Warn("the change feed fell behind etcd's compaction: changes were missed; Watch streams are ended and caches dropped", "from", rev, "to", wr.CompactRevision)
					}
					rev = wr.CompactRevision
					s.gap()
				}
				break
			}
			var cs []store.Change
			undecodable := false
			f.changes(wr.Events, func(_ int64, got []store.Change, err error) bool {
				cs, undecodable = append(cs, got...), undecodable || err != nil
				return true
			})
			if undecodable {
				// Changes that cannot be read (an earlier version's
				// form, or corrupt) are missed changes.
				s.gap()
			}
			s.cache.forget(cs)
			s.mu.Lock()
			if len(cs) > 0 {
				for _, f := range s.followers {
					f(cs)
				}
			}
			// The feed has been read up to the last event, not up to the
			// header's revision: a watch that starts far behind is caught
			// up in batches of at most 1000 revisions, each under a header
			// giving the member's latest revision, which the next batches
			// have yet to reach.
			var r int64
			if len(wr.Events) > 0 {
				r = wr.Events[len(wr.Events)-1].Kv.ModRevision
			}
			if r > s.delivered {
				s.delivered = r
				s.cond.Broadcast()
			}
			s.mu.Unlock()
			rev = max(rev, r+1)
			if s.opts.afterWatchResponse != nil && s.opts.afterWatchResponse(wr.Header.Revision, r) {
				break
			}
		}
		end()
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// gap tells the followers that changes were missed and forgets the
// cached records.
func (s *Store) gap() {
	s.cache.clear()
	gap := []store.Change{{Kind: store.ChangeGap}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.followers {
		f(gap)
	}
}

// waitDelivered waits until the watcher has handed etcd revision rev to
// the followers, or for Options.DeliveryWait, or until ctx ends (its
// error).
func (s *Store) waitDelivered(ctx context.Context, rev int64) error {
	bounded, cancel := context.WithTimeout(ctx, s.opts.DeliveryWait)
	defer cancel()
	stop := context.AfterFunc(bounded, func() {
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
		if bounded.Err() != nil {
			return nil // committed; the feed delivers it when it catches up
		}
		s.cond.Wait()
	}
	return nil
}
