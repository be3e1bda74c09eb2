package store_test

import (
	"testing"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// BenchmarkRecordCodec measures encoding and decoding a full record, and
// the share of it that is the last decision (lastDecision=no drops it);
// decodeForDecision decodes as an Update marked WithDecision does.
func BenchmarkRecordCodec(b *testing.B) {
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	for _, tc := range []struct {
		name string
		last bool
	}{{"lastDecision=yes", true}, {"lastDecision=no", false}} {
		rec := fullRecord(key)
		if !tc.last {
			rec.Last = nil
		}
		val, err := store.EncodeRecord(&rec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("encode/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := store.EncodeRecord(&rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(val)), "bytes")
		})
		b.Run("decode/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := store.DecodeRecord(key, val); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("decodeForDecision/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := store.DecodeRecordForDecision(key, val); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChangeCodec measures encoding the change feed's entry of a
// decision.
func BenchmarkChangeCodec(b *testing.B) {
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	rec := fullRecord(key)
	c := store.Change{Key: key, Kind: store.ChangeDecision, Decision: rec.Last}
	val, err := store.EncodeChange(&c)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.EncodeChange(&c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(val)), "bytes")
}
