package engine

import (
	"fmt"
	"strconv"
)

// ProposalKind says where a proposal from outside the metrics comes from.
type ProposalKind string

// The kinds of proposals from outside the metrics.
const (
	// ProposalFallback is a metric-outage fallback: it counts only in a
	// decision whose metrics failed, and sets FallbackActive when it does.
	ProposalFallback ProposalKind = "Fallback"
	// ProposalSchedule is a schedule window's floor, active now.
	ProposalSchedule ProposalKind = "Schedule"
	// ProposalForecast is the count a forecast of the load needs one lead
	// time ahead.
	ProposalForecast ProposalKind = "Forecast"
)

// FallbackActive is the condition that says a fallback proposal was used
// because the metrics failed. It appears only on targets given a fallback.
const FallbackActive ConditionType = "FallbackActive"

// maxProposals bounds Input.Proposals: a fallback, a forecast per metric
// and a few schedule windows fit many times over.
const maxProposals = 64

// maxProposalText bounds a proposal's name and explanation, in bytes.
const maxProposalText = 1024

// Proposal is a replica count proposed from outside the metrics: a
// fallback, a schedule window or a forecast. It is merged by max with the
// metrics' proposal; stabilization, policies and min/max apply to the
// result as to any proposal.
type Proposal struct {
	// Name identifies the proposal in the explanation and conditions, e.g.
	// "schedule business-hours".
	Name string
	// Kind says where the proposal comes from.
	Kind ProposalKind
	// Replicas is the proposed replica count, >= 0.
	Replicas int32
	// Explanation says why, in words (the window, the forecast's period
	// and confidence, the failures counted).
	Explanation string
}

// validateProposals checks in.Proposals; an empty list costs nothing.
func (v *validator) proposals(ps []Proposal) {
	if len(ps) == 0 {
		return
	}
	if len(ps) > maxProposals {
		v.fail("proposals", "at most %d, got %d", maxProposals, len(ps))
		return
	}
	for i := range ps {
		p := &ps[i]
		f := "proposals[" + strconv.Itoa(i) + "]"
		switch p.Kind {
		case ProposalFallback, ProposalSchedule, ProposalForecast:
		default:
			v.fail(f+".kind", "must be Fallback, Schedule or Forecast, got %q", p.Kind)
		}
		if p.Name == "" {
			v.fail(f+".name", "must be set")
		}
		if len(p.Name) > maxProposalText {
			v.fail(f+".name", "at most %d bytes, got %d", maxProposalText, len(p.Name))
		}
		if len(p.Explanation) > maxProposalText {
			v.fail(f+".explanation", "at most %d bytes, got %d", maxProposalText, len(p.Explanation))
		}
		if p.Replicas < 0 {
			v.fail(f+".replicas", "must be >= 0, got %d", p.Replicas)
		}
	}
}

// hasFallback reports whether in offers a fallback proposal.
func hasFallback(ps []Proposal) bool {
	for i := range ps {
		if ps[i].Kind == ProposalFallback {
			return true
		}
	}
	return false
}

// fallbackRecovery is what a decision whose metrics failed does when it
// was given a fallback: it continues from the largest proposal of the
// metrics that did not fail (0 when none), restoring that metric as the
// winner, where the controller would have given up. ok is false without a
// fallback: the decision fails as upstream's does.
func (d *decider) fallbackRecovery() (proposal int32, ok bool) {
	if !hasFallback(d.in.Proposals) {
		return 0, false
	}
	for i, m := range d.explain.Metrics {
		if m.Outcome != OutcomeFailed && m.Outcome != "" && (d.explain.Winner < 0 || m.Proposal > proposal) {
			proposal, d.explain.Winner = m.Proposal, i
		}
	}
	return proposal, true
}

// mergeProposals merges in.Proposals by max into the metrics' proposal
// and returns the result. Fallbacks count only when metricsFailed (some
// metric failed; every one when recovered). When a proposal is larger than
// every other, a StepProposal step names it and, unless the metrics failed
// altogether (recovered), so does the ScalingActive message. FallbackActive
// is set True when a fallback was considered, False when the status
// carried it and none was. With no proposals and no FallbackActive in the
// status nothing changes.
func (d *decider) mergeProposals(proposal int32, recovered, metricsFailed bool) int32 {
	ps := d.in.Proposals
	winner, fallback := -1, -1
	merged := proposal
	for i := range ps {
		p := &ps[i]
		if p.Kind == ProposalFallback {
			if !metricsFailed {
				continue
			}
			if fallback < 0 || p.Replicas > ps[fallback].Replicas {
				fallback = i
			}
		}
		if p.Replicas > merged {
			merged, winner = p.Replicas, i
		}
	}
	if fallback >= 0 {
		p := &ps[fallback]
		d.setCondition(FallbackActive, ConditionTrue, "FallbackActive",
			fmt.Sprintf("the metrics failed; %s proposes %d replicas: %s", p.Name, p.Replicas, p.Explanation))
	} else if d.hasCondition(FallbackActive) {
		d.setCondition(FallbackActive, ConditionFalse, "MetricsHealthy", "the metrics are healthy; no fallback applies")
	}
	if winner < 0 {
		return proposal
	}
	p := &ps[winner]
	d.step(StepProposal, proposal, merged, proposalReasons[p.Kind], p.Name+": "+p.Explanation)
	if !recovered {
		d.setCondition(ScalingActive, ConditionTrue, "ValidMetricFound",
			"the HPA was able to successfully calculate a replica count; "+p.Name+" proposed more")
	}
	return merged
}

// proposalReasons are the reasons of StepProposal steps, by kind.
var proposalReasons = map[ProposalKind]string{
	ProposalFallback: "FallbackActive",
	ProposalSchedule: "ScheduleFloor",
	ProposalForecast: "ForecastAhead",
}

// hasCondition reports whether the status being built has a condition of
// type t.
func (d *decider) hasCondition(t ConditionType) bool {
	for i := range d.status.Conditions {
		if d.status.Conditions[i].Type == t {
			return true
		}
	}
	return false
}
