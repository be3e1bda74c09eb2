package record

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

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
		b, err := Key(k)
		if err != nil {
			t.Fatalf("Key(%q): %v", k, err)
		}
		encoded[k] = b
		got, err := ParseKey(b)
		if err != nil || got != k {
			t.Errorf("ParseKey(recordKey(%q)) = %q, %v", k, got, err)
		}
	}
	byBytes := slices.Clone(keys)
	slices.SortFunc(byBytes, func(x, y target.Key) int { return bytes.Compare(encoded[x], encoded[y]) })
	if diff := gocmp.Diff(byTuple, byBytes); diff != "" {
		t.Errorf("byte order differs from (cluster, namespace, name) order (-tuple +bytes):\n%s", diff)
	}
	for _, k := range keys {
		for _, other := range keys {
			if got, want := bytes.HasPrefix(encoded[other], appendComponent(nil, k.Cluster)), other.Cluster == k.Cluster; got != want {
				t.Errorf("cluster prefix of %q matches %q: %v, want %v", k.Cluster, other, got, want)
			}
			sameNS := other.Cluster == k.Cluster && other.Namespace == k.Namespace
			if got := bytes.HasPrefix(encoded[other], appendComponent(appendComponent(nil, k.Cluster), k.Namespace)); got != sameNS {
				t.Errorf("namespace prefix of %q/%q matches %q: %v, want %v", k.Cluster, k.Namespace, other, got, sameNS)
			}
		}
	}
}

func TestRecordKeyTooLong(t *testing.T) {
	_, err := Key(target.Key{Cluster: "c", Namespace: "n", Name: strings.Repeat("x", MaxKeyLength)})
	if !errors.Is(err, ErrKeyTooLong) {
		t.Errorf("Key of a huge name: %v, want ErrKeyTooLong", err)
	}
}

func TestParseRecordKeyRejectsMalformed(t *testing.T) {
	for _, b := range []string{"", "a", "a\x00\x01b\x00\x01", "a\x00\x01b\x00\x01c\x00\x01d", "a\x00\x02b\x00\x01c\x00\x01", "a\x00"} {
		if k, err := ParseKey([]byte(b)); err == nil {
			t.Errorf("ParseKey(%q) = %q, want an error", b, k)
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
		if a, b := OrderedTime(times[i-1]), OrderedTime(times[i]); a > b {
			t.Errorf("OrderedTime(%v) = %x > OrderedTime(%v) = %x", times[i-1], a, times[i], b)
		}
	}
}

// TestDecisionKey: a decision key is the record key then the time, and
// DecisionTime reads the time back (in UTC, to the nanosecond).
func TestDecisionKey(t *testing.T) {
	rk, err := Key(target.Key{Cluster: "c", Namespace: "n", Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 2, 3, 4, 5, time.FixedZone("x", 3600))
	k := DecisionKey(rk, at)
	if !bytes.HasPrefix(k, rk) || len(k) != len(rk)+TimeLength {
		t.Errorf("DecisionKey = %x, want %x and %d bytes", k, rk, TimeLength)
	}
	if got := DecisionTime(k); !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("DecisionTime = %v, want %v in UTC", got, at)
	}
	if bytes.Compare(DecisionKey(rk, at), DecisionKey(rk, at.Add(time.Nanosecond))) >= 0 {
		t.Error("decision keys do not sort by time")
	}
}

// TestKeyPrefix: KeyPrefix selects a cluster, a namespace of it, or all.
func TestKeyPrefix(t *testing.T) {
	for _, tc := range []struct{ cluster, namespace string }{{"", ""}, {"a", ""}, {"a", "n"}} {
		want := []byte(nil)
		if tc.cluster != "" {
			want = appendComponent(nil, tc.cluster)
		}
		if tc.namespace != "" {
			want = appendComponent(want, tc.namespace)
		}
		if got := KeyPrefix(tc.cluster, tc.namespace); !bytes.Equal(got, want) {
			t.Errorf("KeyPrefix(%q, %q) = %x, want %x", tc.cluster, tc.namespace, got, want)
		}
	}
}
