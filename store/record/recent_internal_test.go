package record

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// decodeBytesForDecision is DecodeForDecision of val from its bytes,
// without recent.
func decodeBytesForDecision(t *testing.T, k target.Key, val []byte) target.Record {
	t.Helper()
	rec, err := decode(k, val, true)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestRecentDecodesAsTheBytes: a record DecodeForDecision converts from
// the message it was encoded from (recent) is the one its bytes decode
// to, for records with and without a last decision, and a value that is
// not the one kept for its key (the key's record written since, or a
// value of another store) is decoded from its bytes.
func TestRecentDecodesAsTheBytes(t *testing.T) {
	key := target.Key{Cluster: "c", Namespace: "n", Name: "recent-bytes"}
	full := storetest.FullRecord(key)
	none := storetest.FullRecord(key)
	none.Last = nil
	for _, tc := range []struct {
		name string
		rec  target.Record
	}{{"full record", full}, {"no last decision", none}, {"empty", target.Record{Key: key}}} {
		t.Run(tc.name, func(t *testing.T) {
			val, err := Encode(&tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			if recent.get(key, val) == nil {
				t.Fatal("the value just encoded is not kept")
			}
			got, err := DecodeForDecision(key, val)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decodeBytesForDecision(t, key, val), got); diff != "" {
				t.Errorf("converted from the kept message (-bytes +kept):\n%s", diff)
			}
		})
	}

	older, err := Encode(&full)
	if err != nil {
		t.Fatal(err)
	}
	next := storetest.FullRecord(key)
	next.Spec.MaxReplicas++
	if _, err := Encode(&next); err != nil {
		t.Fatal(err)
	}
	if recent.get(key, older) != nil {
		t.Fatal("a value is kept for its key after the key's next write")
	}
	got, err := DecodeForDecision(key, older)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.MaxReplicas != full.Spec.MaxReplicas {
		t.Errorf("the older value decodes with MaxReplicas %d, want its own %d", got.Spec.MaxReplicas, full.Spec.MaxReplicas)
	}
}

// TestRecentSharesNothing: the message kept for a record shares nothing
// that changes with the record it was encoded from or with the records
// converted from it (maps, slices, pointers): changing either does not
// change what the next decode returns.
func TestRecentSharesNothing(t *testing.T) {
	key := target.Key{Cluster: "c", Namespace: "n", Name: "recent-shares"}
	rec := storetest.FullRecord(key)
	val, err := Encode(&rec)
	if err != nil {
		t.Fatal(err)
	}
	want := decodeBytesForDecision(t, key, val)
	change := func(r *target.Record) {
		for i := range r.Spec.Metrics {
			m := &r.Spec.Metrics[i]
			if sel := m.Metric.Selector; sel != nil {
				sel.MatchLabels["app"] = "changed"
				for j := range sel.MatchExpressions {
					sel.MatchExpressions[j].Values[0] = "changed"
				}
			}
		}
		for i := range r.Status.CurrentMetrics {
			m := &r.Status.CurrentMetrics[i]
			if m.AverageUtilization != nil {
				*m.AverageUtilization = -1
			}
			if sel := m.Metric.Selector; sel != nil {
				sel.MatchLabels["app"] = "changed"
				for j := range sel.MatchExpressions {
					sel.MatchExpressions[j].Values[0] = "changed"
				}
			}
			if m.Value != nil {
				m.Value.Milli = -1
			}
		}
		r.Status.Conditions[0].Reason = "changed"
		r.History.Recommendations[0].Replicas = -1
		r.Events[0].Message = "changed"
	}
	change(&rec) // the record it was encoded from
	for range 2 {
		got, err := DecodeForDecision(key, val)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("decoded after a change to a record (-bytes +kept):\n%s", diff)
		}
		change(&got) // a record converted from it
	}
	if recent.get(key, val) == nil {
		t.Fatal("the value is no longer kept: the test did not use the kept message")
	}
}

// TestRecentIsBounded: recent keeps at most maxRecent records, the ones
// written last among them.
func TestRecentIsBounded(t *testing.T) {
	var last []byte
	var lastKey target.Key
	for i := range maxRecent + 100 {
		lastKey = target.Key{Cluster: "c", Namespace: "bounded", Name: fmt.Sprint("t-", i)}
		rec := target.Record{Key: lastKey, Ref: target.Ref{Name: fmt.Sprint(i)}}
		val, err := Encode(&rec)
		if err != nil {
			t.Fatal(err)
		}
		last = val
	}
	recent.mu.Lock()
	n := len(recent.byKey)
	recent.mu.Unlock()
	if n > maxRecent {
		t.Errorf("%d records kept, want at most %d", n, maxRecent)
	}
	if recent.get(lastKey, last) == nil {
		t.Error("the record written last is not kept")
	}
}
