package boltstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/setpointhq/setpoint/store"
)

// Arrivals counts the writes on their way to a Store store: calls that a
// server has received and that will Update or Delete, but that have not
// reached the store yet (they are being received, decoded, validated).
// Given in Options.Arrivals, it tells the committer whether more writes are
// coming: the committer holds a batch open for company only while writes
// are on their way or Updates are being prepared, never longer than
// Options.MaxBatchDelay, and commits the moment every write received has
// joined the batch — neither the processors nor the disk then wait for a
// timer while nothing more can come.
//
// The server counts each write call from the moment it starts handling it
// (Arrive), and passes the context Arrive returned (or one derived from
// it) to the store; the call is counted off when it reaches the store
// (Update, Delete), and at the latest when the server is done with it
// (Depart), for a call that never reaches the store (refused, invalid).
// Counting off is idempotent.
//
// The zero value is ready to use, and a nil *Arrivals counts nothing. An
// Arrivals serves one open store at a time; the server and the store must
// be given the same one.
type Arrivals struct {
	n atomic.Int64

	mu    sync.Mutex
	owner *Store // the open store it serves, nil when none
}

// arrival is one counted write, carried in its call's context.
type arrival struct {
	from *Arrivals
	gone atomic.Bool
}

// arrivalKey is the context key of a call's *arrival.
type arrivalKey struct{}

// Arrive counts one write on its way and returns ctx carrying it. On a nil
// Arrivals it returns ctx unchanged.
func (a *Arrivals) Arrive(ctx context.Context) context.Context {
	if a == nil {
		return ctx
	}
	a.n.Add(1)
	return context.WithValue(ctx, arrivalKey{}, &arrival{from: a})
}

// Depart counts off the write that ctx carries (Arrive), unless it was
// counted off already; it does nothing for a ctx that carries none.
func (a *Arrivals) Depart(ctx context.Context) {
	if a != nil {
		departed(ctx, true)
	}
}

// Coming returns the writes counted and not yet counted off; 0 on a nil
// Arrivals.
func (a *Arrivals) Coming() int64 {
	if a == nil {
		return 0
	}
	return a.n.Load()
}

// departed counts off the write that ctx carries, once. With poke, when
// it was the last one coming, the committer is told: a batch it holds open
// for it need not wait any more. (A write about to queue, or to be
// prepared and queued, goes without poke: its queueing tells the
// committer.)
func departed(ctx context.Context, poke bool) {
	w, _ := ctx.Value(arrivalKey{}).(*arrival)
	if w == nil || !w.gone.CompareAndSwap(false, true) {
		return
	}
	a := w.from
	if a.n.Add(-1) > 0 || !poke {
		return
	}
	a.mu.Lock()
	b := a.owner
	a.mu.Unlock()
	if b != nil {
		b.poke()
	}
}

// attach makes a serve b; it fails when a serves another open store.
func (a *Arrivals) attach(b *Store) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.owner != nil {
		return fmt.Errorf("%w: Options.Arrivals already serves the open store %s", store.ErrInvalid, a.owner.Path())
	}
	a.owner = b
	return nil
}

// detach ends a's service of b (Close).
func (a *Arrivals) detach(b *Store) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.owner == b {
		a.owner = nil
	}
}
