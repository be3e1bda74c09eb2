package recordcache

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// cacheRecord is a record of a two-metric target with a short history, as
// the server keeps one.
func cacheRecord(i int) target.Record {
	rec := storetest.FullRecord(target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("web-", i)})
	rec.Spec = engine.Spec{MinReplicas: 1, MaxReplicas: 20, Metrics: []engine.MetricSpec{
		{Type: engine.ResourceSource, Resource: "cpu", Target: engine.Target{Type: engine.UtilizationTarget, Utilization: 70}},
		{Type: engine.PodsSource, Metric: engine.MetricIdentifier{Name: "requests_per_second"}, Target: engine.Target{Type: engine.AverageValueTarget, Milli: 100_000}},
	}}
	for s := range 20 {
		rec.History.Recommendations = append(rec.History.Recommendations, engine.Recommendation{Replicas: int32(s % 5), At: rec.LastSeen.Add(time.Duration(s) * 15 * time.Second)})
	}
	rec.Last.Decision.Explanation = engine.Explanation{CurrentReplicas: 3, Proposal: 4, Metrics: []engine.MetricExplanation{
		{Name: "cpu resource utilization (percentage of request)", Outcome: engine.OutcomeScaled, Proposal: 4, Current: 90, Target: 70, Ratio: 1.28},
		{Name: "pods metric requests_per_second", Outcome: engine.OutcomeWithinTolerance, Proposal: 3, Current: 100_000, Target: 100_000, Ratio: 1},
	}}
	return rec
}

// cached returns rec's stored value and the cache's record for it.
func cached(t testing.TB, rec target.Record) ([]byte, target.Record) {
	val, err := record.Encode(&rec)
	if err != nil {
		t.Fatal(err)
	}
	return val, StoredCopy(&rec)
}

// TestRecordCacheStaysWithinItsBound: the cache counts what it holds,
// never holds more than its bound, gives each record once, and refuses a
// record too large for it.
func TestRecordCacheStaysWithinItsBound(t *testing.T) {
	val, rec := cached(t, cacheRecord(0))
	size := int64(len(val)) + recordSize(&rec) + cacheEntryOverhead
	c := New(10 * size)
	if New(0) != nil || New(-1) != nil {
		t.Fatal("a cache of no bytes is not disabled")
	}
	var keys []target.Key
	for i := range 50 {
		val, rec := cached(t, cacheRecord(i))
		keys = append(keys, rec.Key)
		c.Put(rec.Key, val, rec)
		c.Put(rec.Key, val, rec) // a second put replaces the first
		var sum int64
		for _, e := range c.m {
			sum += e.size
		}
		if c.bytes != sum || c.bytes > c.max || len(c.m) > 10 || (i >= 10 && len(c.m) < 9) {
			t.Fatalf("after %d puts: %d entries counted as %d bytes, hold %d, bound %d", i+1, len(c.m), c.bytes, sum, c.max)
		}
		if c.m[rec.Key] == nil {
			t.Fatalf("put %d: the record just put is not kept", i)
		}
	}
	n, kept := 0, len(c.m)
	for _, k := range keys {
		if e, _ := c.Take(k); e != nil {
			n++
			if e.Rec.Key != k {
				t.Errorf("take(%s) gave the record of %s", k, e.Rec.Key)
			}
			if e, _ := c.Take(k); e != nil {
				t.Errorf("take(%s) gave a record twice", k)
			}
		}
	}
	if n != kept || c.bytes != 0 || len(c.m) != 0 {
		t.Errorf("took %d records, leaving %d bytes in %d entries; want %d, 0, 0", n, c.bytes, len(c.m), kept)
	}
	small := New(4 * size)
	small.Put(rec.Key, val, rec)
	if e, _ := small.Take(rec.Key); e != nil {
		t.Error("a record larger than an eighth of the bound was kept")
	}
	var disabled *Cache
	disabled.Put(rec.Key, val, rec)
	if e, admit := disabled.Take(rec.Key); e != nil || admit {
		t.Error("a disabled cache gave a record or admitted one")
	}
}

// TestRecordCacheAdmission: take admits the next record of a key after a
// hit or after the key's second miss in a row of at most maxMissed others;
// a key missed once, or whose earlier miss was forgotten (the missed keys
// are emptied once maxMissed are held), is not admitted.
func TestRecordCacheAdmission(t *testing.T) {
	c := New(64 * missedKeyBytes) // remembers 64 missed keys
	if c.maxMissed != 64 {
		t.Fatalf("maxMissed %d, want 64", c.maxMissed)
	}
	key := func(i int) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("t", i)} }
	take := func(k target.Key) (hit, admit bool) {
		e, admit := c.Take(k)
		return e != nil, admit
	}
	steps := []struct {
		name      string
		do        func()
		key       int
		hit, want bool
	}{
		{name: "first miss", key: 1, want: false},
		{name: "second miss", key: 1, want: true},
		{name: "a miss after an admission starts over", key: 1, want: false},
		{name: "a miss of another key", key: 2, want: false},
		{name: "after a put: a hit", do: func() { val, rec := cached(t, cacheRecord(3)); rec.Key = key(3); c.Put(rec.Key, val, rec) }, key: 3, hit: true, want: true},
		{name: "sixty-three more keys missed once", do: func() {
			for i := 100; i < 163; i++ {
				c.Take(key(i))
			}
		}, key: 2, want: false}, // key 2 was forgotten when the 65th miss emptied the set
		{name: "remembered again", key: 2, want: true},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		hit, admit := take(key(s.key))
		if hit != s.hit || admit != s.want {
			t.Errorf("%s: hit %v, admit %v; want %v, %v", s.name, hit, admit, s.hit, s.want)
		}
	}
}

// BenchmarkRecordCache measures what the cache costs per record of
// cacheRecord: the copy an Update makes for it after its commit (copy:
// ns/op, allocs), decoding the record as a miss does instead (decode),
// the heap a kept record holds (heap-B/record, measured) and what the
// cache counts for it (counted-B/record).
func BenchmarkRecordCache(b *testing.B) {
	rec := cacheRecord(0)
	val, err := record.Encode(&rec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			StoredCopy(&rec)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := record.DecodeFor(rec.Key, val, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("heap", func(b *testing.B) {
		const n = 2000
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			c := New(1 << 40)
			for i := range n {
				r := cacheRecord(i)
				v, _ := record.Encode(&r)
				c.Put(r.Key, v, StoredCopy(&r))
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/record")
			b.ReportMetric(float64(c.bytes)/n, "counted-B/record")
			runtime.KeepAlive(c)
		}
	})
}

// TestStoredCopySlicesDoNotOverlap: the slices of a StoredCopy share
// arrays (copier) but not room: appending to any of them leaves every
// other part of the copy as it was.
func TestStoredCopySlicesDoNotOverlap(t *testing.T) {
	for _, rec := range []target.Record{cacheRecord(1), storetest.FullRecord(target.Key{Name: "full"})} {
		cp, want := StoredCopy(&rec), StoredCopy(&rec)
		var appendToEach func(v reflect.Value)
		appendToEach = func(v reflect.Value) {
			switch v.Kind() {
			case reflect.Pointer:
				if !v.IsNil() {
					appendToEach(v.Elem())
				}
			case reflect.Slice:
				for i := range v.Len() {
					appendToEach(v.Index(i))
				}
				_ = reflect.Append(v, reflect.New(v.Type().Elem()).Elem()) // writes past the end when there is room
			case reflect.Struct:
				for i := range v.NumField() {
					if v.Type().Field(i).IsExported() {
						appendToEach(v.Field(i))
					}
				}
			}
		}
		appendToEach(reflect.ValueOf(&cp).Elem())
		if !reflect.DeepEqual(cp, want) {
			t.Errorf("appending to a slice of a stored copy changed another part of it:\n%s", cmp.Diff(want, cp))
		}
	}
}

// TestRecordSizeCountsOpaqueFields: the spec as received and a fleet's
// state (tens of KB for a fleet of hundreds of pods) count in a cached
// record's size, so the cache's byte bound holds for fleets too.
func TestRecordSizeCountsOpaqueFields(t *testing.T) {
	base := recordSize(&target.Record{})
	for _, tc := range []struct {
		name string
		rec  target.Record
	}{
		{"received spec", target.Record{ReceivedSpec: strings.Repeat("s", 4096)}},
		{"fleet state", target.Record{Fleet: strings.Repeat("f", 4096)}},
	} {
		if got := recordSize(&tc.rec) - base; got < 4096 {
			t.Errorf("%s of 4096 bytes adds %d bytes to the record's size", tc.name, got)
		}
	}
}
