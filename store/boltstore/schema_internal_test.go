package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore/schema"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

func TestRecordKeyTooLong(t *testing.T) {
	_, err := schema.RecordKey(target.Key{Cluster: "c", Namespace: "n", Name: strings.Repeat("x", record.MaxKeyLength)})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("schema.RecordKey of a huge name: %v, want store.ErrInvalid", err)
	}
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
	rk, _ := schema.RecordKey(key)
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
// schema version, every bucket and every meta key that package schema defines,
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
	if want := fmt.Sprintf("(schema version %d)", schema.Version); !strings.Contains(section, want) {
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
			inMeta = name == string(schema.Meta)
		}
	}
	names := func(bs [][]byte) []string {
		var s []string
		for _, b := range bs {
			s = append(s, string(b))
		}
		return s
	}
	if diff := gocmp.Diff(names(schema.Buckets), buckets); diff != "" {
		t.Errorf("buckets: package schema (-) against doc.go (+):\n%s", diff)
	}
	if diff := gocmp.Diff(names(schema.MetaKeys), metaKeys); diff != "" {
		t.Errorf("meta keys: package schema (-) against doc.go (+):\n%s", diff)
	}
	if want := fmt.Sprintf(`"schema_version" → uint64, 8 bytes big-endian (%d)`, schema.Version); !strings.Contains(section, want) {
		t.Errorf("the layout does not show the stored version as %s", want)
	}
}

// TestMetaKeysWritten: a store opened, written and closed holds exactly
// the meta keys of schema.MetaKeys.
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
		return tx.Bucket(schema.Meta).ForEach(func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range schema.MetaKeys {
		want = append(want, string(k))
	}
	slices.Sort(want)
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("meta keys in the file (-want +got):\n%s", diff)
	}
}
