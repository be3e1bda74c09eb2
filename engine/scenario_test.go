package engine_test

import (
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// target drives a sequence of decisions the way the server does: each
// decision starts from the status and history the previous one left, and a
// rescale is applied (RecordScale) at the decision's instant. Its metric is
// an External AverageValue metric with target 1 (1000 milli), so a load of
// n proposes n replicas whenever n is outside the tolerance around the
// current count (and the current count when it is within).
type target struct {
	t        *testing.T
	spec     engine.Spec
	settings engine.Settings
	replicas int32
	status   engine.Status
	history  engine.History
}

func newTarget(t *testing.T, minR, maxR, replicas int32, b *engine.Behavior) *target {
	return &target{
		t:        t,
		spec:     engine.Spec{MinReplicas: minR, MaxReplicas: maxR, Behavior: b, Metrics: []engine.MetricSpec{loadMetric}},
		settings: settings(),
		replicas: replicas,
	}
}

var loadMetric = externalMetric("load", engine.AverageValueTarget, 1000)

// load is the observation of a load of n replicas.
func load(n int32) engine.Observation { return values(int64(n) * 1000) }

// input is the input of a decision at `at` observing o.
func (tg *target) input(at time.Time, o engine.Observation) engine.Input {
	return engine.Input{
		Now:          at,
		Spec:         tg.spec,
		Settings:     tg.settings,
		Scale:        engine.Scale{Replicas: tg.replicas, StatusReplicas: tg.replicas, Selector: "app=web"},
		Observations: []engine.Observation{o},
		Status:       tg.status,
	}
}

// observe decides at `at` with observation o and applies the decision.
func (tg *target) observe(at time.Time, o engine.Observation) engine.Decision {
	tg.t.Helper()
	d := decide(tg.t, tg.input(at, o), tg.history)
	tg.status, tg.history = d.Status, d.History
	if d.Rescale {
		tg.history = engine.RecordScale(tg.history, tg.spec.Behavior, tg.replicas, d.DesiredReplicas, at)
		tg.replicas = d.DesiredReplicas
	}
	return d
}

// expectScale decides at `at` with a load of n and checks the replica
// count afterwards, in the style of knative's autoscaler tests.
func (tg *target) expectScale(at time.Time, n, want int32) engine.Decision {
	tg.t.Helper()
	d := tg.observe(at, load(n))
	if tg.replicas != want {
		tg.t.Errorf("at now+%v, load %d: replicas = %d; want %d (proposal %d, steps %+v)",
			at.Sub(now), n, tg.replicas, want, d.Explanation.Proposal, d.Explanation.Steps)
	}
	return d
}

// every returns the instants from `from` to `to` inclusive, `step` apart.
func every(from, to, step time.Duration) []time.Time {
	var out []time.Time
	for d := from; d <= to; d += step {
		out = append(out, now.Add(d))
	}
	return out
}
