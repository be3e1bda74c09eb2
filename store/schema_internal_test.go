package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/target"
)

func TestRecordKeyOrderAndPrefixes(t *testing.T) {
	keys := []target.Key{
		{Cluster: "", Namespace: "", Name: ""},
		{Cluster: "a", Namespace: "", Name: "x"},
		{Cluster: "a", Namespace: "n", Name: ""},
		{Cluster: "a", Namespace: "n", Name: "x"},
		{Cluster: "a", Namespace: "n", Name: "x\x00"},
		{Cluster: "a", Namespace: "n", Name: "x\x00\x01"},
		{Cluster: "a", Namespace: "n", Name: "x\x01"},
		{Cluster: "a", Namespace: "n\x00", Name: "a"},
		{Cluster: "a", Namespace: "na", Name: ""},
		{Cluster: "a\x00", Namespace: "", Name: ""},
		{Cluster: "a\xff", Namespace: "\xff", Name: "\xff\x00"},
		{Cluster: "ab", Namespace: "n", Name: "x"},
		{Cluster: "b", Namespace: "a", Name: "a"},
	}
	byTuple := slices.Clone(keys)
	slices.SortFunc(byTuple, func(x, y target.Key) int {
		return cmp.Or(strings.Compare(x.Cluster, y.Cluster), strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
	})
	encoded := make(map[target.Key][]byte)
	for _, k := range keys {
		b, err := recordKey(k)
		if err != nil {
			t.Fatalf("recordKey(%q): %v", k, err)
		}
		encoded[k] = b
		got, err := parseRecordKey(b)
		if err != nil || got != k {
			t.Errorf("parseRecordKey(recordKey(%q)) = %q, %v", k, got, err)
		}
	}
	byBytes := slices.Clone(keys)
	slices.SortFunc(byBytes, func(x, y target.Key) int { return bytes.Compare(encoded[x], encoded[y]) })
	if diff := gocmp.Diff(byTuple, byBytes); diff != "" {
		t.Errorf("byte order differs from (cluster, namespace, name) order (-tuple +bytes):\n%s", diff)
	}
	for _, k := range keys {
		for _, other := range keys {
			if got, want := bytes.HasPrefix(encoded[other], clusterPrefix(k.Cluster)), other.Cluster == k.Cluster; got != want {
				t.Errorf("cluster prefix of %q matches %q: %v, want %v", k.Cluster, other, got, want)
			}
			sameNS := other.Cluster == k.Cluster && other.Namespace == k.Namespace
			if got := bytes.HasPrefix(encoded[other], namespacePrefix(k.Cluster, k.Namespace)); got != sameNS {
				t.Errorf("namespace prefix of %q/%q matches %q: %v, want %v", k.Cluster, k.Namespace, other, got, sameNS)
			}
		}
	}
}

func TestRecordKeyTooLong(t *testing.T) {
	_, err := recordKey(target.Key{Cluster: "c", Namespace: "n", Name: strings.Repeat("x", maxRecordKeyLength)})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("recordKey of a huge name: %v, want ErrInvalid", err)
	}
}

func TestParseRecordKeyRejectsMalformed(t *testing.T) {
	for _, b := range []string{"", "a", "a\x00\x01b\x00\x01", "a\x00\x01b\x00\x01c\x00\x01d", "a\x00\x02b\x00\x01c\x00\x01", "a\x00"} {
		if k, err := parseRecordKey([]byte(b)); err == nil {
			t.Errorf("parseRecordKey(%q) = %q, want an error", b, k)
		}
	}
}

func TestOrderedTime(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Unix(0, 0),
		time.Unix(0, 1),
		time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for i := 1; i < len(times); i++ {
		if a, b := orderedTime(times[i-1]), orderedTime(times[i]); a > b {
			t.Errorf("orderedTime(%v) = %x > orderedTime(%v) = %x", times[i-1], a, times[i], b)
		}
	}
}

// FuzzDecodeRecord: any bytes decode to a record or a *CorruptError, never
// a panic, and a decoded record encodes again: the record cache's copy of
// it is the decoded one, and its decision's change-feed entry assembled
// from its bytes is the marshalled one.
func FuzzDecodeRecord(f *testing.F) {
	rec := target.Record{Key: target.Key{Name: "x"}, LastSeen: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Events: []target.Event{{Kind: target.EventApplied, From: 1, To: 2}}}
	seed, err := encodeRecord(&rec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte("\x42\x02\x08\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k := target.Key{Cluster: "c", Namespace: "n", Name: "x"}
		got, err := decodeRecord(k, b)
		if _, perr := decodeRecordFor(k, b, true); perr != nil {
			var ce *CorruptError
			if !errors.As(perr, &ce) || ce.Key != k || strings.Contains(perr.Error(), "panic while decoding") {
				t.Fatalf("decoding for a decision: %v is not a *CorruptError for %s, or a panic", perr, k)
			}
		}
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Key != k || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeRecord error %v is not a *CorruptError for %s", err, k)
			}
			return
		}
		if _, err := encodeRecord(&got); err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		// Decoding for a decision reads the same bytes, but for the last
		// decision's ID and At.
		if err := sameForDecision(k, b, got); err != nil {
			t.Fatal(err)
		}
		if err := sameAsCached(k, &got); err != nil {
			t.Fatal(err)
		}
		if got.Last != nil {
			if err := sameDecisionChange(got, true); err != nil {
				t.Fatalf("a decision's change-feed entry: %v", err)
			}
		}
	})
}

// sameAsCached checks what the record cache relies on: the record it
// keeps for rec, converted from rec's storage message, is exactly
// (reflect.DeepEqual) what decoding rec's stored value gives, and shares
// no map with rec.
func sameAsCached(k target.Key, rec *target.Record) error {
	m, err := recordMessage(rec)
	if err != nil {
		return fmt.Errorf("a decoded record does not encode: %w", err)
	}
	val, err := marshalRecord(k, m, compressValue)
	if err != nil {
		return fmt.Errorf("a decoded record does not marshal: %w", err)
	}
	decoded, err := decodeRecord(k, val)
	if err != nil {
		return fmt.Errorf("an encoded record does not decode: %w", err)
	}
	if got, want := needsOrder(m), hasMapOfMany(m.ProtoReflect()); got != want {
		return fmt.Errorf("needsOrder = %v, but the message has a map of more than one entry: %v", got, want)
	}
	cached, err := recordFromMessage(k, m, nil, true)
	if err != nil {
		return fmt.Errorf("the cache's conversion fails: %w", err)
	}
	// As reflect.DeepEqual, but NaN equals NaN: times must be the same
	// values, location and monotonic reading included.
	strict := gocmp.Options{cmpopts.EquateNaNs(), gocmp.Comparer(func(a, b time.Time) bool { return a == b })}
	if diff := gocmp.Diff(decoded, cached, strict); diff != "" {
		return fmt.Errorf("the cache's record is not the decoded one (-decoded +cached):\n%s", diff)
	}
	for i := range cached.Spec.Metrics {
		if s := cached.Spec.Metrics[i].Metric.Selector; s != nil && len(s.MatchLabels) > 0 &&
			reflect.ValueOf(s.MatchLabels).UnsafePointer() == reflect.ValueOf(rec.Spec.Metrics[i].Metric.Selector.MatchLabels).UnsafePointer() {
			return errors.New("the cache's record shares a map with the record written")
		}
	}
	return nil
}

// sameForDecision checks that decoding b for a decision gives whole, the
// record decodeRecord gives, but for the last decision's ID and At.
func sameForDecision(k target.Key, b []byte, whole target.Record) error {
	part, err := decodeRecordFor(k, b, true)
	if err != nil {
		return fmt.Errorf("decodeRecord accepts what decoding for a decision rejects: %w", err)
	}
	if (whole.Last == nil) != (part.Last == nil) || (whole.Last != nil && (whole.Last.ID != part.Last.ID || !whole.Last.At.Equal(part.Last.At))) {
		return fmt.Errorf("last decision decoded for a decision %+v, whole %+v", part.Last, whole.Last)
	}
	whole.Last, part.Last = nil, nil
	if diff := gocmp.Diff(whole, part, cmpopts.EquateEmpty(), cmpopts.EquateNaNs()); diff != "" {
		return fmt.Errorf("decoded for a decision (-whole +for a decision):\n%s", diff)
	}
	return nil
}

// TestUpdateRetriesAConflict: when the record changes between an update's
// read and its write (here: another write slipped in), the write is a
// conflict, the update runs its function again on the new record, and
// both changes are kept.
func TestUpdateRetriesAConflict(t *testing.T) {
	b, err := Open(filepath.Join(t.TempDir(), "setpoint.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	rk, _ := recordKey(key)
	add := func(n int32) func(*target.Record) error {
		return func(r *target.Record) error {
			r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: n, At: time.Unix(int64(n), 0).UTC()})
			r.LastSeen = time.Unix(int64(n), 0).UTC()
			return nil
		}
	}
	runs := 0
	slipped := false
	b.testHookAfterPrepare = func() {
		if slipped {
			return
		}
		slipped = true
		w, err := b.prepare(key, rk, false, add(2))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.write(ctx, true, w.apply); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := b.Update(ctx, key, func(r *target.Record) error { runs++; return add(1)(r) })
	if err != nil {
		t.Fatal(err)
	}
	if runs != 2 {
		t.Errorf("the function ran %d times, want 2 (once more after the conflict)", runs)
	}
	var got []int32
	for _, r := range rec.History.Recommendations {
		got = append(got, r.Replicas)
	}
	if !slices.Equal(got, []int32{2, 1}) {
		t.Errorf("recommendations %v, want [2 1]: the slipped-in write, then the retried one", got)
	}
	stored, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.History.Recommendations) != 2 {
		t.Errorf("stored %d recommendations, want 2", len(stored.History.Recommendations))
	}
}

// hasMapOfMany reports whether m, or a message in it, has a map field of
// more than one entry: what needsOrder must find, found by reflection.
func hasMapOfMany(m protoreflect.Message) bool {
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			found = v.Map().Len() > 1 || (fd.MapValue().Message() != nil && mapHasMapOfMany(v.Map()))
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && !found; i++ {
				found = hasMapOfMany(v.List().Get(i).Message())
			}
		case fd.Message() != nil:
			found = hasMapOfMany(v.Message())
		}
		return !found
	})
	return found
}

// mapHasMapOfMany is hasMapOfMany for the message values of a map.
func mapHasMapOfMany(mp protoreflect.Map) bool {
	found := false
	mp.Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
		found = hasMapOfMany(v.Message())
		return !found
	})
	return found
}
