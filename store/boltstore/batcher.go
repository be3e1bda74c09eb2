package boltstore

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/setpointhq/setpoint/store"
)

// batcher gathers the writes queued for the committer into batches. It
// has two knobs (Options):
//
//   - MaxBatch, the most writes one commit carries;
//   - MaxBatchDelay, the longest a batch is held open for more writes
//     (negative: never held).
//
// A batch is held only while more writes are coming: Updates being
// prepared (from their key's lock to their queueing) and the writes a
// server announced with Store.Expect (received, not yet handed to the
// store). It is committed the moment none is coming, or when it is full,
// or when the delay is over. A lone caller's write is therefore never
// held. Two rules keep batches whole under load, where calls waiting for a
// processor are not yet announced: after a commit of two writes or more (a
// busy store), the batch is also held while the queue keeps growing, until
// it has not grown for a grace of MaxBatchDelay/8; after a commit of
// heavyBatch writes or more, for the whole delay. (bbolt's DB.Batch holds
// even a lone caller for its whole delay.) The figures that chose these
// rules are in docs/benchmarks-archive.md ("Group commit, and the Arrivals
// count") and docs/benchmarks.md ("CPU per call against the start: the
// batcher counts writes until they reach the store").
type batcher struct {
	maxSize  int
	maxDelay time.Duration

	mu     sync.Mutex
	queue  []*request
	closed bool
	// preparing counts the Updates between taking their key's lock and
	// queueing their write (or giving up). Lowered under mu when a write
	// is queued, so that the committer sees the queue and the count agree.
	preparing atomic.Int64
	// expected counts the writes announced (Store.Expect), never below 0.
	expected atomic.Int64
	wake     chan struct{} // one pending signal: look at the queue again
	closing  chan struct{} // closed by close
	timer    *time.Timer   // the committer's, stopped between batches
	last     int           // writes in the last batch
}

// heavyBatch is the size of a commit after which the next batch is held
// for the whole MaxBatchDelay: so many calls in flight keep the processors
// busy while it is held (docs/benchmarks-archive.md).
const heavyBatch = 16

// batchGraceDivisor: a busy store's batch is held until its queue has not
// grown for MaxBatchDelay/batchGraceDivisor.
const batchGraceDivisor = 8

func newBatcher(maxSize int, maxDelay time.Duration) *batcher {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &batcher{maxSize: maxSize, maxDelay: maxDelay, wake: make(chan struct{}, 1), closing: make(chan struct{}), timer: t}
}

// expect adds n (negative: takes off) to the writes announced, never
// going below zero; when the last one is taken off, the committer looks
// again.
func (q *batcher) expect(n int) {
	for {
		cur := q.expected.Load()
		next := max(cur+int64(n), 0)
		if q.expected.CompareAndSwap(cur, next) {
			if next == 0 && cur > 0 {
				q.poke()
			}
			return
		}
	}
}

// push queues r. An Update's request (r.upd set) was counted in
// preparing: push takes it off, queued or refused. It fails with
// store.ErrClosed after close.
func (q *batcher) push(r *request) error {
	q.mu.Lock()
	if r.upd != nil {
		q.preparing.Add(-1)
	}
	if q.closed {
		q.mu.Unlock()
		return store.ErrClosed
	}
	q.queue = append(q.queue, r)
	q.mu.Unlock()
	q.poke()
	return nil
}

// poke tells the committer to look at the queue (and the writes coming)
// again.
func (q *batcher) poke() {
	select {
	case q.wake <- struct{}{}:
	default: // a signal is already pending
	}
}

// close refuses further writes; the writes queued are still taken. It
// reports false when the batcher was closed already.
func (q *batcher) close() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.closed = true
	close(q.closing)
	return true
}

// isClosed reports whether close was called.
func (q *batcher) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// next waits for the next batch (the committer's loop), holds it as the
// type's doc says, and returns it with the time it was held; ok is false
// once the batcher is closed and its queue empty.
func (q *batcher) next() (batch []*request, held time.Duration, ok bool) {
	for {
		start := time.Now()
		// Only what gather held is taken: a write queued after it found
		// the queue empty waits for the next look (its push pokes it), or
		// it would be committed alone, never held.
		if q.gather() {
			held = time.Since(start)
			batch, closed := q.take()
			if len(batch) > 0 {
				q.last = len(batch)
				return batch, held, true
			}
			if closed {
				return nil, 0, false
			}
		}
		select {
		case <-q.wake:
		case <-q.closing:
		}
	}
}

// gather returns when the queued writes should be committed (see the
// type's doc). It reports false when it found the queue empty and the
// batcher open: nothing to take.
func (q *batcher) gather() bool {
	if q.maxDelay < 0 {
		return true
	}
	var (
		start, grew time.Time // when gather started; when the queue last grew
		last        int       // the queue's length at the last look
	)
	// Since Go 1.23 a stopped or reset timer's channel holds no stale
	// tick: no draining.
	defer q.timer.Stop()
	busy, heavy := q.last >= 2, q.last >= heavyBatch
	grace := q.maxDelay / batchGraceDivisor
	for {
		q.mu.Lock()
		n, preparing, closed := len(q.queue), q.preparing.Load(), q.closed
		q.mu.Unlock()
		if n == 0 && !closed {
			return false
		}
		if n >= q.maxSize || closed {
			return true
		}
		now := time.Now()
		if start.IsZero() {
			start = now
		}
		if n != last {
			grew, last = now, n
		}
		deadline := start.Add(q.maxDelay)
		wakeAt := deadline
		switch {
		case !now.Before(deadline):
			return true
		case preparing > 0 || q.expected.Load() > 0, heavy:
		case busy && now.Sub(grew) < grace:
			wakeAt = grew.Add(grace)
		default:
			return true
		}
		q.timer.Reset(wakeAt.Sub(now))
		select {
		case <-q.wake: // another write queued, or the last one expected came: look again
		case <-q.timer.C:
		case <-q.closing:
			return true
		}
	}
}

// take removes up to maxSize requests from the queue, keeping those whose
// caller is still waiting. closed reports that the queue was empty and the
// batcher closed: no request can arrive any more.
func (q *batcher) take() (batch []*request, closed bool) {
	for {
		q.mu.Lock()
		n := min(len(q.queue), q.maxSize)
		taken := q.queue[:n:n]
		q.queue = slices.Clone(q.queue[n:])
		closed = q.closed && n == 0
		q.mu.Unlock()
		if n == 0 {
			return nil, closed
		}
		for _, r := range taken {
			if r.state.CompareAndSwap(stateQueued, stateTaken) {
				batch = append(batch, r)
			}
		}
		if len(batch) > 0 {
			return batch, false
		}
	}
}
