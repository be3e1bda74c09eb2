package record

import (
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/target"
)

// twoMetricDecision is a decision of two metrics limited by a policy.
var twoMetricDecision = &target.LastDecision{At: time.Unix(1_800_000_000, 0), Decision: engine.Decision{
	DesiredReplicas: 6, Rescale: true,
	Explanation: engine.Explanation{CurrentReplicas: 4, Winner: 1, Proposal: 7,
		Metrics: []engine.MetricExplanation{
			{Name: "cpu resource utilization (percentage of request)", Outcome: engine.OutcomeScaled, Proposal: 6, Current: 81, Target: 60, Ratio: 1.35, ReadyPods: 4},
			{Name: "queue_depth (external metric)", Outcome: engine.OutcomeScaled, Proposal: 7, Current: 1512000, Target: 1000000, Ratio: 1.512, ReadyPods: 4, MissingPods: 1},
		},
		Steps: []engine.Step{{Kind: engine.StepLimited, From: 7, To: 6, Reason: "ScaleUpLimit", Message: "the desired replica count is increasing faster than the maximum scale rate"}}},
}}

// The compact form stays compact: a two-metric decision with a step is
// at most 64 bytes (docs/benchmarks.md budgets the log with it).
func TestLoggedDecisionSize(t *testing.T) {
	b, err := EncodeLogged(twoMetricDecision)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 64 {
		t.Errorf("a two-metric logged decision is %d bytes, want at most 64", len(b))
	}
}

func BenchmarkEncodeLoggedDecision(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeLogged(twoMetricDecision); err != nil {
			b.Fatal(err)
		}
	}
}
