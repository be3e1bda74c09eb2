package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/internal/testkit"
)

// Expectations follow upstream's reconcileAutoscaler,
// computeReplicasForMetrics, validateAndParseSelector,
// shouldComputeMetricsForZeroReplicas, setStatus and setConditionInList.

// fourCPUPods is an input with 4 pods requesting 1000m, each using u.
func fourCPUPods(current int32, u int64, metrics ...engine.MetricSpec) engine.Input {
	in := input(current, metrics...)
	for _, n := range []string{"a", "b", "c", "d"} {
		in.Pods = append(in.Pods, cpuPod(n, 1000))
		in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, cpuUsage(n, u))
	}
	return in
}

func TestSeveralMetricsTakeTheMax(t *testing.T) {
	// cpu: 75/50 = 1.5; ceil(1.5·4) = 6. qps: 175/100 = 1.75; ceil(7) = 7.
	in := fourCPUPods(4, 750, cpuUtilization(50), podsMetric("qps", 100))
	in.Observations[1] = podValues("a", 175, "b", 175, "c", 175, "d", 175)
	d := decide(t, in, engine.History{})
	if d.Explanation.Winner != 1 || d.Explanation.Proposal != 7 || d.DesiredReplicas != 7 {
		t.Errorf("winner %d, proposal %d, desired %d; want 1, 7, 7", d.Explanation.Winner, d.Explanation.Proposal, d.DesiredReplicas)
	}
	if got := []int32{d.Explanation.Metrics[0].Proposal, d.Explanation.Metrics[1].Proposal}; !cmp.Equal(got, []int32{6, 7}) {
		t.Errorf("proposals %v; want [6 7]", got)
	}
	c := condition(d.Status, engine.ScalingActive)
	want := "the HPA was able to successfully calculate a replica count from pods metric qps"
	if c.Status != engine.ConditionTrue || c.Reason != "ValidMetricFound" || c.Message != want {
		t.Errorf("ScalingActive = %+v; want True/ValidMetricFound %q", c, want)
	}
}

func TestPartialMetricFailure(t *testing.T) {
	queueDown := engine.Observation{Err: "503 service unavailable"}
	cases := []struct {
		name        string
		usage       int64 // cpu of each of 4 pods at 1000m requests, target 50%
		extraFails  bool  // the cpu metric fails too
		want        int32
		wantRescale bool
		wantActive  cond
		wantErr     string // prefix
		wantWinner  int
	}{
		{
			// cpu 75%: 6 > 4: scale up despite the failed metric.
			name: "valid metrics scale up", usage: 750, want: 6, wantRescale: true,
			wantActive: cond{engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound"},
			wantErr:    "invalid metrics (1 invalid out of 2), first error is: failed to get queue external metric value:",
		},
		{
			// cpu 50%: 4 = current: no scale, still an error.
			name: "valid metrics hold", usage: 500, want: 4,
			wantActive: cond{engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound"},
			wantErr:    "invalid metrics (1 invalid out of 2), first error is:",
		},
		{
			// cpu 25%: 2 < 4: the decision fails; desired stays 9.
			name: "valid metrics would scale down", usage: 250, want: 9, wantWinner: -1,
			wantActive: cond{engine.ScalingActive, engine.ConditionFalse, "FailedGetExternalMetric"},
			wantErr:    "failed to compute desired number of replicas based on listed metrics: invalid metrics (1 invalid out of 2), first error is: failed to get queue external metric value:",
		},
		{
			// Both fail: the first failure gives the reason.
			name: "every metric failed", usage: 750, extraFails: true, want: 9, wantWinner: -1,
			wantActive: cond{engine.ScalingActive, engine.ConditionFalse, "FailedGetResourceMetric"},
			wantErr:    "failed to compute desired number of replicas based on listed metrics: invalid metrics (2 invalid out of 2), first error is: failed to get cpu resource metric value:",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fourCPUPods(4, tc.usage, cpuUtilization(50), externalMetric("queue", engine.ValueTarget, 100))
			in.Observations[1] = queueDown
			if tc.extraFails {
				in.ResourceMetrics.Err = "timeout"
			}
			in.Status.DesiredReplicas = 9
			d := decide(t, in, engine.History{})
			if d.DesiredReplicas != tc.want || d.Rescale != tc.wantRescale {
				t.Errorf("desired, rescale = %d, %v; want %d, %v", d.DesiredReplicas, d.Rescale, tc.want, tc.wantRescale)
			}
			if c := condition(d.Status, engine.ScalingActive); (cond{c.Type, c.Status, c.Reason}) != tc.wantActive {
				t.Errorf("ScalingActive = %+v; want %+v", c, tc.wantActive)
			}
			if !strings.HasPrefix(d.Error, tc.wantErr) {
				t.Errorf("Error = %q; want prefix %q", d.Error, tc.wantErr)
			}
			if d.Explanation.Winner != tc.wantWinner {
				t.Errorf("winner = %d; want %d", d.Explanation.Winner, tc.wantWinner)
			}
			if d.Status.CurrentReplicas != 4 {
				t.Errorf("status current replicas = %d; want 4", d.Status.CurrentReplicas)
			}
			// One status per spec metric; the failed one is empty.
			if n := len(d.Status.CurrentMetrics); n != 2 {
				t.Fatalf("%d current metrics; want 2", n)
			}
			if diff := cmp.Diff(engine.MetricStatus{}, d.Status.CurrentMetrics[1]); diff != "" {
				t.Errorf("failed metric's status (-want +got):\n%s", diff)
			}
			if got := d.Explanation.Metrics[1].Outcome; got != engine.OutcomeFailed {
				t.Errorf("external outcome %s; want Failed", got)
			}
		})
	}
}

func TestSelector(t *testing.T) {
	cases := []struct {
		name, selector, selectorErr string
		wantMessage, wantErr        string
	}{
		{name: "empty", wantMessage: "the HPA target's scale is missing a selector", wantErr: "selector is required"},
		{name: "unparsable", selector: "app in (", selectorErr: "found '', expected: ')'",
			wantMessage: "couldn't convert selector into a corresponding internal selector object: found '', expected: ')'",
			wantErr:     "couldn't convert selector into a corresponding internal selector object: found '', expected: ')'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fourCPUPods(4, 750, cpuUtilization(50))
			in.Scale.Selector, in.Scale.SelectorError = tc.selector, tc.selectorErr
			in.Status.DesiredReplicas = 3
			d := decide(t, in, engine.History{})
			if d.Rescale || d.DesiredReplicas != 3 || d.Status.DesiredReplicas != 3 || d.Status.CurrentReplicas != 4 {
				t.Errorf("rescale %v, desired %d, status %d/%d; want false, 3, 3/4",
					d.Rescale, d.DesiredReplicas, d.Status.DesiredReplicas, d.Status.CurrentReplicas)
			}
			c := condition(d.Status, engine.ScalingActive)
			if c.Status != engine.ConditionFalse || c.Reason != "InvalidSelector" || c.Message != tc.wantMessage {
				t.Errorf("ScalingActive = %+v; want False/InvalidSelector %q", c, tc.wantMessage)
			}
			if want := "failed to compute desired number of replicas based on listed metrics: " + tc.wantErr; d.Error != want {
				t.Errorf("Error = %q; want %q", d.Error, want)
			}
			if d.Status.CurrentMetrics != nil || d.Explanation.Metrics != nil {
				t.Errorf("metrics evaluated: %+v %+v", d.Status.CurrentMetrics, d.Explanation.Metrics)
			}
		})
	}
}

func TestGuards(t *testing.T) {
	scaledToZero := func(s engine.ConditionStatus) engine.Status {
		return engine.Status{Conditions: []engine.Condition{{Type: engine.ScaledToZero, Status: s, Reason: "x", LastTransitionTime: now.Add(-time.Hour)}}}
	}
	cases := []struct {
		name            string
		minR, maxR, cur int32
		metric          engine.MetricSpec
		status          engine.Status
		wantDesired     int32
		wantRescale     bool
		wantConds       []cond
		wantSteps       []engine.Step
		wantEvaluated   bool
	}{
		{
			name: "above max", minR: 1, maxR: 10, cur: 12, metric: loadMetric, wantDesired: 10, wantRescale: true,
			wantConds: []cond{{engine.AbleToScale, engine.ConditionTrue, "SucceededRescale"}, {engine.ScaledToZero, engine.ConditionFalse, "NotScaledToZero"}},
			wantSteps: []engine.Step{{Kind: engine.StepAboveMax, From: 12, To: 10, Reason: "TooManyReplicas"}},
		},
		{
			name: "below min", minR: 3, maxR: 10, cur: 1, metric: loadMetric, wantDesired: 3, wantRescale: true,
			wantConds: []cond{{engine.AbleToScale, engine.ConditionTrue, "SucceededRescale"}, {engine.ScaledToZero, engine.ConditionFalse, "NotScaledToZero"}},
			wantSteps: []engine.Step{{Kind: engine.StepBelowMin, From: 1, To: 3, Reason: "TooFewReplicas"}},
		},
		{
			name: "zero replicas with min 1", minR: 1, maxR: 10, cur: 0, metric: loadMetric,
			wantConds: []cond{{engine.AbleToScale, engine.ConditionTrue, "SucceededGetScale"}, {engine.ScalingActive, engine.ConditionFalse, "ScalingDisabled"}},
			wantSteps: []engine.Step{{Kind: engine.StepScalingDisabled, Reason: "ScalingDisabled"}},
		},
		{
			name: "zero replicas with min 0 never scaled to zero", minR: 0, maxR: 10, cur: 0, metric: loadMetric,
			wantConds: []cond{{engine.AbleToScale, engine.ConditionTrue, "SucceededGetScale"}, {engine.ScalingActive, engine.ConditionFalse, "ScalingDisabled"}},
			wantSteps: []engine.Step{{Kind: engine.StepScalingDisabled, Reason: "ScalingDisabled"}},
		},
		{
			name: "zero replicas with ScaledToZero=False", minR: 0, maxR: 10, cur: 0, metric: loadMetric, status: scaledToZero(engine.ConditionFalse),
			wantConds: []cond{{engine.ScaledToZero, engine.ConditionFalse, "x"}, {engine.AbleToScale, engine.ConditionTrue, "SucceededGetScale"}, {engine.ScalingActive, engine.ConditionFalse, "ScalingDisabled"}},
			wantSteps: []engine.Step{{Kind: engine.StepScalingDisabled, Reason: "ScalingDisabled"}},
		},
		{
			// min > 0 and ScaledToZero=True: metrics are evaluated even for
			// a pods-only spec (here they fail: no pods), so no ScalingDisabled.
			name: "zero replicas, min 1, ScaledToZero=True, cpu only", minR: 1, maxR: 10, cur: 0, metric: cpuUtilization(50), status: scaledToZero(engine.ConditionTrue),
			wantConds:     []cond{{engine.ScaledToZero, engine.ConditionTrue, "x"}, {engine.AbleToScale, engine.ConditionTrue, "SucceededGetScale"}, {engine.ScalingActive, engine.ConditionFalse, "FailedGetResourceMetric"}},
			wantEvaluated: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := input(tc.cur, tc.metric)
			in.Spec.MinReplicas, in.Spec.MaxReplicas = tc.minR, tc.maxR
			in.Observations[0] = engine.Observation{Err: "metrics are not read"}
			in.Status = tc.status
			d := decide(t, in, engine.History{})
			if d.DesiredReplicas != tc.wantDesired || d.Rescale != tc.wantRescale {
				t.Errorf("desired, rescale = %d, %v; want %d, %v", d.DesiredReplicas, d.Rescale, tc.wantDesired, tc.wantRescale)
			}
			if diff := cmp.Diff(tc.wantConds, conds(d.Status)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSteps, d.Explanation.Steps, ignoreMessages); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if got := len(d.Explanation.Metrics) > 0; got != tc.wantEvaluated {
				t.Errorf("metrics evaluated = %v; want %v", got, tc.wantEvaluated)
			}
			if !tc.wantEvaluated && d.Error != "" {
				t.Errorf("Error = %q; want none", d.Error)
			}
			if d.Status.DesiredReplicas != tc.wantDesired || d.Status.CurrentReplicas != tc.cur {
				t.Errorf("status desired/current = %d/%d; want %d/%d", d.Status.DesiredReplicas, d.Status.CurrentReplicas, tc.wantDesired, tc.cur)
			}
			if tc.wantRescale != !d.Status.LastScaleTime.IsZero() {
				t.Errorf("LastScaleTime = %v with rescale %v", d.Status.LastScaleTime, tc.wantRescale)
			}
		})
	}
}

// TestScaleToZero steps a target with minReplicas 0 down to zero and back.
func TestScaleToZero(t *testing.T) {
	b := behavior()
	b.ScaleDown.StabilizationWindowSeconds = 0
	tg := newTarget(t, 0, 10, 2, b)

	tg.expectScale(now, 2, 2)
	// Load 0 proposes ceil(0) = 0; Percent 100 allows 2·0 = 0.
	d := tg.expectScale(now.Add(15*time.Second), 0, 0)
	if c := condition(d.Status, engine.ScaledToZero); c == nil || c.Status != engine.ConditionTrue || c.Reason != "ScaledToZero" {
		t.Fatalf("ScaledToZero = %+v; want True/ScaledToZero", c)
	}
	// At 0 with ScaledToZero=True the metric is still read: 0 stays 0
	// (statusReplicas 0 makes the ratio NaN, ceil(0/1000) = 0), and the
	// condition is left alone.
	d = tg.expectScale(now.Add(30*time.Second), 0, 0)
	if d.Rescale || condition(d.Status, engine.ScaledToZero).Status != engine.ConditionTrue {
		t.Errorf("rescale %v, ScaledToZero %+v; want no rescale, still True", d.Rescale, condition(d.Status, engine.ScaledToZero))
	}
	if c := condition(d.Status, engine.ScalingActive); c.Status != engine.ConditionTrue {
		t.Errorf("ScalingActive = %+v; want True", c)
	}
	// Load 3 from zero: ceil(3000/1000) = 3; from 0 Pods 4/15s allows 4.
	d = tg.expectScale(now.Add(45*time.Second), 3, 3)
	if c := condition(d.Status, engine.ScaledToZero); c.Status != engine.ConditionFalse || c.Reason != "NotScaledToZero" {
		t.Errorf("ScaledToZero = %+v; want False/NotScaledToZero", c)
	}
	if got := d.Explanation.Metrics[0].Outcome; got != engine.OutcomeScaled {
		t.Errorf("outcome %s; want Scaled", got)
	}
}

// TestScaleFromZeroObjectValue: from 0 an Object Value metric proposes
// ceil(ratio) without tolerance (1.05 would be within it otherwise).
func TestScaleFromZeroObjectValue(t *testing.T) {
	in := input(0, objectMetric("requests", engine.ValueTarget, 1000))
	in.Spec.MinReplicas = 0
	in.Observations[0] = values(1050)
	in.Status.Conditions = []engine.Condition{{Type: engine.ScaledToZero, Status: engine.ConditionTrue, Reason: "ScaledToZero"}}
	d := decide(t, in, engine.History{})
	want := engine.MetricExplanation{Name: "Ingress metric requests", Outcome: engine.OutcomeFromZero, Proposal: 2,
		Current: 1050, Target: 1000, Ratio: 1.05, RebalancedRatio: 1.05}
	if diff := cmp.Diff(want, d.Explanation.Metrics[0]); diff != "" {
		t.Errorf("metric (-want +got):\n%s", diff)
	}
	if !d.Rescale || d.DesiredReplicas != 2 {
		t.Errorf("rescale, desired = %v, %d; want true, 2", d.Rescale, d.DesiredReplicas)
	}
}

// TestScaleFromZeroRaisedToMin: minReplicas raised while at zero; the
// behavior's rate limit does not apply the minimum on a scale-up, so the
// engine raises the count to it afterwards.
func TestScaleFromZeroRaisedToMin(t *testing.T) {
	tg := newTarget(t, 3, 10, 0, behavior())
	tg.status.Conditions = []engine.Condition{{Type: engine.ScaledToZero, Status: engine.ConditionTrue, Reason: "ScaledToZero"}}
	d := tg.expectScale(now, 1, 3)
	want := []engine.Step{{Kind: engine.StepMinFromZero, From: 1, To: 3, Reason: "TooFewReplicas"}}
	if diff := cmp.Diff(want, d.Explanation.Steps, ignoreMessages); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if c := condition(d.Status, engine.ScaledToZero); c.Status != engine.ConditionFalse {
		t.Errorf("ScaledToZero = %+v; want False", c)
	}
}

// TestConditionTransitions carries conditions over decisions: the order is
// the order of first setting, and LastTransitionTime moves only when the
// status flips.
func TestConditionTransitions(t *testing.T) {
	tg := newTarget(t, 1, 100, 3, nil)
	t0, t1, t2, t3, t4 := now, now.Add(15*time.Second), now.Add(30*time.Second), now.Add(45*time.Second), now.Add(time.Minute)
	c := func(ct engine.ConditionType, s engine.ConditionStatus, reason string, at time.Time) engine.Condition {
		return engine.Condition{Type: ct, Status: s, Reason: reason, LastTransitionTime: at}
	}
	check := func(want ...engine.Condition) {
		t.Helper()
		if diff := cmp.Diff(want, tg.status.Conditions, cmpopts.IgnoreFields(engine.Condition{}, "Message")); diff != "" {
			t.Errorf("conditions (-want +got):\n%s", diff)
		}
	}
	tg.expectScale(t0, 3, 3)
	check(c(engine.AbleToScale, engine.ConditionTrue, "ReadyForNewScale", t0),
		c(engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound", t0),
		c(engine.ScalingLimited, engine.ConditionFalse, "DesiredWithinRange", t0))

	tg.expectScale(t1, 8, 6) // limited to 2·3
	check(c(engine.AbleToScale, engine.ConditionTrue, "SucceededRescale", t0),
		c(engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound", t0),
		c(engine.ScalingLimited, engine.ConditionTrue, "ScaleUpLimit", t1),
		c(engine.ScaledToZero, engine.ConditionFalse, "NotScaledToZero", t1))

	tg.expectScale(t2, 8, 8)
	check(c(engine.AbleToScale, engine.ConditionTrue, "SucceededRescale", t0),
		c(engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound", t0),
		c(engine.ScalingLimited, engine.ConditionFalse, "DesiredWithinRange", t2),
		c(engine.ScaledToZero, engine.ConditionFalse, "NotScaledToZero", t1))

	tg.expectScale(t3, 8, 8)
	check(c(engine.AbleToScale, engine.ConditionTrue, "ReadyForNewScale", t0),
		c(engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound", t0),
		c(engine.ScalingLimited, engine.ConditionFalse, "DesiredWithinRange", t2),
		c(engine.ScaledToZero, engine.ConditionFalse, "NotScaledToZero", t1))

	d := tg.observe(t4, engine.Observation{Err: "boom"})
	check(c(engine.AbleToScale, engine.ConditionTrue, "SucceededGetScale", t0),
		c(engine.ScalingActive, engine.ConditionFalse, "FailedGetExternalMetric", t4),
		c(engine.ScalingLimited, engine.ConditionFalse, "DesiredWithinRange", t2),
		c(engine.ScaledToZero, engine.ConditionFalse, "NotScaledToZero", t1))
	if d.Status.DesiredReplicas != 8 || d.Status.LastScaleTime != t2 {
		t.Errorf("status desired %d, last scale %v; want 8, %v", d.Status.DesiredReplicas, d.Status.LastScaleTime, t2)
	}
}

func TestRescaleFailed(t *testing.T) {
	hourAgo := now.Add(-time.Hour)
	at := now.Add(time.Second)
	c := func(ct engine.ConditionType, s engine.ConditionStatus, reason string, at time.Time) engine.Condition {
		return engine.Condition{Type: ct, Status: s, Reason: reason, LastTransitionTime: at}
	}
	t.Run("scale up", func(t *testing.T) {
		prev := engine.Status{CurrentReplicas: 3, DesiredReplicas: 3, LastScaleTime: hourAgo, Conditions: []engine.Condition{
			c(engine.AbleToScale, engine.ConditionTrue, "ReadyForNewScale", hourAgo),
			c(engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound", hourAgo),
			c(engine.ScalingLimited, engine.ConditionFalse, "DesiredWithinRange", hourAgo),
			c(engine.ScaledToZero, engine.ConditionFalse, "NotScaledToZero", hourAgo),
		}}
		tg := newTarget(t, 1, 10, 3, nil)
		tg.status = prev
		d := decide(t, tg.input(now, load(5)), engine.History{})
		got := engine.RescaleFailed(prev, d, at, "conflict")
		want := engine.Status{CurrentReplicas: 3, DesiredReplicas: 3, LastScaleTime: hourAgo,
			CurrentMetrics: d.Status.CurrentMetrics,
			Conditions: []engine.Condition{
				{Type: engine.AbleToScale, Status: engine.ConditionFalse, Reason: "FailedUpdateScale",
					Message: "the HPA controller was unable to update the target scale: conflict", LastTransitionTime: at},
				c(engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound", hourAgo),
				c(engine.ScalingLimited, engine.ConditionFalse, "DesiredWithinRange", hourAgo),
				c(engine.ScaledToZero, engine.ConditionFalse, "NotScaledToZero", hourAgo),
			}}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(engine.Condition{}, "Message")); diff != "" {
			t.Errorf("status (-want +got):\n%s", diff)
		}
		if got.Conditions[0].Message != want.Conditions[0].Message {
			t.Errorf("AbleToScale message %q; want %q", got.Conditions[0].Message, want.Conditions[0].Message)
		}
		if d.Status.Conditions[0].Status != engine.ConditionTrue {
			t.Errorf("RescaleFailed modified the decision's status")
		}
	})
	t.Run("scale to zero failed restores ScaledToZero", func(t *testing.T) {
		b := behavior()
		b.ScaleDown.StabilizationWindowSeconds = 0
		tg := newTarget(t, 0, 10, 2, b)
		d := decide(t, tg.input(now, load(0)), engine.History{})
		if !d.Rescale || d.DesiredReplicas != 0 || condition(d.Status, engine.ScaledToZero).Status != engine.ConditionTrue {
			t.Fatalf("decision %d/%v %+v; want a rescale to 0 with ScaledToZero=True", d.DesiredReplicas, d.Rescale, d.Status.Conditions)
		}
		got := engine.RescaleFailed(engine.Status{}, d, now, "forbidden")
		if condition(got, engine.ScaledToZero) != nil {
			t.Errorf("ScaledToZero present after a failed first rescale: %+v", got.Conditions)
		}
		if !got.LastScaleTime.IsZero() || got.DesiredReplicas != 0 || got.CurrentReplicas != 2 {
			t.Errorf("status %+v; want previous desired and last scale time", got)
		}
	})
	t.Run("scale from zero failed keeps ScaledToZero=True", func(t *testing.T) {
		prev := engine.Status{DesiredReplicas: 0, LastScaleTime: hourAgo, Conditions: []engine.Condition{
			c(engine.AbleToScale, engine.ConditionTrue, "SucceededRescale", hourAgo),
			c(engine.ScalingActive, engine.ConditionTrue, "ValidMetricFound", hourAgo),
			c(engine.ScaledToZero, engine.ConditionTrue, "ScaledToZero", hourAgo),
		}}
		tg := newTarget(t, 0, 10, 0, nil)
		tg.status = prev
		d := decide(t, tg.input(now, load(2)), engine.History{})
		if !d.Rescale || d.DesiredReplicas != 2 {
			t.Fatalf("decision %d/%v; want a rescale to 2", d.DesiredReplicas, d.Rescale)
		}
		got := engine.RescaleFailed(prev, d, now, "forbidden")
		if diff := cmp.Diff(prev.Conditions[2], *condition(got, engine.ScaledToZero)); diff != "" {
			t.Errorf("ScaledToZero (-want +got):\n%s", diff)
		}
		if got.LastScaleTime != hourAgo || got.DesiredReplicas != 0 {
			t.Errorf("last scale %v, desired %d; want %v, 0", got.LastScaleTime, got.DesiredReplicas, hourAgo)
		}
		if c := condition(got, engine.AbleToScale); c.Status != engine.ConditionFalse || c.LastTransitionTime != now {
			t.Errorf("AbleToScale = %+v; want False since now", c)
		}
	})
}

// TestExplanation is the package documentation's worked example with a
// recommendation of 7 two minutes ago: 5 → 7 (stabilized) → 6 (limited).
func TestExplanation(t *testing.T) {
	in := cpuInput(3, 60, []engine.Pod{cpuPod("a", 500), cpuPod("b", 500), cpuPod("c", 500)},
		cpuUsage("a", 460), cpuUsage("b", 430), cpuUsage("c", 470))
	in.Spec.MaxReplicas = 10
	h := engine.History{Recommendations: []engine.Recommendation{{Replicas: 7, At: now.Add(-2 * time.Minute)}}}
	d := decide(t, in, h)
	want := engine.Explanation{
		CurrentReplicas: 3,
		Metrics: []engine.MetricExplanation{{Name: cpuName, Outcome: engine.OutcomeScaled, Proposal: 5,
			Current: 90, Target: 60, Ratio: 1.5, RebalancedRatio: 1.5, ReadyPods: 3}},
		Winner:   0,
		Proposal: 5,
		Steps: []engine.Step{
			{Kind: engine.StepStabilized, From: 5, To: 7, Reason: "ScaleDownStabilized",
				Message: "recent recommendations were higher than current one, applying the highest recent recommendation"},
			{Kind: engine.StepLimited, From: 7, To: 6, Reason: "ScaleUpLimit",
				Message: "the desired replica count is increasing faster than the maximum scale rate"},
		},
	}
	if diff := cmp.Diff(want, d.Explanation); diff != "" {
		t.Errorf("explanation (-want +got):\n%s", diff)
	}
	if !d.Rescale || d.DesiredReplicas != 6 || d.Error != "" {
		t.Errorf("rescale %v, desired %d, error %q; want true, 6, none", d.Rescale, d.DesiredReplicas, d.Error)
	}
	wantStatus := engine.Status{CurrentReplicas: 3, DesiredReplicas: 6, LastScaleTime: now,
		CurrentMetrics: []engine.MetricStatus{{Type: engine.ResourceSource, Resource: "cpu",
			AverageUtilization: testkit.Ptr[int32](90), AverageValue: &engine.Quantity{Milli: 453, Format: engine.DecimalSI}}},
		Conditions: []engine.Condition{
			{Type: engine.AbleToScale, Status: engine.ConditionTrue, Reason: "SucceededRescale",
				Message: "the HPA controller was able to update the target scale to 6", LastTransitionTime: now},
			{Type: engine.ScalingActive, Status: engine.ConditionTrue, Reason: "ValidMetricFound",
				Message: "the HPA was able to successfully calculate a replica count from " + cpuName, LastTransitionTime: now},
			{Type: engine.ScalingLimited, Status: engine.ConditionTrue, Reason: "ScaleUpLimit",
				Message: "the desired replica count is increasing faster than the maximum scale rate", LastTransitionTime: now},
			{Type: engine.ScaledToZero, Status: engine.ConditionFalse, Reason: "NotScaledToZero",
				Message: "the HPA controller did not scale the workload to zero", LastTransitionTime: now},
		}}
	if diff := cmp.Diff(wantStatus, d.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	// The unstabilized proposal is recorded, after the existing one.
	wantRecs := []engine.Recommendation{{Replicas: 7, At: now.Add(-2 * time.Minute)}, {Replicas: 5, At: now}}
	if diff := cmp.Diff(wantRecs, d.History.Recommendations); diff != "" {
		t.Errorf("recommendations (-want +got):\n%s", diff)
	}
}

// TestDecideDoesNotModifyArguments: Decide is pure; the caller's input and
// history are left as they were.
func TestDecideDoesNotModifyArguments(t *testing.T) {
	in := cpuInput(3, 60, []engine.Pod{cpuPod("a", 500), cpuPod("b", 500), cpuPod("c", 500)},
		cpuUsage("a", 460), cpuUsage("b", 430))
	in.Status.Conditions = []engine.Condition{{Type: engine.AbleToScale, Status: engine.ConditionFalse, Reason: "FailedUpdateScale"}}
	h := engine.History{
		Recommendations: []engine.Recommendation{{Replicas: 9, At: now.Add(-time.Hour)}, {Replicas: 4, At: now.Add(-time.Minute)}},
		ScaleUpEvents:   []engine.ScaleEvent{{Change: 1, At: now.Add(-time.Hour)}},
	}
	wantIn, wantH := cloneInput(in), cloneHistory(h)
	d1 := decide(t, in, h)
	d2 := decide(t, in, h)
	if diff := cmp.Diff(wantIn, in); diff != "" {
		t.Errorf("input modified (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(wantH, h); diff != "" {
		t.Errorf("history modified (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(d1, d2); diff != "" {
		t.Errorf("second decision differs (-first +second):\n%s", diff)
	}
}

func cloneInput(in engine.Input) engine.Input {
	out := in
	out.Status.Conditions = append([]engine.Condition(nil), in.Status.Conditions...)
	out.Pods = append([]engine.Pod(nil), in.Pods...)
	out.ResourceMetrics.Pods = append([]engine.PodUsage(nil), in.ResourceMetrics.Pods...)
	out.Observations = append([]engine.Observation(nil), in.Observations...)
	return out
}
