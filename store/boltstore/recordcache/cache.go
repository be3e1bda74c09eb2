// Package recordcache is a store's record cache: for the targets the
// process wrote last, the record as decoded from the value it wrote, so
// that the next Update of a hot target skips reading and decoding it. The stored value is the
// record's revision: an Update that takes a record from the cache runs
// its function on it without a read, and the committer writes the result
// only if the stored value is still byte for byte the one the cached
// record was decoded from (equal bytes decode to an equal record).
// Otherwise — the record was changed by something else: a Delete or
// Expire racing with the cache (both drop the key's record, but an Update
// committed just before them may put its record back after them) — the
// write is a conflict and the update starts over, reading and decoding.
// So nothing is ever stored from a stale cached record, whatever happened
// to the cache; a function may only run once more.
//
// Ownership: a cached record is held by the cache alone. An Update takes
// it out before its function runs (the function may change it), and a
// new record is put in only after its write was committed. The rule for
// what is put in: never the record the function made — it may hold
// slices and maps of the function's caller (a request's spec, a record
// being copied), and Update returns it to its caller, who may keep and
// change it — but a copy of it that shares no slice, map or pointer with
// it (StoredCopy; strings are shared, they cannot change), made as
// decoding the written value would make the record (times in UTC,
// empty lists nil), so that a cache hit is indistinguishable from a read.
// The copy is made from target.Record directly: the record is neither
// decoded nor converted through its storage message again. FuzzStoredCopy
// and FuzzDecodeRecord check it against the decoder and for shared memory;
// TestRecordCacheSharesNothingWithTheFunction and TestRecordCacheIsInvisible
// check it through Update. A failed, cancelled, conflicting or refused
// Update puts nothing back: the next one decodes.
//
// Admission: a record read from the store (a miss) is kept only when its
// key missed once before, recently: take remembers the hashes of the keys
// that missed, forgetting them all once it holds as many as the cache
// could (a doorkeeper, as in TinyLFU). A target decided again and again
// is cached from its second decision on; in a store of a million targets
// decided in turn, where a record would be evicted long before its
// target's next decision, almost no record is copied for the cache, which
// was a tenth of each decision's CPU there and only held memory.
package recordcache

import (
	"hash/maphash"
	"maps"
	"sync"
	"time"
	"unsafe"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// DefaultBytes is the default bound of the record cache
// (store/boltstore's Options.RecordCacheBytes): about 18,000 records of a
// two-metric target with a 20-entry history, which the cache counts as
// 3.7 KB each and which hold 3.3 KB of heap each (BenchmarkRecordCache). Bounded by bytes, the
// cache holds the hot targets of a store of a million as well as all of a
// small one.
const DefaultBytes = 64 << 20

// Cache is the record cache; a nil *Cache keeps nothing. Safe for
// concurrent use.
type Cache struct {
	mu    sync.Mutex
	max   int64 // bytes, as put counts them (recordSize)
	bytes int64
	m     map[target.Key]*Entry
	// missed holds the hashes (seed) of the keys that missed since it was
	// last emptied, at most maxMissed.
	missed    map[uint64]struct{}
	maxMissed int
	seed      maphash.Seed
	// hits and misses count take's lookups (Stats).
	hits, misses uint64
}

// Entry is a record decoded from the stored value val.
type Entry struct {
	// Val is the stored value, never modified.
	Val []byte
	// Rec is the record decoded from it.
	Rec  target.Record
	size int64
}

// New returns a cache of at most maxBytes, or nil (no cache) for
// maxBytes ≤ 0.
func New(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	return &Cache{
		max: maxBytes, m: map[target.Key]*Entry{},
		missed: map[uint64]struct{}{}, maxMissed: int(max(maxBytes/missedKeyBytes, 64)), seed: maphash.MakeSeed(),
	}
}

// missedKeyBytes is the cache's bound per missed key it remembers: about
// twice as many keys as the records it holds (3.7 KB each for a
// two-metric target, BenchmarkRecordCache).
const missedKeyBytes = 2 << 10

// Take removes key's record from the cache and returns it, or nil,
// counting a hit or a miss. The caller owns what it returns. admit says
// whether the record that the caller writes next should be put in the
// cache: after a hit, or a miss of a key that missed recently.
func (c *Cache) Take(key target.Key) (e *Entry, admit bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e = c.unsafeRemove(key); e != nil {
		c.hits++
		return e, true
	}
	c.misses++
	h := maphash.Comparable(c.seed, key) // only a miss needs it
	if _, again := c.missed[h]; again {
		delete(c.missed, h)
		return nil, true
	}
	if len(c.missed) >= c.maxMissed {
		clear(c.missed)
	}
	c.missed[h] = struct{}{}
	return nil, false
}

// unsafeRemove removes key's record from the cache and returns it, or nil;
// c.mu must be held.
func (c *Cache) unsafeRemove(key target.Key) *Entry {
	e := c.m[key]
	if e != nil {
		delete(c.m, key)
		c.bytes -= e.size
	}
	return e
}

// Counts returns the hits and misses of take so far; 0, 0 for no cache.
func (c *Cache) Counts() (hits, misses uint64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// Put gives the cache rec, decoded from the stored value val of key;
// neither may be used by anyone else afterwards. It evicts arbitrary
// records to stay within its bound; a record larger than an eighth of the
// bound is not kept.
func (c *Cache) Put(key target.Key, val []byte, rec target.Record) {
	if c == nil {
		return
	}
	e := &Entry{Val: val, Rec: rec, size: int64(len(val)) + recordSize(&rec) + cacheEntryOverhead}
	if e.size > c.max/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[key]; old != nil {
		delete(c.m, key)
		c.bytes -= old.size
	}
	for k, old := range c.m { // a random start: arbitrary records
		if c.bytes+e.size <= c.max {
			break
		}
		delete(c.m, k)
		c.bytes -= old.size
	}
	c.m[key] = e
	c.bytes += e.size
}

// Drop forgets key's record.
func (c *Cache) Drop(key target.Key) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unsafeRemove(key)
}

// cacheEntryOverhead is what a cache entry costs beyond its record and
// value: the map slot, the key's header and the entry itself.
const cacheEntryOverhead = 160

// recordSize estimates the heap bytes that rec holds: its struct, the
// backing arrays of its slices, its strings and maps. It walks the record
// without allocating; the estimate is checked against the heap by
// BenchmarkRecordCache.
func recordSize(rec *target.Record) int64 {
	n := int64(unsafe.Sizeof(*rec))
	n += strs(rec.Key.Cluster, rec.Key.Namespace, rec.Key.Name, rec.Ref.APIVersion, rec.Ref.Kind, rec.Ref.Name, rec.ReceivedSpec, rec.Fleet)
	n += specSize(&rec.Spec)
	n += statusSize(&rec.Status)
	n += historySize(&rec.History)
	n += int64(cap(rec.Events)) * int64(unsafe.Sizeof(target.Event{}))
	for i := range rec.Events {
		n += strs(string(rec.Events[i].Kind), rec.Events[i].DecisionID, rec.Events[i].Message)
	}
	n += int64(cap(rec.Forecasts)) * int64(unsafe.Sizeof(target.MetricHistory{}))
	for i := range rec.Forecasts {
		n += strs(rec.Forecasts[i].Metric, rec.Forecasts[i].History)
	}
	if l := rec.Last; l != nil {
		n += int64(unsafe.Sizeof(*l)) + strs(l.ID, l.Decision.Error)
		n += statusSize(&l.Decision.Status) + statusSize(&l.Before) + historySize(&l.Decision.History)
		x := &l.Decision.Explanation
		n += int64(cap(x.Metrics)) * int64(unsafe.Sizeof(engine.MetricExplanation{}))
		for i := range x.Metrics {
			n += strs(x.Metrics[i].Name, string(x.Metrics[i].Outcome), x.Metrics[i].Err)
		}
		n += int64(cap(x.Steps)) * int64(unsafe.Sizeof(engine.Step{}))
		for i := range x.Steps {
			n += strs(string(x.Steps[i].Kind), x.Steps[i].Reason, x.Steps[i].Message)
		}
	}
	return n
}

// strs is the bytes of the strings ss.
func strs(ss ...string) int64 {
	var n int64
	for _, s := range ss {
		n += int64(len(s))
	}
	return n
}

func specSize(s *engine.Spec) int64 {
	n := int64(cap(s.Metrics)) * int64(unsafe.Sizeof(engine.MetricSpec{}))
	for i := range s.Metrics {
		m := &s.Metrics[i]
		n += strs(string(m.Type), m.Resource, m.Container, string(m.Target.Type)) + objectSize(&m.DescribedObject) + identifierSize(&m.Metric)
	}
	if b := s.Behavior; b != nil {
		n += int64(unsafe.Sizeof(*b))
		for _, r := range []*engine.Rules{&b.ScaleUp, &b.ScaleDown} {
			n += strs(string(r.SelectPolicy)) + int64(cap(r.Policies))*int64(unsafe.Sizeof(engine.Policy{}))
			for i := range r.Policies {
				n += strs(string(r.Policies[i].Type))
			}
		}
	}
	return n
}

func objectSize(o *engine.ObjectReference) int64 { return strs(o.APIVersion, o.Kind, o.Name) }

func identifierSize(m *engine.MetricIdentifier) int64 {
	n := strs(m.Name)
	if s := m.Selector; s != nil {
		n += int64(unsafe.Sizeof(*s))
		if len(s.MatchLabels) > 0 {
			n += 200 // a map's header and first bucket
			for k, v := range s.MatchLabels {
				n += 32 + strs(k, v)
			}
		}
		n += int64(cap(s.MatchExpressions)) * int64(unsafe.Sizeof(engine.LabelSelectorRequirement{}))
		for i := range s.MatchExpressions {
			r := &s.MatchExpressions[i]
			n += strs(r.Key, r.Operator) + int64(cap(r.Values))*int64(unsafe.Sizeof(""))
			n += strs(r.Values...)
		}
	}
	return n
}

func statusSize(s *engine.Status) int64 {
	n := int64(cap(s.CurrentMetrics)) * int64(unsafe.Sizeof(engine.MetricStatus{}))
	for i := range s.CurrentMetrics {
		m := &s.CurrentMetrics[i]
		n += strs(string(m.Type), m.Resource, m.Container) + objectSize(&m.DescribedObject) + identifierSize(&m.Metric)
		for _, q := range []*engine.Quantity{m.Value, m.AverageValue} {
			if q != nil {
				n += int64(unsafe.Sizeof(*q)) + strs(string(q.Format))
			}
		}
		if m.AverageUtilization != nil {
			n += 8
		}
	}
	n += int64(cap(s.Conditions)) * int64(unsafe.Sizeof(engine.Condition{}))
	for i := range s.Conditions {
		c := &s.Conditions[i]
		n += strs(string(c.Type), string(c.Status), c.Reason, c.Message)
	}
	return n
}

func historySize(h *engine.History) int64 {
	return int64(cap(h.Recommendations))*int64(unsafe.Sizeof(engine.Recommendation{})) +
		int64(cap(h.ScaleUpEvents)+cap(h.ScaleDownEvents))*int64(unsafe.Sizeof(engine.ScaleEvent{}))
}

// StoredCopy returns the record decoding rec's stored value gives —
// rec's key, its times in UTC without a monotonic reading, empty slices
// and maps nil, a last decision's status stored once a copy of the
// record's — built from rec, which is neither read from nor written to
// again by StoredCopy's result: the copy shares no slice, map or pointer
// with rec (strings, which cannot change, it does share). So the
// record an Update committed goes into the cache without being decoded
// or converted again, and fn's record, which fn may have filled from
// slices its caller keeps and which Update returns to its caller, stays
// theirs. rec must encode (record.Encode succeeds): a string that is not
// UTF-8 or a time out of range would come back other than stored.
// FuzzStoredCopy checks the result against decoding.
func StoredCopy(rec *target.Record) target.Record {
	same := record.SharesStatus(rec)
	c := newCopier(rec, same)
	// The plain fields (the key, strings, the settings) as they are; every
	// field that holds a slice, map, pointer or time replaced below.
	out := *rec
	out.Spec = copySpec(&rec.Spec)
	out.Status = c.status(&rec.Status)
	out.History = c.history(&rec.History)
	out.Events = copySlice(rec.Events, func(e *target.Event) target.Event { e2 := *e; e2.At = storedTime(e.At); return e2 })
	out.LastSeen = storedTime(rec.LastSeen)
	out.Forecasts = copySlice(rec.Forecasts, func(f *target.MetricHistory) target.MetricHistory { return *f })
	out.Last = nil
	if l := rec.Last; l != nil {
		last := *l // its plain fields as they are; the others replaced below
		last.At, last.Before = storedTime(l.At), c.status(&l.Before)
		out.Last = &last
		d := &l.Decision
		out.Last.Decision = engine.Decision{
			DesiredReplicas: d.DesiredReplicas, Rescale: d.Rescale, Error: d.Error,
			Explanation: engine.Explanation{
				CurrentReplicas: d.Explanation.CurrentReplicas,
				Metrics:         copySlice(d.Explanation.Metrics, func(m *engine.MetricExplanation) engine.MetricExplanation { return *m }),
				Winner:          d.Explanation.Winner,
				Proposal:        d.Explanation.Proposal,
				Steps:           copySlice(d.Explanation.Steps, func(s *engine.Step) engine.Step { return *s }),
			},
			History: c.history(&d.History),
		}
		if same {
			// Stored once: decoded as a copy of the record's status.
			out.Last.Decision.Status = c.status(&rec.Status)
		} else {
			out.Last.Decision.Status = c.status(&d.Status)
		}
	}
	return out
}

// copier hands out the slices and pointees of a StoredCopy of the
// record's statuses and histories — its most numerous small parts — from
// one array per element type, sized by counting them first: a handful of
// allocations instead of one per slice and per pointer. Each slice is
// capped at its length, so that appending to one never writes into the
// next.
type copier struct {
	conds   []engine.Condition
	metrics []engine.MetricStatus
	quants  []engine.Quantity
	utils   []int32
	recs    []engine.Recommendation
	events  []engine.ScaleEvent
}

// newCopier returns a copier with room for the statuses and histories
// StoredCopy copies of rec; same says the last decision's status is
// copied from the record's.
func newCopier(rec *target.Record, same bool) copier {
	var n struct{ conds, metrics, quants, utils, recs, events int }
	status := func(s *engine.Status) {
		n.conds += len(s.Conditions)
		n.metrics += len(s.CurrentMetrics)
		for i := range s.CurrentMetrics {
			m := &s.CurrentMetrics[i]
			n.quants += countNonNil(m.Value) + countNonNil(m.AverageValue)
			n.utils += countNonNil(m.AverageUtilization)
		}
	}
	history := func(h *engine.History) {
		n.recs += len(h.Recommendations)
		n.events += len(h.ScaleUpEvents) + len(h.ScaleDownEvents)
	}
	status(&rec.Status)
	history(&rec.History)
	if l := rec.Last; l != nil {
		status(&l.Before)
		history(&l.Decision.History)
		if same {
			status(&rec.Status)
		} else {
			status(&l.Decision.Status)
		}
	}
	return copier{
		conds: make([]engine.Condition, n.conds), metrics: make([]engine.MetricStatus, n.metrics),
		quants: make([]engine.Quantity, n.quants), utils: make([]int32, n.utils),
		recs: make([]engine.Recommendation, n.recs), events: make([]engine.ScaleEvent, n.events),
	}
}

// countNonNil is 1 for a pointer that is not nil.
func countNonNil[T any](p *T) int {
	if p == nil {
		return 0
	}
	return 1
}

// take returns the next n elements of *slab, capped at n; nil for none.
func take[T any](slab *[]T, n int) []T {
	if n == 0 {
		return nil
	}
	s := (*slab)[:n:n]
	*slab = (*slab)[n:]
	return s
}

// takeCopy returns a copy of *p from *slab, or nil.
func takeCopy[T any](slab *[]T, p *T) *T {
	if p == nil {
		return nil
	}
	v := &(*slab)[0]
	*slab = (*slab)[1:]
	*v = *p
	return v
}

func (c *copier) status(s *engine.Status) engine.Status {
	out := engine.Status{
		CurrentReplicas: s.CurrentReplicas,
		DesiredReplicas: s.DesiredReplicas,
		LastScaleTime:   storedTime(s.LastScaleTime),
		CurrentMetrics:  take(&c.metrics, len(s.CurrentMetrics)),
		Conditions:      take(&c.conds, len(s.Conditions)),
	}
	for i := range out.CurrentMetrics {
		m, src := &out.CurrentMetrics[i], &s.CurrentMetrics[i]
		*m = *src
		m.Metric = copyIdentifier(&src.Metric)
		m.Value, m.AverageValue = takeCopy(&c.quants, src.Value), takeCopy(&c.quants, src.AverageValue)
		m.AverageUtilization = takeCopy(&c.utils, src.AverageUtilization)
	}
	for i := range out.Conditions {
		out.Conditions[i] = s.Conditions[i]
		out.Conditions[i].LastTransitionTime = storedTime(s.Conditions[i].LastTransitionTime)
	}
	return out
}

func (c *copier) history(h *engine.History) engine.History {
	out := engine.History{
		Recommendations: take(&c.recs, len(h.Recommendations)),
		ScaleUpEvents:   take(&c.events, len(h.ScaleUpEvents)),
		ScaleDownEvents: take(&c.events, len(h.ScaleDownEvents)),
	}
	for i, r := range h.Recommendations {
		out.Recommendations[i] = engine.Recommendation{Replicas: r.Replicas, At: storedTime(r.At)}
	}
	for i, e := range h.ScaleUpEvents {
		out.ScaleUpEvents[i] = engine.ScaleEvent{Change: e.Change, At: storedTime(e.At), Outdated: e.Outdated}
	}
	for i, e := range h.ScaleDownEvents {
		out.ScaleDownEvents[i] = engine.ScaleEvent{Change: e.Change, At: storedTime(e.At), Outdated: e.Outdated}
	}
	return out
}

// storedTime is t as a stored time reads back: the zero time, or t's
// instant in UTC.
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.Unix(t.Unix(), int64(t.Nanosecond())).UTC()
}

// copySlice returns f of each element of s in a new slice; empty gives
// nil.
func copySlice[T any](s []T, f func(*T) T) []T {
	if len(s) == 0 {
		return nil
	}
	out := make([]T, len(s))
	for i := range s {
		out[i] = f(&s[i])
	}
	return out
}

func copySpec(s *engine.Spec) engine.Spec {
	out := engine.Spec{MinReplicas: s.MinReplicas, MaxReplicas: s.MaxReplicas}
	out.Metrics = copySlice(s.Metrics, func(m *engine.MetricSpec) engine.MetricSpec {
		m2 := *m
		m2.Metric = copyIdentifier(&m.Metric)
		return m2
	})
	if b := s.Behavior; b != nil {
		out.Behavior = &engine.Behavior{ScaleUp: copyRules(&b.ScaleUp), ScaleDown: copyRules(&b.ScaleDown)}
	}
	return out
}

func copyRules(r *engine.Rules) engine.Rules {
	out := *r
	out.Policies = copySlice(r.Policies, func(p *engine.Policy) engine.Policy { return *p })
	return out
}

func copyIdentifier(m *engine.MetricIdentifier) engine.MetricIdentifier {
	out := engine.MetricIdentifier{Name: m.Name}
	if s := m.Selector; s != nil {
		out.Selector = &engine.LabelSelector{
			MatchExpressions: copySlice(s.MatchExpressions, func(r *engine.LabelSelectorRequirement) engine.LabelSelectorRequirement {
				return engine.LabelSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: copySlice(r.Values, func(v *string) string { return *v })}
			}),
		}
		if len(s.MatchLabels) > 0 {
			out.Selector.MatchLabels = maps.Clone(s.MatchLabels)
		}
	}
	return out
}
