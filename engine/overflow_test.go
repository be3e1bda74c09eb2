package engine_test

import (
	"math"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// TestInt32Edges decides at the edges of int32: every limit saturates at
// math.MaxInt32 instead of wrapping to a negative count, and the decision
// stays within [min, max].
func TestInt32Edges(t *testing.T) {
	const top = math.MaxInt32
	huge := values(math.MaxInt64 / 4) // a proposal far beyond int32
	pods := func(v int32) *engine.Behavior {
		b := behavior()
		b.ScaleUp.Policies = []engine.Policy{{Type: engine.PodsPolicy, Value: v, PeriodSeconds: 15}}
		return b
	}
	percent := func(v int32) *engine.Behavior {
		b := behavior()
		b.ScaleUp.Policies = []engine.Policy{{Type: engine.PercentPolicy, Value: v, PeriodSeconds: 15}}
		return b
	}
	cases := []struct {
		name        string
		b           *engine.Behavior
		cur         int32
		history     engine.History
		want        int32
		wantRescale bool
	}{
		{name: "legacy limit at max = replicas = MaxInt32", cur: top, want: top},
		{name: "legacy limit above 2^30 replicas", cur: 1<<30 + 1, want: top, wantRescale: true},
		{name: "legacy limit at 2^30 replicas", cur: 1 << 30, want: top, wantRescale: true},
		{name: "Pods policy of MaxInt32", b: pods(top), cur: top - 1, want: top, wantRescale: true},
		{name: "Percent policy of 1000% above 2^28", b: percent(1000), cur: 1 << 28, want: top, wantRescale: true},
		{
			name: "Pods policy after scale-downs summing past int32", b: pods(top), cur: top - 1,
			history: engine.History{ScaleDownEvents: []engine.ScaleEvent{
				{Change: top, At: now.Add(-time.Second)}, {Change: top, At: now.Add(-2 * time.Second)},
			}},
			want: top, wantRescale: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t, 1, top, tc.cur, tc.b)
			d := decide(t, tg.input(now, huge), tc.history)
			if d.DesiredReplicas != tc.want || d.Rescale != tc.wantRescale {
				t.Errorf("desired, rescale = %d, %v; want %d, %v (steps %+v)", d.DesiredReplicas, d.Rescale, tc.want, tc.wantRescale, d.Explanation.Steps)
			}
		})
	}
}
