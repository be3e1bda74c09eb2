package record_test

import (
	"bytes"
	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// FuzzRecordRoundTrip builds a record from the fuzzer's bytes (recordGen):
// a record that encodes must decode to itself, every field kept (times as
// instants, an empty list as none).
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{1}, 64))
	f.Add(bytes.Repeat([]byte{3, 7, 1, 200, 2}, 80))
	seq := make([]byte, 1024)
	for i := range seq {
		seq[i] = byte(i * 37)
	}
	f.Add(seq)
	f.Fuzz(func(t *testing.T, b []byte) {
		g := &recordGen{b: b}
		rec := g.record()
		val, err := record.Encode(&rec)
		if err != nil {
			return // a string that is not UTF-8, a time out of range
		}
		decoded, err := record.Decode(rec.Key, val)
		if err != nil {
			t.Fatalf("an encoded record does not decode: %v", err)
		}
		same := gocmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateNaNs(), gocmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })}
		if diff := gocmp.Diff(rec, decoded, same); diff != "" {
			t.Fatalf("a record decodes to another (-encoded +decoded):\n%s", diff)
		}
	})
}

// recordGen builds records from bytes: each choice takes the next byte
// (0 once the bytes run out), so that the fuzzer's mutations reach every
// field. Statuses reuse conditions of a shared pool, and a decision's
// status is often the record's in another form (times in another zone,
// empty slices for nil), as schema version 2's sharing needs.
type recordGen struct {
	b    []byte
	pool []engine.Condition
}

func (g *recordGen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

// n is a choice in 0…max.
func (g *recordGen) n(max int) int { return int(g.byte()) % (max + 1) }

func (g *recordGen) bool() bool { return g.byte()&1 == 1 }

func (g *recordGen) uint64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(g.byte())
	}
	return v
}

func (g *recordGen) int32() int32 {
	switch g.n(7) {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return -1
	case 3:
		return math.MaxInt32
	case 4:
		return math.MinInt32
	case 5:
		return int32(g.n(300))
	}
	return int32(g.uint64())
}

func (g *recordGen) int64() int64 {
	switch g.n(4) {
	case 0:
		return 0
	case 1:
		return -1
	case 2:
		return int64(g.n(255)) << 20
	}
	return int64(g.uint64())
}

func (g *recordGen) float() float64 {
	switch g.n(7) {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return 0.1
	case 3:
		return math.NaN()
	case 4:
		return math.Inf(-1)
	case 5:
		return 1.25
	}
	return math.Float64frombits(g.uint64())
}

// words are the strings a record is made of, most often.
var words = []string{"", "", "a", "web", "cpu", "Deployment", "ScaleUpLimit", "é ü ✓", strings.Repeat("the desired count is limited ", 6)}

// str is a word, or the fuzzer's bytes: UTF-8 when a byte says so, and
// not always otherwise.
func (g *recordGen) str() string {
	c := g.byte()
	if int(c) < 240 {
		return words[int(c)%len(words)]
	}
	s := string(g.b[:min(len(g.b), int(c-240))])
	g.b = g.b[len(s):]
	if c&1 == 0 {
		s = strings.ToValidUTF8(s, "?")
	}
	return s
}

var zones = []*time.Location{time.UTC, time.FixedZone("CEST", 2*3600), time.FixedZone("west", -11*3600)}

func (g *recordGen) time() time.Time {
	switch g.n(9) {
	case 0, 1:
		return time.Time{}
	case 2:
		return time.Time{}.In(zones[1]) // zero, in a zone
	case 3:
		return time.Unix(0, 0) // the epoch: an empty Timestamp
	case 4:
		return time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC) // the first time a Timestamp holds, but for one ns
	case 5:
		if g.byte() == 255 {
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // out of range
		}
		return time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	}
	sec := int64(g.uint64()%(400*365*86400)) - 100*365*86400 // 1870…2270
	return time.Unix(sec, int64(g.uint64()%1e9)).In(zones[g.n(len(zones)-1)])
}

func (g *recordGen) duration() time.Duration {
	switch g.n(4) {
	case 0:
		return 0
	case 1:
		return 5 * time.Minute
	case 2:
		return -1500 * time.Millisecond
	}
	return time.Duration(g.uint64())
}

// slice returns n elements of f, n in 0…max; no element gives nil or an
// empty slice.
func genSlice[T any](g *recordGen, max int, f func() T) []T {
	n := g.n(max)
	if n == 0 {
		if g.bool() {
			return []T{}
		}
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

func (g *recordGen) record() target.Record {
	rec := target.Record{
		Key:      target.Key{Cluster: "c", Namespace: "n", Name: "web"},
		Ref:      target.Ref{APIVersion: g.str(), Kind: g.str(), Name: g.str()},
		Spec:     g.spec(),
		Settings: engine.Settings{Tolerance: g.float(), CPUInitializationPeriod: g.duration(), InitialReadinessDelay: g.duration(), DownscaleStabilizationWindow: g.duration()},
		History:  g.history(),
		Events: genSlice(g, 3, func() target.Event {
			return target.Event{Kind: target.EventKind(g.str()), From: g.int32(), To: g.int32(), At: g.time(), DecisionID: g.str(), Message: g.str()}
		}),
		LastSeen: g.time(),
	}
	g.pool = genSlice(g, 4, g.condition)
	rec.Status = g.status()
	if g.n(3) > 0 {
		l := &target.LastDecision{ID: g.str(), At: g.time(), From: g.int32(), Before: g.status()}
		l.Decision = engine.Decision{DesiredReplicas: g.int32(), Rescale: g.bool(), Error: g.str(), History: g.history()}
		if g.bool() {
			l.Decision.Status = g.alike(rec.Status)
		} else {
			l.Decision.Status = g.status()
		}
		l.Decision.Explanation = engine.Explanation{
			CurrentReplicas: g.int32(), Winner: int(g.int64()), Proposal: g.int32(),
			Metrics: genSlice(g, 3, func() engine.MetricExplanation {
				return engine.MetricExplanation{
					Name: g.str(), Outcome: engine.MetricOutcome(g.str()), Proposal: g.int32(), Err: g.str(), Current: g.int64(), Target: g.int64(),
					Ratio: g.float(), RebalancedRatio: g.float(), ReadyPods: g.int32(), UnreadyPods: g.int32(), MissingPods: g.int32(), IgnoredPods: g.int32(),
				}
			}),
			Steps: genSlice(g, 3, func() engine.Step {
				return engine.Step{Kind: engine.StepKind(g.str()), From: g.int32(), To: g.int32(), Reason: g.str(), Message: g.str()}
			}),
		}
		rec.Last = l
	}
	return rec
}

func (g *recordGen) spec() engine.Spec {
	s := engine.Spec{MinReplicas: g.int32(), MaxReplicas: g.int32(), Metrics: genSlice(g, 3, func() engine.MetricSpec {
		return engine.MetricSpec{
			Type: engine.MetricSourceType(g.str()), Resource: g.str(), Container: g.str(), Metric: g.identifier(), DescribedObject: g.object(),
			Target: engine.Target{Type: engine.TargetType(g.str()), Milli: g.int64(), Utilization: g.int32()},
		}
	})}
	if g.bool() {
		s.Behavior = &engine.Behavior{ScaleUp: g.rules(), ScaleDown: g.rules()}
	}
	return s
}

func (g *recordGen) rules() engine.Rules {
	return engine.Rules{StabilizationWindowSeconds: g.int32(), SelectPolicy: engine.SelectPolicy(g.str()), Tolerance: g.float(),
		Policies: genSlice(g, 3, func() engine.Policy {
			return engine.Policy{Type: engine.PolicyType(g.str()), Value: g.int32(), PeriodSeconds: g.int32()}
		})}
}

func (g *recordGen) object() engine.ObjectReference {
	return engine.ObjectReference{APIVersion: g.str(), Kind: g.str(), Name: g.str()}
}

func (g *recordGen) identifier() engine.MetricIdentifier {
	m := engine.MetricIdentifier{Name: g.str()}
	if g.bool() {
		m.Selector = &engine.LabelSelector{MatchExpressions: genSlice(g, 2, func() engine.LabelSelectorRequirement {
			return engine.LabelSelectorRequirement{Key: g.str(), Operator: g.str(), Values: genSlice(g, 3, g.str)}
		})}
		if n := g.n(5); n > 0 || g.bool() {
			m.Selector.MatchLabels = map[string]string{}
			for range n {
				m.Selector.MatchLabels[g.str()] = g.str()
			}
		}
	}
	return m
}

func (g *recordGen) condition() engine.Condition {
	return engine.Condition{Type: engine.ConditionType(g.str()), Status: engine.ConditionStatus(g.str()), Reason: g.str(), Message: g.str(), LastTransitionTime: g.time()}
}

// status is a status whose conditions are often the pool's.
func (g *recordGen) status() engine.Status {
	return engine.Status{
		CurrentReplicas: g.int32(), DesiredReplicas: g.int32(), LastScaleTime: g.time(),
		CurrentMetrics: genSlice(g, 2, func() engine.MetricStatus {
			m := engine.MetricStatus{Type: engine.MetricSourceType(g.str()), Resource: g.str(), Container: g.str(), Metric: g.identifier(), DescribedObject: g.object()}
			if g.bool() {
				m.Value = &engine.Quantity{Milli: g.int64(), Format: engine.QuantityFormat(g.str())}
			}
			if g.bool() {
				m.AverageValue = &engine.Quantity{Milli: g.int64(), Format: engine.QuantityFormat(g.str())}
			}
			if g.bool() {
				u := g.int32()
				m.AverageUtilization = &u
			}
			return m
		}),
		Conditions: genSlice(g, 4, func() engine.Condition {
			if len(g.pool) > 0 && g.n(3) > 0 {
				c := g.pool[g.n(len(g.pool)-1)]
				c.LastTransitionTime = c.LastTransitionTime.In(zones[g.n(len(zones)-1)])
				return c
			}
			return g.condition()
		}),
	}
}

// alike is s in another form that is stored alike: its own slices (empty
// for nil), its times in another zone, equal maps.
func (g *recordGen) alike(s engine.Status) engine.Status {
	zone := zones[g.n(len(zones)-1)]
	out := s
	out.LastScaleTime = s.LastScaleTime.In(zone)
	out.Conditions = append([]engine.Condition{}, s.Conditions...)
	for i := range out.Conditions {
		out.Conditions[i].LastTransitionTime = out.Conditions[i].LastTransitionTime.In(zone)
	}
	out.CurrentMetrics = append([]engine.MetricStatus{}, s.CurrentMetrics...)
	return out
}

func (g *recordGen) history() engine.History {
	event := func() engine.ScaleEvent {
		return engine.ScaleEvent{Change: g.int32(), At: g.time(), Outdated: g.bool()}
	}
	return engine.History{
		Recommendations: genSlice(g, 4, func() engine.Recommendation { return engine.Recommendation{Replicas: g.int32(), At: g.time()} }),
		ScaleUpEvents:   genSlice(g, 2, event),
		ScaleDownEvents: genSlice(g, 2, event),
	}
}

// TestDecodedRecordKeepsNothingOfPooledMessages decodes records one after
// another: a stored record is unmarshalled into pooled messages that the
// next decode reuses (buf.gen.yaml), so a record that shared any of their
// lists, bytes or strings would change under a later decode.
func TestDecodedRecordKeepsNothingOfPooledMessages(t *testing.T) {
	var recs []target.Record
	var vals [][]byte
	for seed := range 64 {
		b := make([]byte, 2048)
		for i := range b {
			b[i] = byte(i*(seed+3)+seed*seed) & 0x7f // ASCII: strings are UTF-8
		}
		g := &recordGen{b: b}
		rec := g.record()
		val, err := record.Encode(&rec)
		if err != nil {
			continue // a string that is not UTF-8, a time out of range
		}
		recs, vals = append(recs, rec), append(vals, val)
	}
	if len(recs) < 16 {
		t.Fatalf("only %d of 64 generated records encode", len(recs))
	}
	decoded := make([]target.Record, len(recs))
	for i := range recs {
		var err error
		if decoded[i], err = record.Decode(recs[i].Key, vals[i]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	for range 4 { // decodes that reuse the messages, in another order
		for i := len(vals) - 1; i >= 0; i-- {
			if _, err := record.Decode(recs[i].Key, vals[i]); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
	}
	same := gocmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateNaNs(), gocmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })}
	for i := range recs {
		if diff := gocmp.Diff(recs[i], decoded[i], same); diff != "" {
			t.Fatalf("record %d changed under later decodes (-encoded +decoded):\n%s", i, diff)
		}
	}
}
