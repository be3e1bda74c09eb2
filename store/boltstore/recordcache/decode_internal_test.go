package recordcache

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// FuzzDecodeRecord: any bytes decode to a record or a *store.CorruptError, never
// a panic, and a decoded record encodes again: the record cache's copy of
// it is the decoded one, and its decision's change-feed entry decodes.
func FuzzDecodeRecord(f *testing.F) {
	rec := target.Record{Key: target.Key{Name: "x"}, LastSeen: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Events: []target.Event{{Kind: target.EventApplied, From: 1, To: 2}}}
	seed, err := record.Encode(&rec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte("\x42\x02\x08\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k := target.Key{Cluster: "c", Namespace: "n", Name: "x"}
		got, err := record.Decode(k, b)
		if _, perr := record.DecodeFor(k, b, true); perr != nil {
			var ce *store.CorruptError
			if !errors.As(perr, &ce) || ce.Key != k || strings.Contains(perr.Error(), "panic while decoding") {
				t.Fatalf("decoding for a decision: %v is not a *store.CorruptError for %s, or a panic", perr, k)
			}
		}
		if err != nil {
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Key != k || !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("decodeRecord error %v is not a *store.CorruptError for %s", err, k)
			}
			return
		}
		if _, err := record.Encode(&got); err != nil {
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
			e := store.Change{Key: k, Decision: got.Last, Created: true}
			_, vals, err := record.EncodeWrite(&got, []store.Change{e}, record.Compress)
			if err != nil {
				t.Fatalf("a decision's change-feed entry: %v", err)
			}
			if back, err := record.DecodeChange(1, vals[0]); err != nil || back.Decision == nil || back.Decision.ID != got.Last.ID {
				t.Fatalf("a decision's change-feed entry decodes to %+v, %v", back, err)
			}
		}
	})
}

// sameAsCached checks what the record cache relies on: the record it
// keeps for rec (StoredCopy) is exactly (reflect.DeepEqual) what decoding
// rec's stored value gives, and shares nothing with the record it was
// made from: changing every part of that one in place afterwards leaves
// it as it was. rec is left alone (the copy is made from a decoded
// record equal to it).
func sameAsCached(k target.Key, rec *target.Record) error {
	val, err := record.Encode(rec)
	if err != nil {
		return fmt.Errorf("a decoded record does not encode: %w", err)
	}
	decoded, err := record.Decode(k, val)
	if err != nil {
		return fmt.Errorf("an encoded record does not decode: %w", err)
	}
	source, _ := record.Decode(k, val)
	return sameStoredCopy(decoded, &source)
}

// sameStoredCopy checks that StoredCopy(rec) is exactly decoded, what
// decoding rec's stored value gives, and that changing every part of rec
// in place afterwards leaves the copy as it was. rec is changed.
func sameStoredCopy(decoded target.Record, rec *target.Record) error {
	r := *rec
	r.Key = decoded.Key
	cached := StoredCopy(&r)
	// As reflect.DeepEqual, but NaN equals NaN: times must be the same
	// values, location and monotonic reading included.
	strict := gocmp.Options{cmpopts.EquateNaNs(), gocmp.Comparer(func(a, b time.Time) bool { return a == b })}
	if diff := gocmp.Diff(decoded, cached, strict); diff != "" {
		return fmt.Errorf("the cache's record is not the decoded one (-decoded +cached):\n%s", diff)
	}
	changeInPlace(reflect.ValueOf(rec).Elem())
	if diff := gocmp.Diff(decoded, cached, strict); diff != "" {
		return fmt.Errorf("the cache's record shares memory with the record written: changing the latter changed it (-decoded +cached):\n%s", diff)
	}
	return nil
}

// changeInPlace changes every value v holds, following slices (their
// elements, not the slices), pointers and maps (their values, and a key
// added), as a caller changing a record it was given might; nothing of v
// is replaced by a new slice, map or pointer.
func changeInPlace(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			changeInPlace(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			changeInPlace(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			v.SetMapIndex(k, reflect.ValueOf("changed").Convert(v.Type().Elem()))
		}
		v.SetMapIndex(reflect.ValueOf("changed").Convert(v.Type().Key()), reflect.ValueOf("changed").Convert(v.Type().Elem()))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 1)))
			return
		}
		for i := range v.NumField() {
			changeInPlace(v.Field(i))
		}
	case reflect.String:
		v.SetString(v.String() + "+")
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	}
}

// sameForDecision checks that decoding b for a decision gives whole, the
// record decodeRecord gives, but for the last decision's ID and At.
func sameForDecision(k target.Key, b []byte, whole target.Record) error {
	part, err := record.DecodeFor(k, b, true)
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
