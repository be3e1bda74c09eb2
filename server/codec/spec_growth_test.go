package codec

import (
	"testing"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/budget"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// number is the field number of name in the message m.
func number(m proto.Message, name protoreflect.Name) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// nested encodes value as the message field num, inside each field of
// path from the innermost out.
func nested(value []byte, path ...protowire.Number) []byte {
	for i := len(path) - 1; i >= 0; i-- {
		value = protowire.AppendBytes(protowire.AppendTag(nil, path[i], protowire.BytesType), value)
	}
	return value
}

// growthSeeds are encoded Recommends whose spec grows when encoded again:
// selectors of map entries without value or without anything.
func growthSeeds() [][]byte {
	spec := number(&setpointv1.RecommendRequest{}, "spec")
	metrics := number(&setpointv1.HorizontalPodAutoscalerSpec{}, "metrics")
	external := number(&setpointv1.MetricSpec{}, "external")
	metric := number(&setpointv1.ExternalMetricSource{}, "metric")
	selector := number(&setpointv1.MetricIdentifier{}, "selector")
	labels := number(&setpointv1.LabelSelector{}, "match_labels")
	empty := protowire.AppendBytes(protowire.AppendTag(nil, labels, protowire.BytesType), nil) // no key, no value
	var keyOnly []byte
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		entry := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), k)
		keyOnly = protowire.AppendBytes(protowire.AppendTag(keyOnly, labels, protowire.BytesType), entry)
	}
	var many []byte
	for range 100 {
		many = append(many, nested(empty, metrics, external, metric, selector)...)
	}
	return [][]byte{
		nested(empty, spec, metrics, external, metric, selector),
		nested(keyOnly, spec, metrics, external, metric, selector),
		nested(append(empty, keyOnly...), spec, metrics, external, metric, selector),
		nested(many, spec),
	}
}

// FuzzSpecGrowth: the spec of a request that decodes, encoded again, is at
// most budget.MaxSpecGrowth times the request's size as received (what
// budget.Budgets.SpecFits relies on to skip measuring it).
func FuzzSpecGrowth(f *testing.F) {
	for _, tc := range decodeCases(f) {
		f.Add(tc.b)
	}
	for _, b := range growthSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for name, decode := range map[string]func(*setpointv1.RecommendRequest) error{
			"codec": func(m *setpointv1.RecommendRequest) error {
				return Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m)
			},
			"proto.Unmarshal": func(m *setpointv1.RecommendRequest) error { return proto.Unmarshal(b, m) },
		} {
			m := &setpointv1.RecommendRequest{}
			if decode(m) != nil || m.GetSpec() == nil {
				continue
			}
			if n := proto.Size(m.GetSpec()); n > budget.MaxSpecGrowth*len(b) {
				t.Fatalf("%s: spec of %d bytes encoded from a request of %d", name, n, len(b))
			}
		}
	})
}

// TestSpecGrowthSeedsGrow checks that the growth seeds do grow (the fuzz
// target tests the bound where it matters), and that a request over
// maxSpec/budget.MaxSpecGrowth bytes is measured: its spec over maxSpec is
// reported.
func TestSpecGrowthSeedsGrow(t *testing.T) {
	for i, b := range growthSeeds() {
		m := &setpointv1.RecommendRequest{}
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		if n := proto.Size(m); n <= len(b) {
			t.Errorf("seed %d: %d bytes encoded again from %d: want growth", i, n, len(b))
		}
	}
	bg := budget.Budgets{MaxString: budget.DefaultMaxStringBytes, MaxEntries: budget.DefaultMaxListEntries, MaxSpec: 64}
	req := &setpointv1.RecommendRequest{Spec: &setpointv1.HorizontalPodAutoscalerSpec{Metrics: []*setpointv1.MetricSpec{{Type: "External", External: &setpointv1.ExternalMetricSource{
		Metric: &setpointv1.MetricIdentifier{Name: "a-rather-long-metric-name-of-more-than-sixty-four-bytes-to-exceed-the-budget"}}}}}}
	for _, received := range []int64{0, int64(proto.Size(req)), 1 << 20} {
		e := &setpointv1.ValidationError{}
		bg.CheckReceived(e, req, received)
		if len(e.Violations) != 1 || e.Violations[0].Field != "spec" {
			t.Errorf("received %d: violations %v, want one of spec", received, e.Violations)
		}
	}
	if !bg.SpecFits(64/budget.MaxSpecGrowth) || bg.SpecFits(64/budget.MaxSpecGrowth+1) || bg.SpecFits(0) {
		t.Errorf("specFits: want true for 1..%d bytes only", 64/budget.MaxSpecGrowth)
	}
}
