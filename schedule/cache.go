package schedule

import (
	"container/list"
	"encoding/binary"
	"strings"
	"sync"
)

// Cache keeps schedules compiled from windows, keyed by the windows
// themselves, so that a caller given the same windows on every decision
// (a server converting each request's spec) compiles them once: compiling
// loads zones and parses cron expressions, while a hit costs a lookup. It
// is bounded twice: at most maxEntries schedules, and at most maxBytes of
// their estimated memory (the windows' text plus zoneBytes per window);
// past either, the least recently used schedules are dropped. A Cache is
// safe for concurrent use; the schedules it returns are shared, which a
// Schedule allows (it is immutable).
type Cache struct {
	maxEntries, maxBytes int

	mu      sync.Mutex
	bytes   int                      // the entries' estimated memory
	order   list.List                // of *cacheEntry, most recently used first
	entries map[string]*list.Element // by key (appendKey)
}

type cacheEntry struct {
	key   string
	s     *Schedule
	bytes int
}

// zoneBytes is a compiled window's estimated memory besides its text: its
// loaded zone (Europe/Berlin 2.8 KiB, America/New_York 4.4 KiB, UTC
// nothing) and its cron schedules, rounded up.
const zoneBytes = 8 << 10

// NewCache returns an empty cache of at most maxEntries schedules and
// maxBytes of their estimated memory (each at least 1).
func NewCache(maxEntries, maxBytes int) *Cache {
	return &Cache{maxEntries: max(maxEntries, 1), maxBytes: max(maxBytes, 1), entries: map[string]*list.Element{}}
}

// Compile returns Compile(ws), from the cache when windows equal to ws
// field for field were compiled before. Errors are Compile's and are not
// kept: only valid windows are cached. The cache keeps no reference to ws
// or its strings.
func (c *Cache) Compile(ws []Window) (*Schedule, error) {
	if len(ws) == 0 || len(ws) > MaxWindows {
		return Compile(ws)
	}
	var buf [512]byte
	key := appendKey(buf[:0], ws)
	c.mu.Lock()
	if e, ok := c.entries[string(key)]; ok {
		c.order.MoveToFront(e)
		s := e.Value.(*cacheEntry).s
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	own := make([]Window, len(ws))
	for i, w := range ws { // the caller's strings may alias memory it reuses
		own[i] = Window{Name: strings.Clone(w.Name), TimeZone: strings.Clone(w.TimeZone), Start: strings.Clone(w.Start),
			End: strings.Clone(w.End), Duration: w.Duration, MinReplicas: w.MinReplicas}
	}
	s, err := Compile(own)
	if err != nil {
		return nil, err
	}
	c.add(string(key), s, 2*len(key)+len(ws)*zoneBytes) // the key, and the windows' text again
	return s, nil
}

// add keeps s under key, then drops the least recently used entries past
// the bounds (s itself too, when it alone is above maxBytes).
func (c *Cache) add(key string, s *Schedule, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok { // compiled concurrently: keep the first
		c.order.MoveToFront(e)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, s: s, bytes: bytes})
	c.bytes += bytes
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		e := c.order.Back()
		old := e.Value.(*cacheEntry)
		c.order.Remove(e)
		delete(c.entries, old.key)
		c.bytes -= old.bytes
	}
}

// Len returns the number of schedules cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// appendKey appends to b an encoding of ws that two window lists share
// only when they are equal field for field: each text length-prefixed,
// then the duration and the minimum.
func appendKey(b []byte, ws []Window) []byte {
	for _, w := range ws {
		for _, s := range [...]string{w.Name, w.TimeZone, w.Start, w.End} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
		b = binary.AppendVarint(b, int64(w.Duration))
		b = binary.AppendVarint(b, int64(w.MinReplicas))
	}
	return b
}
