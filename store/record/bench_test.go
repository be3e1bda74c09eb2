package record_test

import (
	"testing"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// BenchmarkRecordCodec measures encoding and decoding a full record, and
// the share of it that is the last decision (lastDecision=no drops it);
// decodeForDecision decodes as Decide does. The names are those of the
// hand-written codec's benchmark before it (docs/benchmarks.md compares
// the two).
func BenchmarkRecordCodec(b *testing.B) {
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	for _, tc := range []struct {
		name string
		last bool
	}{{"lastDecision=yes", true}, {"lastDecision=no", false}} {
		rec := storetest.FullRecord(key)
		if !tc.last {
			rec.Last = nil
		}
		val, err := record.Encode(&rec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("encode/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := record.Encode(&rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(val)), "bytes")
		})
		for _, d := range []struct {
			name string
			fn   func(target.Key, []byte) (target.Record, error)
		}{
			{"decode", record.Decode},
			{"decodeForDecision", func(k target.Key, b []byte) (target.Record, error) { return record.DecodeFor(k, b, true) }},
		} {
			b.Run(d.name+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.fn(key, val); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkChangeCodec measures encoding the change feed's entry of a
// decision.
func BenchmarkChangeCodec(b *testing.B) {
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	rec := storetest.FullRecord(key)
	c := store.Change{Key: key, Decision: rec.Last}
	val, err := record.EncodeChange(&c)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := record.EncodeChange(&c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(val)), "bytes")
}
