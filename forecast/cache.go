package forecast

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"sync"
)

// Cache keeps fitted models, so that a caller that fits the same history
// often (a server fits a target's history at every decision, and the
// history changes once per Step) fits it once. A model depends only on the
// history's closed steps and the config, which key it (by their SHA-256):
// a Fit through the cache equals Fit. Bounded by a count of models, the
// least recently used dropped first; a model of a full history holds about
// 25 KiB. Safe for concurrent use; the models it returns are shared and
// must not be changed (Predict does not change a model).
type Cache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cacheEntry, most recently used first
	byKey map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key   [sha256.Size]byte
	model *Model
}

// NewCache returns a cache of at most max models.
func NewCache(max int) *Cache {
	return &Cache{max: max, order: list.New(), byKey: make(map[[sha256.Size]byte]*list.Element)}
}

// Fit is Fit(h, cfg), from the cache when an equal history was fitted for
// an equal config.
func (c *Cache) Fit(h *History, cfg Config) *Model {
	k := fitKey(h, cfg)
	c.mu.Lock()
	if e, ok := c.byKey[k]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*cacheEntry).model
	}
	c.mu.Unlock()
	m := Fit(h, cfg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok { // fitted meanwhile
		return e.Value.(*cacheEntry).model
	}
	c.byKey[k] = c.order.PushFront(&cacheEntry{key: k, model: &m})
	for c.order.Len() > c.max {
		old := c.order.Back()
		delete(c.byKey, old.Value.(*cacheEntry).key)
		c.order.Remove(old)
	}
	return &m
}

// Len returns the number of models cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// fitKey is the SHA-256 of what Fit reads: cfg, h's start, scale and
// closed steps.
func fitKey(h *History, cfg Config) [sha256.Size]byte {
	cfg = cfg.resolved()
	b := make([]byte, 0, 40+2*len(h.Points))
	b = binary.BigEndian.AppendUint64(b, uint64(cfg.Lead))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(cfg.MaxError))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(cfg.MinCorrelation))
	b = binary.BigEndian.AppendUint64(b, uint64(h.Start.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(h.Scale))
	for _, q := range h.Points {
		b = binary.BigEndian.AppendUint16(b, q)
	}
	return sha256.Sum256(b)
}
