package boltstore

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// encodeRecord is record.Encode.
var encodeRecord = record.Encode

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

// TestCompressorsCompressAsCompressValue: values compressed by the
// compressors, from many goroutines at once and after they are stopped,
// are exactly what record.Compress makes of them.
func TestCompressorsCompressAsCompressValue(t *testing.T) {
	rec, _ := statusRecord()
	big, err := record.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"large", bytes.Repeat(big, 8)},
		{"below MinCompress", big[:min(len(big), record.MinCompress-1)]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := record.Compress(tc.in)
			c := startCompressors(2)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 20 {
						if got := c.compress(tc.in); !bytes.Equal(got, want) {
							t.Errorf("compress = %d bytes, want record.Compress's %d", len(got), len(want))
							return
						}
					}
				})
			}
			wg.Wait()
			c.stop()
			if got := c.compress(tc.in); !bytes.Equal(got, want) {
				t.Errorf("after stop: compress = %d bytes, want record.Compress's %d", len(got), len(want))
			}
		})
	}
}
