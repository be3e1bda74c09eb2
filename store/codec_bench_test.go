package store_test

import (
	"testing"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// BenchmarkRecordCodec measures encoding and decoding a full record, and
// the share of it that is the last decision (lastDecision=no drops it);
// decodeForDecision decodes as Decide does; the
// …Generated decodes go through the generated message, as the store did
// before the record reader (codec_read.go), the baseline in the same run.
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
		for _, d := range []struct {
			name string
			fn   func(target.Key, []byte) (target.Record, error)
		}{
			{"decode", store.DecodeRecord},
			{"decodeForDecision", store.DecodeRecordForDecision},
			{"decodeGenerated", func(k target.Key, b []byte) (target.Record, error) { return store.DecodeRecordGenerated(k, b, false) }},
			{"decodeForDecisionGenerated", func(k target.Key, b []byte) (target.Record, error) { return store.DecodeRecordGenerated(k, b, true) }},
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
