package record

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/target"
)

// statusRecord returns a record whose statuses are built from conditions
// a, b and c as each case needs.
func statusRecord() (target.Record, [3]engine.Condition) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	conds := [3]engine.Condition{
		{Type: engine.AbleToScale, Status: engine.ConditionTrue, Reason: "SucceededRescale", Message: "able", LastTransitionTime: t0},
		{Type: engine.ScalingActive, Status: engine.ConditionTrue, Reason: "ValidMetricFound", Message: "valid", LastTransitionTime: t0.Add(time.Second)},
		{Type: engine.ScalingLimited, Status: engine.ConditionFalse, Reason: "DesiredWithinRange", Message: "within", LastTransitionTime: t0.Add(2 * time.Second)},
	}
	st := engine.Status{CurrentReplicas: 3, DesiredReplicas: 4, LastScaleTime: t0, Conditions: []engine.Condition{conds[0], conds[1], conds[2]}}
	return target.Record{
		Key:    target.Key{Cluster: "c", Namespace: "n", Name: "web"},
		Status: st,
		Last: &target.LastDecision{ID: "d1", At: t0, Decision: engine.Decision{DesiredReplicas: 4, Rescale: true, Status: st},
			Before: engine.Status{CurrentReplicas: 3, DesiredReplicas: 3, Conditions: []engine.Condition{conds[0], conds[1]}}},
		LastSeen: t0,
	}, conds
}

// TestCodecStoresEqualStatusesOnce checks schema version 2's sharing of
// equal statuses and conditions: every case reads back exactly as written.
func TestCodecStoresEqualStatusesOnce(t *testing.T) {
	other := engine.Condition{Type: engine.ScaledToZero, Status: engine.ConditionFalse, Reason: "NotScaledToZero", Message: "no"}
	tests := []struct {
		name       string
		edit       func(rec *target.Record, c [3]engine.Condition)
		wantShared bool    // decision status left out
		wantRefs   []int32 // Before's condition_refs
	}{
		{name: "as decided", wantShared: true, wantRefs: []int32{0, 1}},
		{name: "status changed by an observation", edit: func(rec *target.Record, c [3]engine.Condition) {
			rec.Status.Conditions = []engine.Condition{c[1], c[0], c[2]}
		}, wantRefs: []int32{1, 0}},
		{name: "before interleaves its own conditions", edit: func(rec *target.Record, c [3]engine.Condition) {
			changed := c[1]
			changed.Message = "changed"
			rec.Last.Before.Conditions = []engine.Condition{other, c[2], changed, c[0]}
		}, wantShared: true, wantRefs: []int32{-1, 2, -1, 0}},
		{name: "before shares nothing", edit: func(rec *target.Record, c [3]engine.Condition) {
			rec.Last.Before.Conditions = []engine.Condition{other}
		}, wantShared: true},
		{name: "a transition time differs", edit: func(rec *target.Record, c [3]engine.Condition) {
			rec.Last.Decision.Status.Conditions = []engine.Condition{c[0], c[1], c[2]}
			rec.Last.Decision.Status.Conditions[2].LastTransitionTime = time.Time{}
		}, wantRefs: []int32{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, c := statusRecord()
			if tt.edit != nil {
				tt.edit(&rec, c)
			}
			m := storedMessage(t, &rec)
			if got := m.GetLast().GetDecisionStatusIsRecordStatus(); got != tt.wantShared || (got && m.GetLast().GetDecision().Status != nil) {
				t.Errorf("decision status shared %v (status %v), want shared %v", got, m.GetLast().GetDecision().GetStatus(), tt.wantShared)
			}
			if diff := cmp.Diff(tt.wantRefs, m.GetLast().GetBefore().GetConditionRefs()); diff != "" {
				t.Errorf("condition refs (-want +got):\n%s", diff)
			}
			raw, err := Encode(&rec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(rec.Key, raw)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(rec, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			// The decision's status is a copy: changing one leaves the other.
			if len(got.Status.Conditions) > 0 && len(got.Last.Decision.Status.Conditions) > 0 {
				got.Status.Conditions[0].Message = "edited"
				if got.Last.Decision.Status.Conditions[0].Message == "edited" {
					t.Error("the decoded decision status shares memory with the record's status")
				}
			}
		})
	}
}

// TestMetricStatusEqualIsStoredAlike checks that metricStatusEqual, which
// decides whether a decision's status is stored once, says equal exactly
// when the two metric statuses are marshalled to the same bytes.
func TestMetricStatusEqualIsStoredAlike(t *testing.T) {
	util, util2 := int32(80), int32(80)
	base := func() engine.MetricStatus {
		return engine.MetricStatus{
			Type: engine.ExternalSource, Resource: "cpu", Container: "app",
			Metric: engine.MetricIdentifier{Name: "queue", Selector: &engine.LabelSelector{
				MatchLabels:      map[string]string{"app": "web", "tier": "front"},
				MatchExpressions: []engine.LabelSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a", "b"}}},
			}},
			DescribedObject:    engine.ObjectReference{APIVersion: "v1", Kind: "Service", Name: "web"},
			Value:              &engine.Quantity{Milli: 1500, Format: engine.DecimalSI},
			AverageValue:       &engine.Quantity{Milli: 500, Format: engine.DecimalSI},
			AverageUtilization: &util,
		}
	}
	tests := []struct {
		name  string
		editA func(m *engine.MetricStatus) // nil leaves a as base
		edit  func(m *engine.MetricStatus) // b
		want  bool
	}{
		{name: "same values, other pointers", edit: func(m *engine.MetricStatus) {
			m.Value = &engine.Quantity{Milli: 1500, Format: engine.DecimalSI}
			m.AverageUtilization = &util2
			m.Metric.Selector = &engine.LabelSelector{
				MatchLabels:      map[string]string{"tier": "front", "app": "web"},
				MatchExpressions: []engine.LabelSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a", "b"}}},
			}
		}, want: true},
		{name: "empty labels and values are nil ones", editA: func(m *engine.MetricStatus) {
			m.Metric.Selector = &engine.LabelSelector{MatchExpressions: []engine.LabelSelectorRequirement{{Key: "zone", Operator: "Exists"}}}
		}, edit: func(m *engine.MetricStatus) {
			m.Metric.Selector = &engine.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []engine.LabelSelectorRequirement{{Key: "zone", Operator: "Exists", Values: []string{}}}}
		}, want: true},
		{name: "type", edit: func(m *engine.MetricStatus) { m.Type = engine.ResourceSource }},
		{name: "container", edit: func(m *engine.MetricStatus) { m.Container = "sidecar" }},
		{name: "metric name", edit: func(m *engine.MetricStatus) { m.Metric.Name = "other" }},
		{name: "no selector", edit: func(m *engine.MetricStatus) { m.Metric.Selector = nil }},
		{name: "an empty selector", edit: func(m *engine.MetricStatus) { m.Metric.Selector = &engine.LabelSelector{} }},
		{name: "a label value", edit: func(m *engine.MetricStatus) { m.Metric.Selector.MatchLabels["tier"] = "back" }},
		{name: "an expression value", edit: func(m *engine.MetricStatus) { m.Metric.Selector.MatchExpressions[0].Values = []string{"a"} }},
		{name: "described object", edit: func(m *engine.MetricStatus) { m.DescribedObject.Kind = "Ingress" }},
		{name: "value", edit: func(m *engine.MetricStatus) { m.Value = &engine.Quantity{Milli: 1500, Format: engine.BinarySI} }},
		{name: "no average value", edit: func(m *engine.MetricStatus) { m.AverageValue = nil }},
		{name: "no utilization", edit: func(m *engine.MetricStatus) { m.AverageUtilization = nil }},
		{name: "another utilization", edit: func(m *engine.MetricStatus) { u := int32(81); m.AverageUtilization = &u }},
	}
	var e encoder
	marshal := func(m engine.MetricStatus) []byte {
		var msg pb.MetricStatus
		e.metricStatus(m, &msg)
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&msg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			if tt.editA != nil {
				tt.editA(&a)
			}
			tt.edit(&b)
			if got := metricStatusEqual(a, b); got != tt.want {
				t.Errorf("metricStatusEqual = %v, want %v", got, tt.want)
			}
			if got, stored := metricStatusEqual(a, b), bytes.Equal(marshal(a), marshal(b)); got != stored {
				t.Errorf("metricStatusEqual = %v, but the stored bytes are equal: %v", got, stored)
			}
		})
	}
}

// TestCodecCompresses checks that a large record is stored compressed and
// a small one as it is, and that both read back, as does a value of the
// first dictionary; and that a corrupt compressed value is a CorruptError.
func TestCodecCompresses(t *testing.T) {
	small := target.Record{Key: target.Key{Name: "s"}, Ref: target.Ref{Kind: "Deployment"}}
	large, _ := statusRecord()
	for i := range 20 {
		large.Events = append(large.Events, target.Event{Kind: target.EventApplied, From: int32(i), To: int32(i + 1), DecisionID: "decision", Message: "applied"})
	}
	for _, tc := range []struct {
		name           string
		rec            target.Record
		wantCompressed bool
	}{{"small", small, false}, {"large", large, true}} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := Encode(&tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			if got := raw[0] == s2Value; got != tc.wantCompressed {
				t.Errorf("compressed %v, want %v (%d bytes)", got, tc.wantCompressed, len(raw))
			}
			got, err := Decode(tc.rec.Key, raw)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.rec, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			if tc.wantCompressed {
				// The same record as schema versions 3 to 5 stored it: S2
				// against the first dictionary.
				msg, err := decompressInto(nil, raw)
				if err != nil {
					t.Fatal(err)
				}
				v1 := append([]byte{s2Value1}, valueDict1().Encode(nil, msg)...)
				if got, err := Decode(tc.rec.Key, v1); err != nil {
					t.Errorf("Decode of the first dictionary's value: %v", err)
				} else if diff := cmp.Diff(tc.rec, got); diff != "" {
					t.Errorf("the first dictionary's value reads (-want +got):\n%s", diff)
				}
				for _, bad := range [][]byte{raw[:len(raw)/2], append([]byte{s2Value, 0xff}, raw[1:]...), {s2Value}, {s2Value1}, v1[:len(v1)/2], {deflateValue}, {deflateValue, 0xff}} {
					if _, err := Decode(tc.rec.Key, bad); err == nil {
						t.Errorf("Decode(% x...): %v, want an error", bad[:2], err)
					}
				}
			}
		})
	}
}

func TestCodecRejectsBadConditionRefs(t *testing.T) {
	for name, refs := range map[string][]int32{
		"beyond the record's conditions":  {0, 7},
		"more own conditions than stored": {-1, -1},
		"own conditions left over":        {0},
		"below -1":                        {-2},
	} {
		t.Run(name, func(t *testing.T) {
			rec, _ := statusRecord()
			rec.Last.Before.Conditions = rec.Last.Before.Conditions[:1]
			rec.Last.Before.Conditions[0].Message = "own"
			m := storedMessage(t, &rec)
			m.Last.Before.ConditionRefs = refs
			raw, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(rec.Key, raw); err == nil {
				t.Errorf("decodeRecord: %v, want an error", err)
			}
		})
	}
}

// TestCodecReadsFromOfOlderRecords: a record written before
// LastDecision.from existed reads its decision's starting replica count
// from the stored explanation, which held the same count; a record with the
// field reads it, also when it is 0.
func TestCodecReadsFromOfOlderRecords(t *testing.T) {
	for _, tt := range []struct {
		name string
		from *int32
		want int32
	}{
		{"without the field", nil, 3},
		{"with the field", proto.Int32(7), 7},
		{"with the field at 0", proto.Int32(0), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec, _ := statusRecord()
			rec.Last.Decision.Explanation.CurrentReplicas = 3
			m := storedMessage(t, &rec)
			m.Last.From = tt.from
			raw, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(rec.Key, raw)
			if err != nil {
				t.Fatal(err)
			}
			if got.Last.From != tt.want {
				t.Errorf("Last.From = %d, want %d", got.Last.From, tt.want)
			}
		})
	}
}

// storedMessage returns the storage message rec is encoded as.
func storedMessage(t *testing.T, rec *target.Record) *pb.Record {
	t.Helper()
	raw, err := Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := decompressInto(nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	var m pb.Record
	if err := proto.Unmarshal(msg, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// TestDecodeForDecisionSkipsOnlyTheLastDecision: decoding for a decision
// (Decide) gives the record decodeRecord gives, but for the last
// decision, of which only ID and At are kept, also of a last decision
// written as more than one field (which protobuf merges).
func TestDecodeForDecisionSkipsOnlyTheLastDecision(t *testing.T) {
	rec, _ := statusRecord()
	noTime := rec
	noTime.Last = &target.LastDecision{ID: "d0", Decision: rec.Last.Decision}
	none := rec
	none.Last = nil
	raw := func(r target.Record) []byte { // uncompressed, as schema version 1 stored
		m, err := recordMessage(new(encoder), &r)
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	twice := raw(rec)                                          // Record.last once more, with another id: the second wins
	twice = protowire.AppendTag(twice, 6, protowire.BytesType) // Record.last: LastDecision.id
	twice = protowire.AppendBytes(twice, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "d2"))
	encoded := func(r target.Record) []byte {
		b, err := Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		val     []byte
		partial bool // whether the last decision is left undecoded
	}{
		{"full record", encoded(rec), true},
		{"uncompressed", raw(rec), true},
		{"last decision without a time", encoded(noTime), true},
		{"no last decision", encoded(none), false},
		{"last decision in two fields", twice, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := Decode(rec.Key, tc.val)
			if err != nil {
				t.Fatal(err)
			}
			if tc.partial {
				want.Last = &target.LastDecision{ID: want.Last.ID, At: want.Last.At}
			}
			got, err := DecodeFor(rec.Key, tc.val, true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decoded for a decision (-want +got):\n%s", diff)
			}
		})
	}
	if got, err := DecodeFor(rec.Key, twice, true); err != nil || got.Last.ID != "d2" {
		t.Errorf("a last decision in two fields: ID %q, %v; want the second field's d2", got.Last.ID, err)
	}
}

// TestDictionariesArePinned: a dictionary is part of the stored format
// (compress.go), so an embedded one never changes; a new one comes with a
// new first byte and schema version.
func TestDictionariesArePinned(t *testing.T) {
	for _, tc := range []struct {
		name string
		dict []byte
		want string
	}{
		{"values.dict", valuesDict1, "2dcb0630650fbb54a0826435a15f6786f5d52336a2c8112956a56baa35989349"},
		{"values2.dict", valuesDict, "2356618b8efee29579600bc9ac79f08d6ab3b89a390c0cf0985f1d705981d09c"},
	} {
		if got := fmt.Sprintf("%x", sha256.Sum256(tc.dict)); got != tc.want {
			t.Errorf("%s has sha256 %s, want %s: values written with it would no longer read", tc.name, got, tc.want)
		}
	}
}
