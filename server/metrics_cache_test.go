package server

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/hpa/metriclabel"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestDecidedMatchesLookups: decided, which keeps the children it counts,
// exposes the same series with the same values as looking every child up
// in its vector, for decisions of every metric type (and an unknown one),
// outcome, action and error.
func TestDecidedMatchesLookups(t *testing.T) {
	cachedReg, lookedUpReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	cached, lookedUp := newMetrics(cachedReg), newMetrics(lookedUpReg)
	// reference counts one call as decided did before it kept children.
	reference := func(m *metrics, d *engine.Decision, spec engine.Spec, err error, took time.Duration) {
		action, errLabel := metriclabel.ActionNone, metriclabel.ErrorNone
		var ve *setpointv1.ValidationError
		var fe *engine.FieldError
		switch {
		case errors.As(err, &ve), errors.As(err, &fe):
			errLabel = metriclabel.ErrorSpec
		case err != nil, d != nil && d.Error != "":
			errLabel = metriclabel.ErrorInternal
		}
		if d != nil && err == nil {
			action = metriclabel.ActionOf(d.Rescale, d.DesiredReplicas, d.Explanation.CurrentReplicas)
			m.desired.WithLabelValues(action).Observe(float64(d.DesiredReplicas))
			for i, x := range d.Explanation.Metrics {
				typ := "Unknown"
				if i < len(spec.Metrics) {
					typ = string(spec.Metrics[i].Type)
				}
				mAction, mErr := metriclabel.ActionOf(true, x.Proposal, d.Explanation.CurrentReplicas), metriclabel.ErrorNone
				if x.Outcome == engine.OutcomeFailed {
					mAction, mErr = metriclabel.ActionNone, metriclabel.ErrorInternal
				} else {
					m.proposed.WithLabelValues(typ).Observe(float64(x.Proposal))
				}
				m.computations.WithLabelValues(mAction, mErr, typ).Inc()
				m.outcomes.WithLabelValues(typ, string(x.Outcome)).Inc()
			}
			for _, s := range d.Explanation.Steps {
				m.steps.WithLabelValues(string(s.Kind), s.Reason).Inc()
			}
		}
		m.reconciliations.WithLabelValues(action, errLabel).Inc()
		m.reconcileDuration.WithLabelValues(action, errLabel).Observe(took.Seconds())
	}
	spec := engine.Spec{}
	for _, typ := range []engine.MetricSourceType{engine.ResourceSource, engine.ContainerResourceSource, engine.PodsSource, engine.ObjectSource, engine.ExternalSource, "Odd"} {
		spec.Metrics = append(spec.Metrics, engine.MetricSpec{Type: typ})
	}
	outcomes := []engine.MetricOutcome{engine.OutcomeScaled, engine.OutcomeWithinTolerance, engine.OutcomeRebalanced, engine.OutcomeRebalanceHeld, engine.OutcomeFromZero, engine.OutcomeFailed, "Odd"}
	type call struct {
		d   *engine.Decision
		err error
	}
	var calls []call
	for i, outcome := range outcomes {
		for _, desired := range []int32{3, 5, 7} {
			d := &engine.Decision{DesiredReplicas: desired, Rescale: desired != 5, Explanation: engine.Explanation{CurrentReplicas: 5,
				Steps: []engine.Step{{Kind: "Limited", Reason: "ScaleUpLimit"}}}}
			if i%2 == 1 {
				d.Error = "some metrics failed"
			}
			for j := range len(spec.Metrics) + 1 { // one more than the spec's: "Unknown"
				d.Explanation.Metrics = append(d.Explanation.Metrics, engine.MetricExplanation{Outcome: outcome, Proposal: int32(j + i)})
			}
			calls = append(calls, call{d: d})
		}
	}
	calls = append(calls, call{err: &setpointv1.ValidationError{}}, call{err: &engine.FieldError{}}, call{err: errors.New("disk")})
	for _, c := range calls {
		cached.decided(c.d, spec, c.err, time.Millisecond)
		reference(lookedUp, c.d, spec, c.err, time.Millisecond)
	}
	got, err := cachedReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want, err := lookedUpReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ignoreCreated := protocmp.IgnoreFields(&dto.Counter{}, "created_timestamp")
	ignoreCreatedH := protocmp.IgnoreFields(&dto.Histogram{}, "created_timestamp")
	if diff := cmp.Diff(want, got, protocmp.Transform(), ignoreCreated, ignoreCreatedH); diff != "" {
		t.Errorf("series (-looked up +kept):\n%s", diff)
	}
}
