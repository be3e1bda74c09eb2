package record_test

import (
	"errors"
	"fmt"
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
// a panic, decoding for a decision agrees with decoding whole, and a
// decoded record encodes again, its decision's change-feed entry too.
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
