package etcdstore

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// This file commits the Updates' writes, those that wait while
// maxInFlight transactions are under way together in the next one, as
// bbolt's Batch and etcd's own raft batching do (the package doc says how;
// docs/benchmarks.md, "etcd: batched writes", why).

// maxInFlight is how many transactions of writes the store has under way
// at once; more writes wait and go together in the next (the choice is
// measured in docs/benchmarks.md, "etcd: batched writes").
const maxInFlight = 4

// maxBatchOps bounds the operations of one transaction's branch: etcd
// refuses more than --max-txn-ops (128 by default).
const maxBatchOps = 128

// write is one Update's part of a transaction, and its outcome.
type write struct {
	ctx     context.Context // the caller's: a write whose caller left before it is sent is not sent
	key     target.Key
	rk      string            // record key
	mod     int64             // the record's mod revision fn ran on; 0 when none
	val     []byte            // the record to store
	ops     []clientv3.Op     // the record's put first
	records bool              // it records changes
	feed    *pb.EtcdFeedWrite // their feed entry
	size    int               // bytes of values

	// Set when done is closed: rev, the etcd revision it was committed at
	// (0 when it was not); moved, the record as stored when another write
	// had changed it; or err.
	rev   int64
	moved *stored
	err   error
	done  chan struct{}
}

// commit queues w for a transaction and waits for its outcome, or for ctx
// (whose error it answers: w may still be committed).
func (s *Store) commit(ctx context.Context, w *write) error {
	w.ctx, w.done = ctx, make(chan struct{})
	s.bmu.Lock()
	if s.bclosed {
		s.bmu.Unlock()
		return store.ErrClosed
	}
	s.pending = append(s.pending, w)
	if s.inflight < maxInFlight {
		s.inflight++
		s.senders.Go(s.send)
	}
	s.bmu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send commits the pending writes, a batch at a time, until there are
// none; it holds one of the maxInFlight places meanwhile.
func (s *Store) send() {
	for {
		s.bmu.Lock()
		batch := s.takeBatch()
		if len(batch) == 0 {
			s.inflight--
			s.bmu.Unlock()
			return
		}
		s.bmu.Unlock()
		s.commitBatch(batch)
	}
}

// takeBatch takes from the pending writes, in order, those that fit one
// transaction: within MaxWriteBytes and maxBatchOps, one write per record
// (etcd refuses a transaction that puts a key twice). It ends, unsent, the
// writes whose callers have left. Requires s.bmu.
func (s *Store) takeBatch() []*write {
	var batch, rest []*write
	size, ops := 0, 1 // the feed's put
	keys := map[string]bool{}
	for _, w := range s.pending {
		if err := w.ctx.Err(); err != nil {
			w.err = err
			close(w.done)
			continue
		}
		if keys[w.rk] || len(batch) > 0 && (size+w.size > MaxWriteBytes || ops+len(w.ops) > maxBatchOps) {
			rest = append(rest, w)
			continue
		}
		keys[w.rk] = true
		batch = append(batch, w)
		size, ops = size+w.size, ops+len(w.ops)
	}
	s.pending = rest
	return batch
}

// commitBatch commits batch's writes in one transaction; when one's
// record had moved, it gives that one the record and commits the others
// again.
func (s *Store) commitBatch(batch []*write) {
	for len(batch) > 0 {
		cmps := make([]clientv3.Cmp, 0, len(batch))
		var then, gets []clientv3.Op
		var feed []*pb.EtcdFeedWrite
		records := false
		for _, w := range batch {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(w.rk), "=", w.mod))
			then = append(then, w.ops[0])
			gets = append(gets, clientv3.OpGet(w.rk))
			feed = append(feed, w.feed)
			records = records || w.records
		}
		for _, w := range batch {
			then = append(then, w.ops[1:]...)
		}
		if records {
			val, err := feedValue(feed)
			if err != nil {
				s.finish(batch, 0, err)
				return
			}
			then = append(then, clientv3.OpPut(s.feedKey(), string(val)))
		}
		resp, err := s.txn(s.bctx, "commit", cmps, then, nil)
		if err == nil && resp.Succeeded {
			s.finish(batch, resp.Header.Revision, nil)
			return
		}
		if err == nil {
			// Which records moved: read in a transaction of its own, so
			// that the writes' raft entries do not carry these reads.
			resp, err = s.txn(s.bctx, "read", nil, gets, nil)
		}
		if err != nil {
			s.finish(batch, 0, err)
			return
		}
		var again []*write
		for i, w := range batch {
			if cur := storedOf(resp.Responses[i].GetResponseRange().Kvs); cur.mod != w.mod {
				w.moved = &cur
				close(w.done)
			} else {
				again = append(again, w)
			}
		}
		batch = again
	}
}

// finish ends batch's writes: committed at etcd revision rev, or failed
// with err (their outcome unknown: their cached records are dropped).
func (s *Store) finish(batch []*write, rev int64, err error) {
	for _, w := range batch {
		if err != nil {
			s.cache.drop(w.key)
		} else {
			s.cache.put(w.key, rev, w.val)
		}
		w.rev, w.err = rev, err
		close(w.done)
	}
}
