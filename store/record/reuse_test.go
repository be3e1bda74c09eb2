package record_test

import (
	"bytes"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// TestEncodeReusesMessagesAlike encodes records of many shapes one after
// another, with and without a feed entry of the last decision: a write's
// storage messages, lists and times are reused by the next write
// (encoder), so a message that kept anything of an earlier record shows
// as other bytes for the same record or a record that decodes to
// another, and a message that shared a list of the caller's record as
// that record changed under a later write.
func TestEncodeReusesMessagesAlike(t *testing.T) {
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	full := storetest.FullRecord(key)
	// One label: a map's entries are marshalled in no set order, and the
	// bytes are compared. FullRecord's metrics share one selector.
	delete(full.Spec.Metrics[0].Metric.Selector.MatchLabels, "tier")
	want, err := record.Encode(&full)
	if err != nil {
		t.Fatal(err)
	}
	gen := func(seed int) target.Record {
		b := make([]byte, 2048)
		for i := range b {
			b[i] = byte(i*(seed+5)+seed*seed) & 0x7f // ASCII: strings are UTF-8
		}
		return (&recordGen{b: b}).record()
	}
	var recs, twins []target.Record // twins: the same records, never encoded
	for seed := range 64 {
		if rec := gen(seed); func() bool { _, err := record.Encode(&rec); return err == nil }() {
			recs, twins = append(recs, rec), append(twins, gen(seed))
		}
	}
	if len(recs) < 16 {
		t.Fatalf("only %d of 64 generated records encode", len(recs))
	}
	same := gocmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateNaNs(), gocmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })}
	for round := range 3 {
		for i := range recs {
			if round == 1 {
				i = len(recs) - 1 - i // shapes in another order
			}
			var entries []store.Change
			if recs[i].Last != nil && i%2 == 0 {
				entries = []store.Change{{Key: recs[i].Key, Kind: store.ChangeDecision, Decision: recs[i].Last}}
			}
			val, _, err := record.EncodeWrite(&recs[i], entries, record.Compress)
			if err != nil {
				t.Fatalf("round %d, record %d: %v", round, i, err)
			}
			decoded, err := record.Decode(recs[i].Key, val)
			if err != nil {
				t.Fatalf("round %d, record %d: %v", round, i, err)
			}
			if diff := gocmp.Diff(twins[i], decoded, same); diff != "" {
				t.Fatalf("round %d, record %d decodes to another (-encoded +decoded):\n%s", round, i, diff)
			}
			got, err := record.Encode(&full)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d, after record %d: the full record encodes to other bytes", round, i)
			}
		}
	}
	for i := range recs {
		if diff := gocmp.Diff(twins[i], recs[i], cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("record %d changed by later writes (-before +after):\n%s", i, diff)
		}
	}
}
