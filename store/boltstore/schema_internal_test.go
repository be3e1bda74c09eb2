package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	bolt "go.etcd.io/bbolt"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

func TestRecordKeyTooLong(t *testing.T) {
	_, err := recordKey(target.Key{Cluster: "c", Namespace: "n", Name: strings.Repeat("x", record.MaxKeyLength)})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("recordKey of a huge name: %v, want store.ErrInvalid", err)
	}
}

// FuzzDecodeRecord: any bytes decode to a record or a *store.CorruptError, never
// a panic, and a decoded record encodes again: the record cache's copy of
// it is the decoded one, and its decision's change-feed entry decodes.
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
// keeps for rec (storedCopy) is exactly (reflect.DeepEqual) what decoding
// rec's stored value gives, and shares nothing with the record it was
// made from: changing every part of that one in place afterwards leaves
// it as it was. rec is left alone (the copy is made from a decoded
// record equal to it).
func sameAsCached(k target.Key, rec *target.Record) error {
	val, err := encodeRecord(rec)
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

// sameStoredCopy checks that storedCopy(rec) is exactly decoded, what
// decoding rec's stored value gives, and that changing every part of rec
// in place afterwards leaves the copy as it was. rec is changed.
func sameStoredCopy(decoded target.Record, rec *target.Record) error {
	r := *rec
	r.Key = decoded.Key
	cached := storedCopy(&r)
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
		if err := b.write(ctx, true, w, nil); err != nil {
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

// TestLayoutDoc: the layout doc.go describes ("On-disk layout") names the
// schema version, every bucket and every meta key that schema.go defines,
// and nothing else.
func TestLayoutDoc(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	start := strings.Index(doc, "// # On-disk layout")
	if start < 0 {
		t.Fatal(`doc.go has no "On-disk layout" section`)
	}
	section := doc[start:]
	if end := strings.Index(section, "\n// A record key is"); end > 0 {
		section = section[:end]
	}
	if want := fmt.Sprintf("(schema version %d)", SchemaVersion); !strings.Contains(section, want) {
		t.Errorf("the layout's heading does not say %s", want)
	}
	var buckets, metaKeys []string
	inMeta := false
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "//\t    "): // a key of the bucket above
			if !inMeta {
				continue
			}
			rest := strings.TrimPrefix(line, "//\t    ")
			if k, _, ok := strings.Cut(rest, " → "); ok && strings.HasPrefix(k, `"`) {
				metaKeys = append(metaKeys, strings.Trim(k, `"`))
			} else {
				t.Errorf("a meta line without a quoted key: %q", rest)
			}
		case strings.HasPrefix(line, "//\t"): // a bucket
			name := strings.TrimPrefix(line, "//\t")
			buckets = append(buckets, name)
			inMeta = name == string(bucketMeta)
		}
	}
	names := func(bs [][]byte) []string {
		var s []string
		for _, b := range bs {
			s = append(s, string(b))
		}
		return s
	}
	if diff := gocmp.Diff(names(allBuckets), buckets); diff != "" {
		t.Errorf("buckets: schema.go (-) against doc.go (+):\n%s", diff)
	}
	if diff := gocmp.Diff(names(allMetaKeys), metaKeys); diff != "" {
		t.Errorf("meta keys: schema.go (-) against doc.go (+):\n%s", diff)
	}
	if want := fmt.Sprintf(`"schema_version" → uint64, 8 bytes big-endian (%d)`, SchemaVersion); !strings.Contains(section, want) {
		t.Errorf("the layout does not show the stored version as %s", want)
	}
}

// TestMetaKeysWritten: a store opened, written and closed holds exactly
// the meta keys of allMetaKeys.
func TestMetaKeysWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(context.Background(), target.Key{Cluster: "c", Namespace: "n", Name: "a"}, func(r *target.Record) error {
		r.LastSeen = time.Unix(1790000000, 0).UTC()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got, want []string
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).ForEach(func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range allMetaKeys {
		want = append(want, string(k))
	}
	slices.Sort(want)
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("meta keys in the file (-want +got):\n%s", diff)
	}
}
