package engine_test

import (
	"fmt"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// exampleInput is 3 ready pods requesting 500m cpu and using 450m each
// (90%) against a 60% target, with the controller's default settings.
func exampleInput(at time.Time) engine.Input {
	in := engine.Input{
		Now: at,
		Spec: engine.Spec{MinReplicas: 1, MaxReplicas: 10, Metrics: []engine.MetricSpec{{
			Type: engine.ResourceSource, Resource: "cpu",
			Target: engine.Target{Type: engine.UtilizationTarget, Utilization: 60},
		}}},
		Settings: engine.Settings{Tolerance: 0.1, CPUInitializationPeriod: 5 * time.Minute,
			InitialReadinessDelay: 30 * time.Second, DownscaleStabilizationWindow: 5 * time.Minute},
		Scale:        engine.Scale{Replicas: 3, StatusReplicas: 3, Selector: "app=web"},
		Observations: make([]engine.Observation, 1),
	}
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		in.Pods = append(in.Pods, engine.Pod{
			Name: name, Phase: engine.PodRunning, StartTime: at.Add(-time.Hour),
			Ready:      &engine.PodReadiness{Status: engine.ConditionTrue, LastTransitionTime: at.Add(-time.Hour)},
			Containers: []engine.Container{{Name: "app", Requests: engine.ResourceListOf(map[string]int64{"cpu": 500})}},
		})
		in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, engine.PodUsage{
			Pod: name, Timestamp: at.Add(-15 * time.Second), Window: 30 * time.Second,
			Containers: []engine.ContainerUsage{{Name: "app", Usage: engine.ResourceListOf(map[string]int64{"cpu": 450})}},
		})
	}
	return in
}

func printDecision(d engine.Decision) {
	fmt.Println("desired replicas:", d.DesiredReplicas, "rescale:", d.Rescale)
	w := d.Explanation.Metrics[d.Explanation.Winner]
	fmt.Printf("winner: %s: %s, %d%% of %d%%, ratio %.2f, proposal %d\n", w.Name, w.Outcome, w.Current, w.Target, w.Ratio, w.Proposal)
	if len(d.Explanation.Steps) == 0 {
		fmt.Println("no steps")
	}
	for _, s := range d.Explanation.Steps {
		fmt.Printf("step %s: %d -> %d (%s)\n", s.Kind, s.From, s.To, s.Reason)
	}
}

// 3 pods at 90% of their cpu request against a 60% target: the ratio is
// 90/60 = 1.5, outside the 10% tolerance, and ceil(1.5 × 3) = 5.
func ExampleDecide() {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	d, err := engine.Decide(exampleInput(at), engine.History{})
	if err != nil {
		fmt.Println(err)
		return
	}
	printDecision(d)
	// Output:
	// desired replicas: 5 rescale: true
	// winner: cpu resource utilization (percentage of request): Scaled, 90% of 60%, ratio 1.50, proposal 5
	// no steps
}

// The same decision when 7 replicas were recommended two minutes earlier:
// the 5-minute downscale window raises the count to 7, and the legacy rate
// limit, max(2 × 3, 4) = 6, brings it back to 6.
func ExampleDecide_stabilized() {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := engine.History{Recommendations: []engine.Recommendation{{Replicas: 7, At: at.Add(-2 * time.Minute)}}}
	d, err := engine.Decide(exampleInput(at), h)
	if err != nil {
		fmt.Println(err)
		return
	}
	printDecision(d)
	// Output:
	// desired replicas: 6 rescale: true
	// winner: cpu resource utilization (percentage of request): Scaled, 90% of 60%, ratio 1.50, proposal 5
	// step Stabilized: 5 -> 7 (ScaleDownStabilized)
	// step Limited: 7 -> 6 (ScaleUpLimit)
}
