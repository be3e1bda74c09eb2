package engine

import (
	"math"
	"time"
)

// Legacy normalization constants: without a behavior, a scale-up may at
// most double the replicas, and always reach 4.
const (
	legacyScaleUpFactor  = 2.0
	legacyScaleUpMinimum = 4.0
)

// recordRecommendation stores rec the way upstream does: it overwrites the
// last entry found old, list[lastOld], or appends when there is none
// (lastOld is -1). The callers find lastOld in the pass that stabilizes.
func recordRecommendation(list []Recommendation, rec Recommendation, lastOld int) []Recommendation {
	if lastOld >= 0 {
		list[lastOld] = rec
		return list
	}
	return append(list, rec)
}

// normalizeLegacy is upstream's normalizeDesiredReplicas: stabilization
// over the controller's downscale window, then the legacy rate limit and
// min/max.
func (d *decider) normalizeLegacy(current, proposal int32) int32 {
	cutoff := d.now.Add(-d.in.Settings.DownscaleStabilizationWindow)
	stabilized := proposal
	lastOld := -1
	recs := d.hist.Recommendations
	for i := range recs {
		if r := &recs[i]; r.At.Before(cutoff) {
			lastOld = i
		} else if r.Replicas > stabilized {
			stabilized = r.Replicas
		}
	}
	d.hist.Recommendations = recordRecommendation(recs, Recommendation{Replicas: proposal, At: d.now}, lastOld)
	if stabilized != proposal {
		msg := "recent recommendations were higher than current one, applying the highest recent recommendation"
		d.setCondition(AbleToScale, ConditionTrue, "ScaleDownStabilized", msg)
		d.step(StepStabilized, proposal, stabilized, "ScaleDownStabilized", msg)
	} else {
		d.setCondition(AbleToScale, ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	}

	spec := &d.in.Spec
	scaleUpLimit := toInt32(math.Max(legacyScaleUpFactor*float64(current), legacyScaleUpMinimum))
	maxAllowed, reason, msg := spec.MaxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if spec.MaxReplicas > scaleUpLimit {
		maxAllowed, reason, msg = scaleUpLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	desired := stabilized
	switch {
	case stabilized < spec.MinReplicas:
		desired, reason, msg = spec.MinReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	case stabilized > maxAllowed:
		desired = maxAllowed
	default:
		reason, msg = "DesiredWithinRange", "the desired count is within the acceptable range"
	}
	d.limit(stabilized, desired, reason, msg)
	return desired
}

// limit sets ScalingLimited for a limiting step from → to.
func (d *decider) limit(from, to int32, reason, msg string) {
	if to == from {
		d.setCondition(ScalingLimited, ConditionFalse, reason, msg)
		return
	}
	d.setCondition(ScalingLimited, ConditionTrue, reason, msg)
	d.step(StepLimited, from, to, reason, msg)
}

// normalizeWithBehavior is upstream's normalizeDesiredReplicasWithBehaviors:
// per-direction stabilization windows, then the policies' rate limits and
// min/max.
func (d *decider) normalizeWithBehavior(current, proposal int32) int32 {
	b := d.in.Spec.Behavior
	upCutoff := d.now.Add(-time.Duration(b.ScaleUp.StabilizationWindowSeconds) * time.Second)
	downCutoff := d.now.Add(-time.Duration(b.ScaleDown.StabilizationWindowSeconds) * time.Second)
	up, down := proposal, proposal
	// One comparison with each cutoff per recommendation: after it, the
	// recommendation counts; before both, it is old.
	lastOld := -1
	recs := d.hist.Recommendations
	for i := range recs {
		r := &recs[i]
		upCmp, downCmp := r.At.Compare(upCutoff), r.At.Compare(downCutoff)
		if upCmp > 0 {
			up = min(up, r.Replicas)
		}
		if downCmp > 0 {
			down = max(down, r.Replicas)
		}
		if upCmp < 0 && downCmp < 0 {
			lastOld = i
		}
	}
	stabilized := max(current, up)
	stabilized = min(stabilized, down)
	d.hist.Recommendations = recordRecommendation(recs, Recommendation{Replicas: proposal, At: d.now}, lastOld)
	if stabilized != proposal {
		reason, msg := "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
		if proposal < current {
			reason, msg = "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
		}
		d.setCondition(AbleToScale, ConditionTrue, reason, msg)
		d.step(StepStabilized, proposal, stabilized, reason, msg)
	} else {
		d.setCondition(AbleToScale, ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	}

	desired, reason, msg := d.rateLimit(current, stabilized)
	d.limit(stabilized, desired, reason, msg)
	return desired
}

// rateLimit is upstream's convertDesiredReplicasWithBehaviorRate.
func (d *decider) rateLimit(current, desired int32) (int32, string, string) {
	spec := &d.in.Spec
	b := spec.Behavior
	h := &d.hist
	switch {
	case desired > current:
		limit := max(scaleUpLimit(current, h.ScaleUpEvents, h.ScaleDownEvents, &b.ScaleUp, d.now), current)
		maxAllowed, reason, msg := spec.MaxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if maxAllowed > limit {
			maxAllowed, reason, msg = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if desired > maxAllowed {
			return maxAllowed, reason, msg
		}
	case desired < current:
		limit := min(scaleDownLimit(current, h.ScaleUpEvents, h.ScaleDownEvents, &b.ScaleDown, d.now), current)
		minAllowed, reason, msg := spec.MinReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if minAllowed < limit {
			minAllowed, reason, msg = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if desired < minAllowed {
			return minAllowed, reason, msg
		}
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// changeInPeriod sums the changes of the events strictly inside the period
// ending at now, in int64 so that it cannot overflow.
func changeInPeriod(periodSeconds int32, events []ScaleEvent, now time.Time) int64 {
	cutoff := now.Add(-time.Duration(periodSeconds) * time.Second)
	var sum int64
	for i := range events {
		if e := &events[i]; e.At.After(cutoff) {
			sum += int64(e.Change)
		}
	}
	return sum
}

// periodStart is the replica count the period of periodSeconds ending at
// now started from: current less the scale-ups in it, plus the
// scale-downs.
func periodStart(current, periodSeconds int32, upEvents, downEvents []ScaleEvent, now time.Time) int64 {
	return int64(current) - changeInPeriod(periodSeconds, upEvents, now) + changeInPeriod(periodSeconds, downEvents, now)
}

// scaleUpLimit is upstream's calculateScaleUpLimitWithScalingRules.
func scaleUpLimit(current int32, upEvents, downEvents []ScaleEvent, rules *Rules, now time.Time) int32 {
	if rules.SelectPolicy == SelectDisabled {
		return current
	}
	result, pick := int32(math.MinInt32), func(a, b int32) int32 { return max(a, b) }
	if rules.SelectPolicy == SelectMin {
		result, pick = math.MaxInt32, func(a, b int32) int32 { return min(a, b) }
	}
	var period int32 // of start; periods are >= 1 s
	var start int64
	for _, p := range rules.Policies {
		if p.PeriodSeconds != period { // policies of one period share its start
			period, start = p.PeriodSeconds, periodStart(current, p.PeriodSeconds, upEvents, downEvents, now)
		}
		var proposed int32
		switch p.Type {
		case PodsPolicy:
			proposed = clampInt32(start + int64(p.Value))
		case PercentPolicy:
			proposed = ceilInt32(float64(start) * (1 + float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// scaleDownLimit is upstream's calculateScaleDownLimitWithBehaviors.
func scaleDownLimit(current int32, upEvents, downEvents []ScaleEvent, rules *Rules, now time.Time) int32 {
	if rules.SelectPolicy == SelectDisabled {
		return current
	}
	result, pick := int32(math.MaxInt32), func(a, b int32) int32 { return min(a, b) }
	if rules.SelectPolicy == SelectMin {
		result, pick = math.MinInt32, func(a, b int32) int32 { return max(a, b) }
	}
	var period int32 // of start; periods are >= 1 s
	var start int64
	for _, p := range rules.Policies {
		if p.PeriodSeconds != period { // policies of one period share its start
			period, start = p.PeriodSeconds, periodStart(current, p.PeriodSeconds, upEvents, downEvents, now)
		}
		var proposed int32
		switch p.Type {
		case PodsPolicy:
			proposed = clampInt32(start - int64(p.Value))
		case PercentPolicy:
			proposed = toInt32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// longestPeriod is the longest policy period of rules, in seconds.
func longestPeriod(rules *Rules) int32 {
	var longest int32
	for _, p := range rules.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	return longest
}

// recordScale is RecordScale: upstream's storeScaleEvent.
func recordScale(h History, b *Behavior, from, to int32, at time.Time) History {
	h = cloneHistory(h)
	if b == nil || from == to {
		return h
	}
	events, rules, change := &h.ScaleDownEvents, &b.ScaleDown, from-to
	if to > from {
		events, rules, change = &h.ScaleUpEvents, &b.ScaleUp, to-from
	}
	cutoff := at.Add(-time.Duration(longestPeriod(rules)) * time.Second)
	idx := -1
	for i := range *events {
		if (*events)[i].At.Before(cutoff) {
			(*events)[i].Outdated = true
		}
		if (*events)[i].Outdated {
			idx = i
		}
	}
	e := ScaleEvent{Change: change, At: at}
	if idx >= 0 {
		(*events)[idx] = e
	} else {
		*events = append(*events, e)
	}
	return h
}
