package engine_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
)

// Expectations follow upstream's normalizeDesiredReplicas,
// stabilizeRecommendation, convertDesiredReplicasWithRules (legacy) and
// normalizeDesiredReplicasWithBehaviors, stabilizeRecommendationWithBehaviors,
// convertDesiredReplicasWithBehaviorRate, calculateScale{Up,Down}Limit*,
// getReplicasChangePerPeriod and storeScaleEvent (behavior).

func TestLegacyLimits(t *testing.T) {
	oldRec := engine.History{Recommendations: []engine.Recommendation{{Replicas: 3, At: now.Add(-10 * time.Minute)}}}
	cases := []struct {
		name             string
		minR, maxR, cur  int32
		load             int32
		want             int32
		wantLimited      cond
		wantSteps        []engine.Step
		history          engine.History
		wantStabilizedBy int32 // 0: no stabilization step
	}{
		{
			name: "scale-up limited to 4 from 1", minR: 1, maxR: 100, cur: 1, load: 10, want: 4,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleUpLimit"},
			wantSteps:   []engine.Step{{Kind: engine.StepLimited, From: 10, To: 4, Reason: "ScaleUpLimit"}},
		},
		{
			name: "scale-up limited to twice the current count", minR: 1, maxR: 100, cur: 3, load: 10, want: 6,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleUpLimit"},
			wantSteps:   []engine.Step{{Kind: engine.StepLimited, From: 10, To: 6, Reason: "ScaleUpLimit"}},
		},
		{
			name: "max below the rate limit", minR: 1, maxR: 5, cur: 3, load: 10, want: 5,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "TooManyReplicas"},
			wantSteps:   []engine.Step{{Kind: engine.StepLimited, From: 10, To: 5, Reason: "TooManyReplicas"}},
		},
		{
			name: "below min", minR: 2, maxR: 10, cur: 3, load: 1, want: 2, history: oldRec,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "TooFewReplicas"},
			wantSteps:   []engine.Step{{Kind: engine.StepLimited, From: 1, To: 2, Reason: "TooFewReplicas"}},
		},
		{
			name: "within range", minR: 1, maxR: 10, cur: 3, load: 5, want: 5,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionFalse, "DesiredWithinRange"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t, tc.minR, tc.maxR, tc.cur, nil)
			d := decide(t, tg.input(now, load(tc.load)), tc.history)
			if d.DesiredReplicas != tc.want || !d.Rescale {
				t.Errorf("desired, rescale = %d, %v; want %d, true", d.DesiredReplicas, d.Rescale, tc.want)
			}
			c := condition(d.Status, engine.ScalingLimited)
			if c == nil || (cond{c.Type, c.Status, c.Reason}) != tc.wantLimited {
				t.Errorf("ScalingLimited = %+v; want %+v", c, tc.wantLimited)
			}
			if diff := cmp.Diff(tc.wantSteps, d.Explanation.Steps, ignoreMessages); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLegacyDownscaleStabilization steps the clock: the highest
// recommendation of the last 5 minutes holds the count; a recommendation
// exactly at the cutoff still counts (upstream drops only those Before it).
func TestLegacyDownscaleStabilization(t *testing.T) {
	tg := newTarget(t, 1, 10, 5, nil)
	for _, at := range every(0, 45*time.Second, 15*time.Second) {
		tg.expectScale(at, 5, 5)
	}
	// The load drops at +1m; the last recommendation of 5 was at +45s.
	for _, at := range every(time.Minute, 5*time.Minute+45*time.Second, 15*time.Second) {
		d := tg.expectScale(at, 2, 5)
		if c := condition(d.Status, engine.AbleToScale); c.Reason != "ScaleDownStabilized" {
			t.Errorf("at now+%v: AbleToScale reason %q; want ScaleDownStabilized", at.Sub(now), c.Reason)
		}
	}
	// +45s falls out of the window at +6m.
	d := tg.expectScale(now.Add(6*time.Minute), 2, 2)
	if c := condition(d.Status, engine.AbleToScale); c.Reason != "SucceededRescale" {
		t.Errorf("AbleToScale reason %q; want SucceededRescale", c.Reason)
	}
	if len(d.Explanation.Steps) != 0 {
		t.Errorf("steps %+v; want none once released", d.Explanation.Steps)
	}
}

// TestLegacyFirstDecisionSeedsHistory: a new target's current count is its
// first recommendation, so a first decision never scales down.
func TestLegacyFirstDecisionSeedsHistory(t *testing.T) {
	tg := newTarget(t, 1, 10, 5, nil)
	d := tg.expectScale(now, 1, 5)
	want := []engine.Step{{Kind: engine.StepStabilized, From: 1, To: 5, Reason: "ScaleDownStabilized"}}
	if diff := cmp.Diff(want, d.Explanation.Steps, ignoreMessages); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	wantRecs := []engine.Recommendation{{Replicas: 5, At: now.Add(-time.Nanosecond)}, {Replicas: 1, At: now}}
	if diff := cmp.Diff(wantRecs, d.History.Recommendations); diff != "" {
		t.Errorf("recommendations (-want +got):\n%s", diff)
	}
	// Five minutes on, the seed is out of the window.
	tg.expectScale(now.Add(5*time.Minute), 1, 1)
}

// TestLegacyRecommendationOverwrite: a recommendation outside the window is
// overwritten in place (the last such entry), as upstream does.
func TestLegacyRecommendationOverwrite(t *testing.T) {
	h := engine.History{Recommendations: []engine.Recommendation{
		{Replicas: 9, At: now.Add(-20 * time.Minute)},
		{Replicas: 8, At: now.Add(-10 * time.Minute)},
		{Replicas: 4, At: now.Add(-time.Minute)},
	}}
	tg := newTarget(t, 1, 10, 4, nil)
	d := decide(t, tg.input(now, load(4)), h)
	want := []engine.Recommendation{
		{Replicas: 9, At: now.Add(-20 * time.Minute)},
		{Replicas: 4, At: now},
		{Replicas: 4, At: now.Add(-time.Minute)},
	}
	if diff := cmp.Diff(want, d.History.Recommendations); diff != "" {
		t.Errorf("recommendations (-want +got):\n%s", diff)
	}
	if h.Recommendations[1].Replicas != 8 {
		t.Errorf("Decide modified its history argument")
	}
}

func TestBehaviorScaleUpStabilization(t *testing.T) {
	b := behavior()
	b.ScaleUp.StabilizationWindowSeconds = 60
	b.ScaleUp.Policies = []engine.Policy{{Type: engine.PercentPolicy, Value: 1000, PeriodSeconds: 15}}
	tg := newTarget(t, 1, 20, 2, b)
	for _, at := range every(0, 45*time.Second, 15*time.Second) {
		d := tg.expectScale(at, 8, 2)
		want := []engine.Step{{Kind: engine.StepStabilized, From: 8, To: 2, Reason: "ScaleUpStabilized"}}
		if diff := cmp.Diff(want, d.Explanation.Steps, ignoreMessages); diff != "" {
			t.Errorf("at now+%v: steps (-want +got):\n%s", at.Sub(now), diff)
		}
		if c := condition(d.Status, engine.AbleToScale); c.Reason != "ScaleUpStabilized" {
			t.Errorf("at now+%v: AbleToScale reason %q; want ScaleUpStabilized", at.Sub(now), c.Reason)
		}
	}
	// The seed (2, just before now) leaves the window at +60s: a
	// recommendation exactly at the cutoff no longer counts (After).
	tg.expectScale(now.Add(60*time.Second), 8, 8)
}

func TestBehaviorScaleDownStabilization(t *testing.T) {
	b := behavior()
	b.ScaleDown.StabilizationWindowSeconds = 120
	tg := newTarget(t, 1, 20, 6, b)
	for _, at := range every(0, 45*time.Second, 15*time.Second) {
		tg.expectScale(at, 6, 6)
	}
	for _, at := range every(time.Minute, 2*time.Minute+30*time.Second, 15*time.Second) {
		d := tg.expectScale(at, 2, 6)
		if c := condition(d.Status, engine.AbleToScale); c.Reason != "ScaleDownStabilized" {
			t.Errorf("at now+%v: AbleToScale reason %q; want ScaleDownStabilized", at.Sub(now), c.Reason)
		}
	}
	// The last 6 (at +45s) is exactly at the cutoff at +2m45s: excluded.
	tg.expectScale(now.Add(2*time.Minute+45*time.Second), 2, 2)
}

func TestBehaviorPodsPolicyOverTime(t *testing.T) {
	b := behavior()
	b.ScaleUp.Policies = []engine.Policy{{Type: engine.PodsPolicy, Value: 2, PeriodSeconds: 60}}
	tg := newTarget(t, 1, 20, 2, b)
	want := map[time.Duration]int32{0: 4, 60 * time.Second: 6, 120 * time.Second: 8, 180 * time.Second: 10}
	cur := int32(0)
	for _, at := range every(0, 4*time.Minute, 15*time.Second) {
		if w, ok := want[at.Sub(now)]; ok {
			cur = w
		}
		d := tg.expectScale(at, 10, cur)
		if cur < 10 {
			c := condition(d.Status, engine.ScalingLimited)
			if c.Status != engine.ConditionTrue || c.Reason != "ScaleUpLimit" {
				t.Errorf("at now+%v: ScalingLimited %s/%s; want True/ScaleUpLimit", at.Sub(now), c.Status, c.Reason)
			}
		}
	}
}

func TestBehaviorPercentPolicyOverTime(t *testing.T) {
	b := behavior()
	b.ScaleDown.StabilizationWindowSeconds = 0
	b.ScaleDown.Policies = []engine.Policy{{Type: engine.PercentPolicy, Value: 50, PeriodSeconds: 60}}
	tg := newTarget(t, 1, 20, 10, b)
	// 10·0.5 = 5; within the period the start stays 10; then 5·0.5 = 2.5
	// truncated to 2; then 1.
	want := map[time.Duration]int32{0: 5, 60 * time.Second: 2, 120 * time.Second: 1}
	cur := int32(0)
	for _, at := range every(0, 3*time.Minute, 15*time.Second) {
		if w, ok := want[at.Sub(now)]; ok {
			cur = w
		}
		tg.expectScale(at, 1, cur)
	}
}

func TestBehaviorRateLimits(t *testing.T) {
	up := func(sel engine.SelectPolicy) *engine.Behavior {
		b := behavior()
		b.ScaleUp.SelectPolicy = sel
		b.ScaleUp.Policies = []engine.Policy{
			{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 60},
			{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 60},
		}
		return b
	}
	down := func(sel engine.SelectPolicy) *engine.Behavior {
		b := behavior()
		b.ScaleDown.StabilizationWindowSeconds = 0
		b.ScaleDown.SelectPolicy = sel
		b.ScaleDown.Policies = []engine.Policy{
			{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 60},
			{Type: engine.PercentPolicy, Value: 50, PeriodSeconds: 60},
		}
		return b
	}
	events := func(up, down []engine.ScaleEvent) engine.History {
		return engine.History{ScaleUpEvents: up, ScaleDownEvents: down}
	}
	cases := []struct {
		name            string
		b               *engine.Behavior
		minR, maxR, cur int32
		load            int32
		history         engine.History
		want            int32
		wantLimited     cond
	}{
		// Up from 10: Pods 10+4 = 14, Percent ceil(10·2) = 20.
		{name: "up Max", b: up(engine.SelectMax), minR: 1, maxR: 100, cur: 10, load: 30, want: 20,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleUpLimit"}},
		{name: "up Min", b: up(engine.SelectMin), minR: 1, maxR: 100, cur: 10, load: 30, want: 14,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleUpLimit"}},
		{name: "up Disabled", b: up(engine.SelectDisabled), minR: 1, maxR: 100, cur: 10, load: 30, want: 10,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleUpLimit"}},
		{name: "up limited by max", b: up(engine.SelectMax), minR: 1, maxR: 15, cur: 10, load: 30, want: 15,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "TooManyReplicas"}},
		{name: "up within the limit", b: up(engine.SelectMax), minR: 1, maxR: 100, cur: 10, load: 18, want: 18,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionFalse, "DesiredWithinRange"}},
		// A +5 at -30s: the period started at 5; Max(9, 10) = 10 = current.
		{name: "up with a recent scale-up", b: up(engine.SelectMax), minR: 1, maxR: 100, cur: 10, load: 30, want: 10,
			history:     events([]engine.ScaleEvent{{Change: 5, At: now.Add(-30 * time.Second)}}, nil),
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleUpLimit"}},
		// An event exactly one period old is outside it (After the cutoff).
		{name: "up with a scale-up exactly one period ago", b: up(engine.SelectMax), minR: 1, maxR: 100, cur: 10, load: 30, want: 20,
			history:     events([]engine.ScaleEvent{{Change: 5, At: now.Add(-60 * time.Second)}}, nil),
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleUpLimit"}},
		// A -6 at -10s: the period started at 16; Max(20, 32) = 32.
		{name: "up after a recent scale-down", b: up(engine.SelectMax), minR: 1, maxR: 100, cur: 10, load: 40, want: 32,
			history:     events(nil, []engine.ScaleEvent{{Change: 6, At: now.Add(-10 * time.Second)}}),
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleUpLimit"}},
		// Down from 20: Pods 20-4 = 16, Percent 20·0.5 = 10.
		{name: "down Max", b: down(engine.SelectMax), minR: 1, maxR: 100, cur: 20, load: 1, want: 10,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleDownLimit"}},
		{name: "down Min", b: down(engine.SelectMin), minR: 1, maxR: 100, cur: 20, load: 1, want: 16,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleDownLimit"}},
		{name: "down Disabled", b: down(engine.SelectDisabled), minR: 1, maxR: 100, cur: 20, load: 1, want: 20,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleDownLimit"}},
		{name: "down limited by min", b: down(engine.SelectMax), minR: 12, maxR: 100, cur: 20, load: 1, want: 12,
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "TooFewReplicas"}},
		// A +4 at -10s: the period started at 16: Max → min(12, 8) = 8.
		{name: "down after a recent scale-up", b: down(engine.SelectMax), minR: 1, maxR: 100, cur: 20, load: 1, want: 8,
			history:     events([]engine.ScaleEvent{{Change: 4, At: now.Add(-10 * time.Second)}}, nil),
			wantLimited: cond{engine.ScalingLimited, engine.ConditionTrue, "ScaleDownLimit"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t, tc.minR, tc.maxR, tc.cur, tc.b)
			d := decide(t, tg.input(now, load(tc.load)), tc.history)
			if d.DesiredReplicas != tc.want || d.Rescale != (tc.want != tc.cur) {
				t.Errorf("desired, rescale = %d, %v; want %d, %v", d.DesiredReplicas, d.Rescale, tc.want, tc.want != tc.cur)
			}
			c := condition(d.Status, engine.ScalingLimited)
			if c == nil || (cond{c.Type, c.Status, c.Reason}) != tc.wantLimited {
				t.Errorf("ScalingLimited = %+v; want %+v", c, tc.wantLimited)
			}
			var wantSteps []engine.Step
			if tc.wantLimited.Status == engine.ConditionTrue {
				wantSteps = []engine.Step{{Kind: engine.StepLimited, From: tc.load, To: tc.want, Reason: tc.wantLimited.Reason}}
			}
			if diff := cmp.Diff(wantSteps, d.Explanation.Steps, ignoreMessages); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBehaviorStabilizationThenLimit(t *testing.T) {
	// From 10 the metric proposes 3. The 300s scale-down window holds the
	// recommendation of 8 made 2 minutes ago: 3 → 8 (stabilized). Then
	// Pods 1/60s allows 10-1 = 9 at least: 8 → 9 (limited).
	b := behavior()
	b.ScaleDown.Policies = []engine.Policy{{Type: engine.PodsPolicy, Value: 1, PeriodSeconds: 60}}
	h := engine.History{Recommendations: []engine.Recommendation{{Replicas: 8, At: now.Add(-2 * time.Minute)}}}
	tg := newTarget(t, 1, 20, 10, b)
	d := decide(t, tg.input(now, load(3)), h)
	want := engine.Explanation{
		CurrentReplicas: 10,
		Metrics: []engine.MetricExplanation{{Name: "external metric load(nil)", Outcome: engine.OutcomeScaled, Proposal: 3,
			Current: 3000, Target: 1000, Ratio: 0.3, RebalancedRatio: 0.3}},
		Winner:   0,
		Proposal: 3,
		Steps: []engine.Step{
			{Kind: engine.StepStabilized, From: 3, To: 8, Reason: "ScaleDownStabilized"},
			{Kind: engine.StepLimited, From: 8, To: 9, Reason: "ScaleDownLimit"},
		},
	}
	if diff := cmp.Diff(want, d.Explanation, ignoreMessages); diff != "" {
		t.Errorf("explanation (-want +got):\n%s", diff)
	}
	if d.DesiredReplicas != 9 {
		t.Errorf("desired = %d; want 9", d.DesiredReplicas)
	}
}

func TestRecordScale(t *testing.T) {
	b := behavior()
	b.ScaleUp.Policies = []engine.Policy{{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 60}, {Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 30}}
	b.ScaleDown.Policies = []engine.Policy{{Type: engine.PercentPolicy, Value: 50, PeriodSeconds: 120}}
	ev := func(change int32, ago time.Duration, outdated bool) engine.ScaleEvent {
		return engine.ScaleEvent{Change: change, At: now.Add(-ago), Outdated: outdated}
	}
	cases := []struct {
		name     string
		b        *engine.Behavior
		h        engine.History
		from, to int32
		want     engine.History
	}{
		{
			name: "first scale-up appended", b: b, from: 2, to: 5,
			want: engine.History{ScaleUpEvents: []engine.ScaleEvent{ev(3, 0, false)}},
		},
		{
			name: "scale-down appended with the absolute change", b: b, from: 9, to: 5,
			h:    engine.History{ScaleDownEvents: []engine.ScaleEvent{ev(1, 30*time.Second, false)}},
			want: engine.History{ScaleDownEvents: []engine.ScaleEvent{ev(1, 30*time.Second, false), ev(4, 0, false)}},
		},
		{
			// Longest scale-up period is 60s: the events at -5m and -4m are
			// outdated; the last of them is overwritten.
			name: "last outdated event overwritten", b: b, from: 4, to: 6,
			h: engine.History{ScaleUpEvents: []engine.ScaleEvent{
				ev(2, 5*time.Minute, false), ev(3, 4*time.Minute, false), ev(1, 10*time.Second, false)}},
			want: engine.History{ScaleUpEvents: []engine.ScaleEvent{
				ev(2, 5*time.Minute, true), ev(2, 0, false), ev(1, 10*time.Second, false)}},
		},
		{
			// An event exactly one longest period old is not outdated.
			name: "event at the cutoff kept", b: b, from: 4, to: 6,
			h:    engine.History{ScaleUpEvents: []engine.ScaleEvent{ev(2, 60*time.Second, false)}},
			want: engine.History{ScaleUpEvents: []engine.ScaleEvent{ev(2, 60*time.Second, false), ev(2, 0, false)}},
		},
		{
			// Scale-down periods (120s) decide for scale-down events.
			name: "down events use the scale-down periods", b: b, from: 6, to: 4,
			h:    engine.History{ScaleDownEvents: []engine.ScaleEvent{ev(1, 90*time.Second, false), ev(1, 3*time.Minute, false)}},
			want: engine.History{ScaleDownEvents: []engine.ScaleEvent{ev(1, 90*time.Second, false), ev(2, 0, false)}},
		},
		{
			name: "no behavior, no events", b: nil, from: 2, to: 5,
			h:    engine.History{ScaleUpEvents: []engine.ScaleEvent{ev(1, time.Hour, false)}},
			want: engine.History{ScaleUpEvents: []engine.ScaleEvent{ev(1, time.Hour, false)}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := cloneHistory(tc.h)
			got := engine.RecordScale(tc.h, tc.b, tc.from, tc.to, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.h); diff != "" {
				t.Errorf("RecordScale modified its argument (-before +after):\n%s", diff)
			}
		})
	}
}

func cloneHistory(h engine.History) engine.History {
	return engine.History{
		Recommendations: append([]engine.Recommendation(nil), h.Recommendations...),
		ScaleUpEvents:   append([]engine.ScaleEvent(nil), h.ScaleUpEvents...),
		ScaleDownEvents: append([]engine.ScaleEvent(nil), h.ScaleDownEvents...),
	}
}
