package boltstore

import (
	"context"
	"sync"
)

// keyLocks is a lock per key, held by an Update of the key from its read
// to its commit.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
	// free are unused locks, their token in their channel: they spare
	// each Update allocating its key's lock. The store's own, not a
	// sync.Pool shared by every store: a channel made in a synctest
	// bubble must not serve a store of another.
	free []*keyLock
}

// maxFreeKeyLocks bounds keyLocks.free: about the updates in flight.
const maxFreeKeyLocks = 1024

// keyLock is one key's lock: a token in a channel, and how many updates
// hold or wait for it.
type keyLock struct {
	key   string
	token chan struct{}
	refs  int
}

// lock takes the lock of key, or fails with ctx's error while waiting.
// The caller releases it with unlock.
func (k *keyLocks) lock(ctx context.Context, key string) (*keyLock, error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		if n := len(k.free); n > 0 {
			l, k.free = k.free[n-1], k.free[:n-1]
		} else {
			l = &keyLock{token: make(chan struct{}, 1)}
			l.token <- struct{}{}
		}
		l.key = key
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	select {
	case <-l.token:
		return l, nil
	default:
	}
	select {
	case <-l.token:
		return l, nil
	case <-ctx.Done():
		k.release(l)
		return nil, ctx.Err()
	}
}

// unlock releases l, taken by lock.
func (k *keyLocks) unlock(l *keyLock) {
	l.token <- struct{}{}
	k.release(l)
}

// release drops a holder or waiter of l; the last one forgets the key's
// lock, whose token is then in its channel.
func (k *keyLocks) release(l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(k.locks, l.key)
		l.key = ""
		if len(k.free) < maxFreeKeyLocks {
			k.free = append(k.free, l)
		}
	}
}
