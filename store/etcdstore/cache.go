package etcdstore

import (
	"sync"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// recordCache keeps the encoded records this server last wrote or read,
// with their mod revisions, so that an Update can skip the read before
// its transaction: the transaction compares the mod revision anyway, and
// when the cache was stale it fails and answers the current record (one
// extra transaction, never a lost write). The feed watcher drops entries
// that other servers' changes made stale. Safe for concurrent use.
type recordCache struct {
	mu    sync.Mutex
	max   int // bytes of values kept at most; 0 disables the cache
	bytes int
	m     map[target.Key]stored
}

func newRecordCache(maxBytes int) *recordCache {
	return &recordCache{max: maxBytes, m: map[target.Key]stored{}}
}

// get returns key's cached record.
func (c *recordCache) get(key target.Key) (stored, bool) {
	if c.max <= 0 {
		return stored{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	return e, ok
}

// put remembers key's record val as stored at mod, unless a newer one is
// already known. It evicts arbitrary entries to stay within the budget.
func (c *recordCache) put(key target.Key, mod int64, val []byte) {
	if c.max <= 0 || len(val) > c.max/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[key]; ok {
		if old.mod >= mod {
			return
		}
		c.bytes -= len(old.val)
	}
	for k, e := range c.m {
		if c.bytes+len(val) <= c.max {
			break
		}
		delete(c.m, k)
		c.bytes -= len(e.val)
	}
	c.m[key] = stored{mod: mod, val: val}
	c.bytes += len(val)
}

// drop forgets key's record.
func (c *recordCache) drop(key target.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		delete(c.m, key)
		c.bytes -= len(e.val)
	}
}

// forget drops the records that cs changed after the revision cached.
func (c *recordCache) forget(cs []store.Change) {
	if c.max <= 0 || len(cs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range cs {
		if e, ok := c.m[ch.Key]; ok && e.mod < etcdRevision(ch.Revision) {
			delete(c.m, ch.Key)
			c.bytes -= len(e.val)
		}
	}
}

// clear forgets every record: after a gap in the feed the watcher cannot
// tell which ones other servers changed.
func (c *recordCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.bytes = 0
}
