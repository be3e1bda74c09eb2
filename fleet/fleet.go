package fleet

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/target"
)

// Limits of a fleet's spec. They keep the split's integer arithmetic
// (replicas × weight × members) inside int64.
const (
	// MaxMembers is the most members a fleet may have.
	MaxMembers = 100
	// MaxWeight is the largest weight a member may have.
	MaxWeight = 1000
)

// Errors of the package. Callers test them with errors.Is.
var (
	// ErrInvalid: the fleet's spec or a report is invalid; the message
	// names the field.
	ErrInvalid = errors.New("fleet: invalid input")
	// ErrNoHealthyMember: no member can be pooled (no report, stale
	// reports, or members that cannot scale), so there is nothing to decide
	// over; the message names each member's reason.
	ErrNoHealthyMember = errors.New("fleet: no member can be pooled")
)

// Member is one member cluster of a fleet and its place in the split.
type Member struct {
	// Name names the member's cluster: non-empty, without "/", unique in
	// the fleet.
	Name string
	// Weight is the member's relative share of the fleet's replicas, 0 to
	// MaxWeight. A member of weight 0 is a standby: it holds its Min and
	// takes replicas only when the members with a weight are all at their
	// Max or excluded.
	Weight int32
	// Min is the fewest replicas the member runs while it is pooled.
	Min int32
	// Max is the most replicas the member runs; nil is no limit.
	Max *int32
}

// max is the member's maximum, math.MaxInt32 when unlimited.
func (m *Member) max() int32 {
	if m.Max == nil {
		return math.MaxInt32
	}
	return *m.Max
}

// Combine says how the members' values of an Object or External metric
// become the fleet's one value.
type Combine string

// The ways of combining a metric across members.
const (
	// CombineSum adds the members' values: each member observes its own
	// part (its own Ingress, its own queue), and the fleet's value is the
	// total. The default.
	CombineSum Combine = "Sum"
	// CombineShared takes one member's answer, the freshest: every member
	// observes the same series (one cloud queue seen from every cluster),
	// and adding them would count it once per member.
	CombineShared Combine = "Shared"
)

// Spec is what a fleet adds to an autoscaler's spec: its members, how
// its Object and External metrics combine, and when a report is too old.
type Spec struct {
	// Members are the member clusters, in the order splits list them and
	// ties are broken.
	Members []Member
	// Combine says, index-aligned with the engine spec's metrics, how each
	// Object or External metric combines; an absent or empty entry is
	// CombineSum. Entries of other metric types must be empty.
	Combine []Combine
	// StaleAfter is the age at which a member's report is left out of the
	// pool (a few of the agents' sync periods).
	StaleAfter time.Duration
}

// Report is one member's latest report: what its agent read in its own
// cluster, in the engine's terms, for the fleet's spec.
type Report struct {
	// Member names the reporting member.
	Member string
	// At is when the service received the report (its clock, not the
	// agent's).
	At time.Time
	// Scale is the member's Scale subresource.
	Scale engine.Scale
	// Pods are the member's pods, named as in its cluster.
	Pods []engine.Pod
	// ResourceMetrics is the member's resource metrics API answer.
	ResourceMetrics engine.ResourceMetrics
	// Observations are the member's custom and external metrics answers,
	// index-aligned with the fleet spec's metrics.
	Observations []engine.Observation
	// CannotScale, when set, says why the member's agent cannot apply a
	// share (its Scale update is refused, the target is missing, …); the
	// member is then left out of the pool.
	CannotScale string
}

// Input is what one fleet decision is made from.
type Input struct {
	// Ref is the fleet's scale target reference (the workload's, which
	// every member runs under the same name).
	Ref target.Ref
	// Engine holds the fleet's resolved spec and settings, its namespace
	// and any proposals from outside the metrics; its Scale, Pods,
	// ResourceMetrics and Observations are ignored: the pool replaces them.
	Engine engine.Input
	// Fallback is the target's metric-outage fallback, as for any target.
	Fallback *target.Fallback
	// Fleet is the fleet's members and combination rules.
	Fleet Spec
	// Reports are the members' latest reports, at most one per member; a
	// member without one is left out of the pool.
	Reports []Report
}

// Record is everything kept for one fleet: the fleet's own target record
// (its pooled decisions, status and history, durable like any target's)
// and what the split needs to remember of each member.
type Record struct {
	// Target is the fleet's target record; target.Decide made its last
	// decision from the pooled input, and target.Observe records the
	// fleet's rescales in its history.
	Target target.Record
	// Members is each member's state after the last split, in spec order.
	Members []MemberState
	// Split is the last split; nil before the first decision.
	Split *Split
	// Pool is what the last decision's pool made of each member, in spec
	// order; nil before the first decision.
	Pool []PoolMember
	// From is the fleet's total the last decision started from: the pooled
	// members' count, plus the shares of the members that the split before
	// it counted and that have left the pool since (Decide). Not stored.
	From int32
}

// MemberState is what the split remembers of a member between decisions.
type MemberState struct {
	// Name names the member.
	Name string
	// Pooled is true when the member was pooled in the last decision.
	Pooled bool
	// Share is the member's share after the last split (0 when excluded).
	Share int32
	// Returning is true while a member that came back from exclusion is
	// below its weighted share because the others' shares may not fall
	// faster than the scale-down policies allow.
	Returning bool
	// Decreases are the member's share decreases within the longest
	// scale-down policy period, oldest first: the policies' limits count
	// them as a target's scale-down events.
	Decreases []engine.ScaleEvent
}

// Decide makes the fleet's decision at now as decision id: the members'
// reports are pooled into one engine input, the fleet's target record
// decides over it through target.Decide (so the decision, status and
// history are exactly those of one autoscaler over the pooled pods), and
// the total is split among the pooled members. rec.Target, rec.Members,
// rec.Split, rec.Pool and rec.From take the outcome. A member that the
// last split counted and that the pool now leaves out keeps its replicas
// in the fleet's total for this decision: the scale policies count from
// the total (rec.From), as one HPA's count from its Scale however many of
// its pods are gone, so the others take its share at once.
//
// The total split is the decision's replica count when it rescales, and
// the pooled current replicas otherwise. Decide is pure; on an error
// (ErrInvalid, ErrNoHealthyMember, or the engine's *engine.FieldError) rec
// is unchanged.
func Decide(rec *Record, in Input, id string, now time.Time) error {
	if err := in.Fleet.Validate(&in.Engine.Spec); err != nil {
		return err
	}
	p, err := Pool(in.Fleet, in.Engine, in.Reports, now)
	if err != nil {
		return err
	}
	if p.Pooled == 0 {
		var why []string
		for _, m := range p.Members {
			why = append(why, m.Name+": "+m.Message)
		}
		return fmt.Errorf("%w (%s)", ErrNoHealthyMember, strings.Join(why, "; "))
	}
	t := rec.Target
	events := t.History
	from := p.Input.Scale.Replicas
	if lost := lostShares(rec.Split, p.Members); lost > 0 {
		// The lost members' replicas stay in the fleet's total; only the
		// split moves. One HPA's policies count from its Scale's replicas
		// however many of its pods are gone: an event of the lost shares
		// at now offsets them, for this decision only.
		lost = min(lost, math.MaxInt32-int64(from))
		at := now
		if at.Before(t.LastSeen) {
			at = t.LastSeen
		}
		t.History.ScaleDownEvents = append(slices.Clip(t.History.ScaleDownEvents), engine.ScaleEvent{Change: int32(lost), At: at})
		from += int32(lost)
	}
	if err := target.Decide(&t, target.Input{Ref: in.Ref, Engine: p.Input, Fallback: in.Fallback}, id, now); err != nil {
		return err
	}
	// A decision writes no scale events (the offset was this one's alone).
	t.History.ScaleUpEvents, t.History.ScaleDownEvents = events.ScaleUpEvents, events.ScaleDownEvents
	d := t.Last.Decision
	total := p.Input.Scale.Replicas
	if d.Rescale {
		total = d.DesiredReplicas
	}
	s, states := Divide(SplitInput{
		Total:     total,
		Members:   in.Fleet.Members,
		Exclusion: p.exclusions(),
		Previous:  rec.Members,
		ScaleDown: scaleDown(t.Spec.Behavior),
		Now:       t.Last.At,
	})
	rec.Target, rec.Members, rec.Split, rec.Pool, rec.From = t, states, &s, p.Members, from
	return nil
}

// lostShares is the replicas the last split gave the members that the
// pool now leaves out (stale, no report, unable to scale).
func lostShares(last *Split, pool []PoolMember) int64 {
	if last == nil {
		return 0
	}
	var lost int64
	for _, m := range pool {
		if m.Exclusion == "" {
			continue
		}
		for _, sh := range last.Shares {
			if sh.Member == m.Name && sh.Reason != ShareExcluded {
				lost += int64(sh.Replicas)
			}
		}
	}
	return lost
}

// scaleDown is the scale-down rules the return of a member is paced by;
// nil (no pacing) for the legacy normalization, which has no scale-down
// rate limit.
func scaleDown(b *engine.Behavior) *engine.Rules {
	if b == nil {
		return nil
	}
	return &b.ScaleDown
}

// Validate checks the fleet's spec against the engine's spec it extends:
// 1 to MaxMembers members with distinct names without "/", weights 0 to
// MaxWeight, 0 <= Min <= Max, StaleAfter > 0, and combination rules only
// for Object and External metrics. Its errors match ErrInvalid and name
// the field ("members[1].weight: …").
func (s *Spec) Validate(es *engine.Spec) error {
	if len(s.Members) == 0 {
		return fmt.Errorf("%w: members: at least one member is required", ErrInvalid)
	}
	if err := validateMembers(s.Members); err != nil {
		return err
	}
	if s.StaleAfter <= 0 {
		return fmt.Errorf("%w: staleAfter: must be > 0, got %v", ErrInvalid, s.StaleAfter)
	}
	if len(s.Combine) > len(es.Metrics) {
		return fmt.Errorf("%w: combine: %d entries for %d metrics", ErrInvalid, len(s.Combine), len(es.Metrics))
	}
	for i, c := range s.Combine {
		t := es.Metrics[i].Type
		switch {
		case c == "":
		case t != engine.ObjectSource && t != engine.ExternalSource:
			return fmt.Errorf("%w: combine[%d]: only Object and External metrics combine, metric %d is %s", ErrInvalid, i, i, t)
		case c != CombineSum && c != CombineShared:
			return fmt.Errorf("%w: combine[%d]: unknown %q (Sum or Shared)", ErrInvalid, i, c)
		}
	}
	return nil
}

// validateMembers checks the members of a split.
func validateMembers(ms []Member) error {
	if len(ms) > MaxMembers {
		return fmt.Errorf("%w: members: %d members, at most %d", ErrInvalid, len(ms), MaxMembers)
	}
	seen := make(map[string]bool, len(ms))
	for i, m := range ms {
		f := fmt.Sprintf("members[%d]", i)
		switch {
		case m.Name == "" || strings.Contains(m.Name, "/"):
			return fmt.Errorf("%w: %s.name: must be non-empty and without \"/\", got %q", ErrInvalid, f, m.Name)
		case seen[m.Name]:
			return fmt.Errorf("%w: %s.name: duplicate member %q", ErrInvalid, f, m.Name)
		case m.Weight < 0 || m.Weight > MaxWeight:
			return fmt.Errorf("%w: %s.weight: must be 0 to %d, got %d", ErrInvalid, f, MaxWeight, m.Weight)
		case m.Min < 0:
			return fmt.Errorf("%w: %s.min: must be >= 0, got %d", ErrInvalid, f, m.Min)
		case m.Max != nil && *m.Max < m.Min:
			return fmt.Errorf("%w: %s.max: must be >= min (%d), got %d", ErrInvalid, f, m.Min, *m.Max)
		}
		seen[m.Name] = true
	}
	return nil
}
