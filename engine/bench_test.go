package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// benchInput is a target of n pods with a cpu utilization metric, a Pods
// metric and an External metric, a behavior with several policies, and a
// history of 40 recommendations and 20 scale events each way.
func benchInput(n int) (engine.Input, engine.History) {
	return benchInputMetrics(n, 3)
}

// benchInputMetrics is benchInput with the first metrics of its three:
// 2 is a cpu utilization metric and the External metric.
func benchInputMetrics(n, metrics int) (engine.Input, engine.History) {
	in, h := benchInputAll(n)
	if metrics == 2 {
		in.Spec.Metrics = []engine.MetricSpec{in.Spec.Metrics[0], in.Spec.Metrics[2]}
		in.Observations = []engine.Observation{in.Observations[0], in.Observations[2]}
	}
	return in, h
}

func benchInputAll(n int) (engine.Input, engine.History) {
	in := input(int32(n), cpuUtilization(60), podsMetric("qps", 100), externalMetric("queue", engine.AverageValueTarget, 500))
	in.Spec.MaxReplicas = int32(4 * n)
	in.Spec.Behavior = behavior()
	in.Spec.Behavior.ScaleUp.Policies = append(in.Spec.Behavior.ScaleUp.Policies, engine.Policy{Type: engine.PodsPolicy, Value: 10, PeriodSeconds: 600})
	in.Spec.Behavior.ScaleDown.Policies = append(in.Spec.Behavior.ScaleDown.Policies, engine.Policy{Type: engine.PodsPolicy, Value: 2, PeriodSeconds: 300})
	var qps engine.Observation
	for i := range n {
		name := fmt.Sprintf("web-%d", i)
		var opts []podOpt
		if i%17 == 0 {
			opts = append(opts, ready(engine.ConditionFalse, 9*time.Minute+50*time.Second)) // never ready
		}
		in.Pods = append(in.Pods, cpuPod(name, 500, opts...))
		if i%13 != 0 { // some pods are missing samples
			in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, cpuUsage(name, int64(300+i%400)))
			qps.Values = append(qps.Values, engine.MetricValue{Pod: name, Milli: int64(80 + i%60), Timestamp: now, Window: time.Minute})
		}
	}
	in.Observations[1] = qps
	in.Observations[2] = values(int64(n)*400, int64(n)*300, 1000)
	var h engine.History
	for i := range 40 {
		h.Recommendations = append(h.Recommendations, engine.Recommendation{Replicas: int32(n + i%7 - 3), At: now.Add(-time.Duration(i*15) * time.Second)})
	}
	for i := range 20 {
		h.ScaleUpEvents = append(h.ScaleUpEvents, engine.ScaleEvent{Change: int32(1 + i%3), At: now.Add(-time.Duration(i*40) * time.Second)})
		h.ScaleDownEvents = append(h.ScaleDownEvents, engine.ScaleEvent{Change: int32(1 + i%2), At: now.Add(-time.Duration(i*45) * time.Second)})
	}
	return in, h
}

// BenchmarkDecide decides targets of 10, 100 and 1000 pods with three
// metrics, and the yardstick: 100 pods with two metrics (cpu and
// External). Every name has both levels, so that a pattern selecting
// pods=100/metrics=2 runs nothing else.
func BenchmarkDecide(b *testing.B) {
	cases := []struct{ pods, metrics int }{{10, 3}, {100, 3}, {1000, 3}, {100, 2}}
	for _, c := range cases {
		b.Run(fmt.Sprintf("pods=%d/metrics=%d", c.pods, c.metrics), func(b *testing.B) {
			in, h := benchInputMetrics(c.pods, c.metrics)
			if _, err := engine.Decide(in, h); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := engine.Decide(in, h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
