package record_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// FuzzRecordCodec feeds arbitrary bytes to the decoder of stored records,
// as a damaged file would, starting from the fullest record the tests know.
// Beyond FuzzDecodeRecord: the decoder's last-resort recover
// counts as a failure, and a record it accepts must
// encode again and decode to itself (the codec has a fixed point).
func FuzzRecordCodec(f *testing.F) {
	k := target.Key{Cluster: "eu1", Namespace: "shop", Name: "web"}
	full := storetest.FullRecord(k)
	for _, rec := range []target.Record{{Key: k}, full} {
		b, err := record.Encode(&rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := record.Decode(k, b)
		if err != nil {
			if strings.Contains(err.Error(), "panic while decoding") {
				t.Fatalf("the decoder panicked: %v", err)
			}
			return
		}
		again, err := record.Encode(&rec)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		rec2, err := record.Decode(k, again)
		if err != nil {
			t.Fatalf("a re-encoded record does not decode: %v", err)
		}
		if diff := cmp.Diff(rec, rec2, cmpopts.EquateEmpty(), cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("decode(encode(decode(b))) differs (-first +second):\n%s", diff)
		}
	})
}

// FuzzRecordKey checks that record keys round-trip and that the key parser
// (which reads keys from the file, e.g. in List's page tokens and the
// expiry index) rejects, never panics on, arbitrary bytes.
func FuzzRecordKey(f *testing.F) {
	f.Add("eu1", "shop", "web", []byte("eu1\x00\x01shop\x00\x01web\x00\x01"))
	f.Add("a\x00", "\x00\xff", "", []byte("\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, cluster, namespace, name string, raw []byte) {
		k := target.Key{Cluster: cluster, Namespace: namespace, Name: name}
		if rk, err := record.Key(k); err == nil {
			got, err := record.ParseKey(rk)
			if err != nil || got != k {
				t.Fatalf("ParseKey(Key(%q)) = %q, %v", k, got, err)
			}
		}
		if got, err := record.ParseKey(raw); err == nil {
			rk, err := record.Key(got)
			if err != nil || !bytes.Equal(rk, raw) {
				t.Fatalf("%q parses as %q, which encodes as %q (%v)", raw, got, rk, err)
			}
		}
	})
}

// FuzzDecodeEntry: any bytes decode to a change-feed entry or an error,
// never a panic, and an entry decoded encodes again to one that decodes
// to itself.
func FuzzDecodeEntry(f *testing.F) {
	k := target.Key{Cluster: "eu1", Namespace: "shop", Name: "web"}
	full := storetest.FullRecord(k)
	for _, e := range []store.Change{{Key: k, Decision: full.Last, Created: true}, {Key: k, Event: &full.Events[0]}, {Key: k, Kind: store.ChangeDeleted, At: full.LastSeen}} {
		b, err := record.EncodeChange(&e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := record.DecodeChange(0, b)
		if err != nil {
			if strings.Contains(err.Error(), "panic while decoding") {
				t.Fatalf("the decoder panicked: %v", err)
			}
			return
		}
		again, err := record.EncodeChange(&e)
		if err != nil {
			t.Fatalf("a decoded entry does not encode: %v", err)
		}
		e2, err := record.DecodeChange(0, again)
		if err != nil {
			t.Fatalf("a re-encoded entry does not decode: %v", err)
		}
		if diff := cmp.Diff(e, e2, cmpopts.EquateEmpty(), cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("decode(encode(decode(b))) differs (-first +second):\n%s", diff)
		}
	})
}
