package fleet

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/engine"
)

// ShareReason says how a member's share was reached.
type ShareReason string

// The reasons of a share.
const (
	// ShareWeighted: the member's quota of the total by weight, rounded by
	// the largest-remainder method.
	ShareWeighted ShareReason = "Weighted"
	// ShareAtMin: the weighted quota was below the member's Min.
	ShareAtMin ShareReason = "AtMin"
	// ShareAtMax: the weighted quota was above the member's Max.
	ShareAtMax ShareReason = "AtMax"
	// ShareStandby: a member of weight 0, at its Min or holding what the
	// weighted members could not.
	ShareStandby ShareReason = "Standby"
	// ShareHeld: the member's share is above its weighted share because
	// the scale-down policy does not let it fall faster while a member
	// returns.
	ShareHeld ShareReason = "Held"
	// ShareReturning: the member came back from exclusion and gets what
	// the held members released, below its weighted share for now.
	ShareReturning ShareReason = "Returning"
	// ShareExcluded: the member is not pooled and is given nothing.
	ShareExcluded ShareReason = "Excluded"
)

// Share is one member's part of a split, with why.
type Share struct {
	// Member names the member.
	Member string
	// Replicas is the member's share.
	Replicas int32
	// Weighted is the share the weights, Min and Max alone give (equal to
	// Replicas unless the member is held or returning; 0 when excluded).
	Weighted int32
	// Reason says how Replicas was reached.
	Reason ShareReason
	// QuotaNum and QuotaDen are the exact weighted quota of a member whose
	// share was rounded (ShareWeighted, ShareStandby above Min): the
	// replicas left to the free members × the member's weight, over their
	// weights. Both 0 otherwise.
	QuotaNum, QuotaDen int64
	// Remainder is true when the member got one of the replicas left after
	// the quotas were rounded down (the largest remainders).
	Remainder bool
	// Exclusion is why an excluded member was left out.
	Exclusion Exclusion
	// Message says the same in words.
	Message string
}

// Split is a fleet total divided among its members, explained.
type Split struct {
	// Total is the fleet's replica count to divide.
	Total int32
	// Placed is the sum of the shares: Total, unless the pooled members'
	// Min and Max cannot hold it (see Message).
	Placed int32
	// Shares are the members' shares, in spec order.
	Shares []Share
	// Message summarizes the split in words.
	Message string
}

// SplitInput is what a split is made from.
type SplitInput struct {
	// Total is the replica count to divide.
	Total int32
	// Members are the fleet's members.
	Members []Member
	// Exclusion is, index-aligned with Members, why each member is left
	// out; empty for a pooled member.
	Exclusion []Exclusion
	// Previous are the members' states after the previous split (any
	// order; empty before the first): a member excluded then and pooled
	// now is returning.
	Previous []MemberState
	// ScaleDown paces a returning member: the other members' shares fall
	// no faster than these rules' policies allow. Nil: no pacing.
	ScaleDown *engine.Rules
	// Now is the split's instant.
	Now time.Time
}

// Divide splits in.Total among the pooled members and returns the split
// and the members' new states. The rule:
//
//  1. Weighted: every pooled member of positive weight gets
//     clamp(λ·weight, Min, Max), λ chosen so the shares sum to what is left
//     after the standbys' (weight 0) Min; quotas are exact fractions, each
//     rounded down, and the replicas left go one each to the largest
//     remainders (ties: larger weight, then spec order). What the weighted
//     members cannot hold (all at Max, or none pooled) is divided among
//     the standbys the same way with equal weights. Excluded members get
//     nothing: their share has moved to the pooled ones (failover).
//  2. Return: a member excluded in the previous split and pooled now is
//     returning. While one returns, no other member's share falls below
//     the lowest count ScaleDown's policies allow it from its previous
//     share (its own decreases within each policy's period count, as a
//     target's scale-down events do); the returning members divide what
//     is left, by weight, up to their weighted shares. A member stops
//     returning once it reaches its weighted share. When the total is
//     below the pooled members' Min sum or above their Max sum, nothing
//     is held.
//
// Divide is pure and deterministic. Members must be valid (see Spec).
func Divide(in SplitInput) (Split, []MemberState) {
	n := len(in.Members)
	prev := make(map[string]*MemberState, len(in.Previous))
	for i := range in.Previous {
		prev[in.Previous[i].Name] = &in.Previous[i]
	}
	var pooled []int
	shares := make([]Share, n)
	for i, m := range in.Members {
		shares[i] = Share{Member: m.Name}
		if in.Exclusion[i] != "" {
			shares[i].Reason, shares[i].Exclusion = ShareExcluded, in.Exclusion[i]
			shares[i].Message = "left out (" + string(in.Exclusion[i]) + "): no share; its replicas moved to the pooled members"
			continue
		}
		pooled = append(pooled, i)
	}
	feasible := weighted(in.Total, in.Members, pooled, shares)
	for _, i := range pooled {
		shares[i].Weighted = shares[i].Replicas
	}

	var returning, others []int
	for _, i := range pooled {
		p := prev[in.Members[i].Name]
		if p != nil && (!p.Pooled || p.Returning) && shares[i].Weighted > 0 {
			returning = append(returning, i)
		} else {
			others = append(others, i)
		}
	}
	held := false
	if len(returning) > 0 && in.ScaleDown != nil && feasible {
		held = hold(in, prev, shares, returning, others)
	}

	states := make([]MemberState, n)
	var placed int64
	for i, m := range in.Members {
		sh := &shares[i]
		placed += int64(sh.Replicas)
		st := MemberState{Name: m.Name, Pooled: in.Exclusion[i] == "", Share: sh.Replicas}
		if p := prev[m.Name]; p != nil && st.Pooled {
			st.Decreases = decreases(p, sh.Replicas, in.ScaleDown, in.Now)
		}
		st.Returning = st.Pooled && sh.Reason == ShareReturning
		states[i] = st
	}
	s := Split{Total: in.Total, Placed: saturate32(placed), Shares: shares}
	s.Message = summary(&s, len(pooled), held, feasible)
	return s, states
}

// weighted fills the shares of the pooled members (indexes into members)
// by weight, Min and Max (step 1 of Divide's rule), and reports whether
// they hold exactly total.
func weighted(total int32, members []Member, pooled []int, shares []Share) bool {
	var minSum, maxSum int64
	var positive, standby []int
	for _, i := range pooled {
		minSum += int64(members[i].Min)
		maxSum += int64(members[i].max())
		if members[i].Weight > 0 {
			positive = append(positive, i)
		} else {
			standby = append(standby, i)
		}
	}
	switch {
	case len(pooled) == 0:
		return total == 0
	case int64(total) <= minSum:
		for _, i := range pooled {
			shares[i].Replicas, shares[i].Reason = members[i].Min, ShareAtMin
			shares[i].Message = fmt.Sprintf("at its min %d: the total %d is at or below the pooled members' mins (%d)", members[i].Min, total, minSum)
		}
		return int64(total) == minSum
	case int64(total) >= maxSum:
		for _, i := range pooled {
			shares[i].Replicas, shares[i].Reason = members[i].max(), ShareAtMax
			shares[i].Message = fmt.Sprintf("at its max %d: the total %d is at or above the pooled members' maxes (%d)", members[i].max(), total, maxSum)
		}
		return int64(total) == maxSum
	}
	rest := int64(total)
	for _, i := range standby {
		rest -= int64(members[i].Min)
	}
	var posMax int64
	for _, i := range positive {
		posMax += int64(members[i].max())
	}
	if rest <= posMax {
		waterfill(rest, members, positive, func(i int) int64 { return int64(members[i].Weight) }, shares)
		for _, i := range standby {
			shares[i].Replicas, shares[i].Reason = members[i].Min, ShareStandby
			shares[i].Message = fmt.Sprintf("standby (weight 0): at its min %d while the weighted members hold the rest", members[i].Min)
		}
		return true
	}
	for _, i := range positive {
		shares[i].Replicas, shares[i].Reason = members[i].max(), ShareAtMax
		shares[i].Message = fmt.Sprintf("at its max %d: the weighted members cannot hold the total, the standbys take the rest", members[i].max())
	}
	var standbyMin int64
	for _, i := range standby {
		standbyMin += int64(members[i].Min)
	}
	waterfill(rest-posMax+standbyMin, members, standby, func(int) int64 { return 1 }, shares)
	for _, i := range standby {
		if shares[i].Reason == ShareWeighted {
			shares[i].Reason = ShareStandby
			shares[i].Message = "standby (weight 0) taking what the weighted members cannot hold, evenly: " + shares[i].Message
		}
	}
	return true
}

// waterfill divides total among members[idx] as clamp(λ·weight(i), Min,
// Max), rounding by the largest-remainder method. The caller ensures that
// the members' Min sum ≤ total ≤ their Max sum, so the shares sum to
// total. All arithmetic is exact (int64): total ≤ MaxInt32, weights ≤
// MaxWeight, at most MaxMembers members.
func waterfill(total int64, members []Member, idx []int, weight func(int) int64, shares []Share) {
	free := slices.Clone(idx)
	for len(free) > 0 {
		var w, over, under int64
		for _, i := range free {
			w += weight(i)
		}
		if w == 0 {
			break
		}
		for _, i := range free {
			q := total * weight(i) // quota × w
			if hi := int64(members[i].max()) * w; q > hi {
				over += q - hi
			}
			if lo := int64(members[i].Min) * w; q < lo {
				under += lo - q
			}
		}
		if over == 0 && under == 0 {
			break
		}
		// The shares' sum as a function of λ grows with λ: when raising the
		// ones under Min adds more than lowering the ones over Max removes,
		// λ must fall, so the ones under Min stay at Min whatever λ becomes
		// (and symmetrically). Fix that side and divide the rest again.
		next := free[:0:0]
		for _, i := range free {
			q := total * weight(i)
			switch {
			case under >= over && q < int64(members[i].Min)*w:
				shares[i].Replicas, shares[i].Reason = members[i].Min, ShareAtMin
				shares[i].Message = fmt.Sprintf("at its min %d: its weighted quota %s is below it", members[i].Min, fraction(q, w))
			case over >= under && q > int64(members[i].max())*w:
				shares[i].Replicas, shares[i].Reason = members[i].max(), ShareAtMax
				shares[i].Message = fmt.Sprintf("at its max %d: its weighted quota %s is above it", members[i].max(), fraction(q, w))
			default:
				next = append(next, i)
				continue
			}
		}
		for _, i := range free {
			if !slices.Contains(next, i) {
				total -= int64(shares[i].Replicas)
			}
		}
		free = next
	}
	if len(free) == 0 {
		return
	}
	var w int64
	for _, i := range free {
		w += weight(i)
	}
	if w == 0 {
		return
	}
	left := total
	for _, i := range free {
		q := total * weight(i)
		sh := &shares[i]
		sh.Replicas, sh.Reason = int32(q/w), ShareWeighted
		sh.QuotaNum, sh.QuotaDen = q, w
		left -= q / w
	}
	order := slices.Clone(free)
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := (total*weight(a))%w, (total*weight(b))%w
		switch {
		case ra != rb:
			return cmpInt64(rb, ra)
		case weight(a) != weight(b):
			return cmpInt64(weight(b), weight(a))
		}
		return a - b
	})
	for k := int64(0); k < left; k++ {
		shares[order[k]].Replicas++
		shares[order[k]].Remainder = true
	}
	for _, i := range free {
		sh := &shares[i]
		sh.Message = fmt.Sprintf("weight %d of %d: quota %d×%d/%d = %s", weight(i), w, total, weight(i), w, fraction(sh.QuotaNum, w))
		if sh.Remainder {
			sh.Message += fmt.Sprintf(", rounded up (one of the %d largest remainders)", left)
		} else if sh.QuotaNum%w != 0 {
			sh.Message += ", rounded down"
		}
	}
}

// hold applies step 2 of Divide's rule: the members other than the
// returning ones keep at least what ScaleDown lets them keep, the
// returning ones divide the rest by weight up to their weighted shares.
// It reports whether any share was held; when the returning members' Min
// would not fit, nothing is.
func hold(in SplitInput, prev map[string]*MemberState, shares []Share, returning, others []int) bool {
	rest := int64(in.Total)
	keep := make(map[int]int32, len(others))
	for _, i := range others {
		k := shares[i].Weighted
		if p := prev[in.Members[i].Name]; p != nil && p.Pooled {
			k = max(k, min(lowest(p.Share, p.Decreases, in.ScaleDown, in.Now), in.Members[i].max()))
		}
		rest -= int64(k)
		if k > shares[i].Weighted {
			keep[i] = k
		}
	}
	var minSum int64
	for _, i := range returning {
		minSum += int64(in.Members[i].Min)
	}
	if len(keep) == 0 || rest < minSum {
		return false
	}
	for i, k := range keep {
		sh := &shares[i]
		sh.Replicas, sh.Reason, sh.QuotaNum, sh.QuotaDen, sh.Remainder = k, ShareHeld, 0, 0, false
		sh.Message = fmt.Sprintf("held at %d above its weighted share %d while a member returns: the scale-down policy lets it fall from %d only to %d now",
			k, sh.Weighted, prev[in.Members[i].Name].Share, k)
	}
	capped := slices.Clone(in.Members)
	for _, i := range returning {
		w := shares[i].Weighted
		capped[i].Max = &w
	}
	tmp := slices.Clone(shares)
	weighted(int32(rest), capped, returning, tmp)
	for _, i := range returning {
		sh := &shares[i]
		if tmp[i].Replicas < sh.Weighted {
			sh.Replicas, sh.Reason, sh.QuotaNum, sh.QuotaDen, sh.Remainder = tmp[i].Replicas, ShareReturning, tmp[i].QuotaNum, tmp[i].QuotaDen, tmp[i].Remainder
			sh.Message = fmt.Sprintf("returning: %d of its weighted share %d, what the held members release so far (%s)", sh.Replicas, sh.Weighted, tmp[i].Message)
		}
	}
	return true
}

// lowest is the lowest share the scale-down rules r let a member fall to
// from share at now, given its decreases: for each policy, the share at
// the start of the policy's period (share plus the decreases within it)
// less the policy's allowance; Max selects the lowest of those, Min the
// highest, Disabled allows no decrease. Never above share, never below 0.
func lowest(share int32, ds []engine.ScaleEvent, r *engine.Rules, now time.Time) int32 {
	if r.SelectPolicy == engine.SelectDisabled {
		return share
	}
	if len(r.Policies) == 0 {
		return 0
	}
	var out int64
	for k, p := range r.Policies {
		start := int64(share)
		for _, d := range ds {
			if d.At.After(now.Add(-time.Duration(p.PeriodSeconds) * time.Second)) {
				start += int64(d.Change)
			}
		}
		var l int64
		switch p.Type {
		case engine.PodsPolicy:
			l = start - int64(p.Value)
		default: // Percent: ceil(start × (100 − value) / 100)
			l = ceilDiv(start*(100-int64(min(p.Value, 100))), 100)
		}
		switch {
		case k == 0:
			out = l
		case r.SelectPolicy == engine.SelectMin:
			out = max(out, l)
		default:
			out = min(out, l)
		}
	}
	return int32(max(0, min(out, int64(share))))
}

// decreases is a member's decrease list after its share went from the
// previous state's to share at now: a decrease is appended, and entries
// older than the longest policy period of r are dropped (all when r is
// nil).
func decreases(p *MemberState, share int32, r *engine.Rules, now time.Time) []engine.ScaleEvent {
	if r == nil || !p.Pooled {
		return nil
	}
	var longest int32
	for _, pol := range r.Policies {
		longest = max(longest, pol.PeriodSeconds)
	}
	cut := now.Add(-time.Duration(longest) * time.Second)
	var out []engine.ScaleEvent
	for _, d := range p.Decreases {
		if d.At.After(cut) {
			out = append(out, d)
		}
	}
	if share < p.Share {
		out = append(out, engine.ScaleEvent{Change: p.Share - share, At: now})
	}
	return out
}

// summary says the split in words.
func summary(s *Split, pooled int, held, feasible bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d replicas over %d pooled of %d members:", s.Total, pooled, len(s.Shares))
	var out []string
	for _, sh := range s.Shares {
		if sh.Reason == ShareExcluded {
			out = append(out, fmt.Sprintf("%s excluded (%s)", sh.Member, sh.Exclusion))
			continue
		}
		out = append(out, fmt.Sprintf("%s %d (%s)", sh.Member, sh.Replicas, sh.Reason))
	}
	b.WriteString(" " + strings.Join(out, ", "))
	switch {
	case pooled == 0:
		b.WriteString("; no member is pooled, nothing placed")
	case !feasible && int64(s.Placed) > int64(s.Total):
		fmt.Fprintf(&b, "; the pooled members' mins place %d, above the total", s.Placed)
	case !feasible:
		fmt.Fprintf(&b, "; the pooled members' maxes hold only %d, %d unplaced", s.Placed, int64(s.Total)-int64(s.Placed))
	}
	if held {
		b.WriteString("; a returning member takes its share back as the scale-down policy lets the others fall")
	}
	return b.String()
}

// fraction prints num/den as a decimal with two places, or an integer.
func fraction(num, den int64) string {
	if num%den == 0 {
		return fmt.Sprint(num / den)
	}
	return fmt.Sprintf("%.2f", float64(num)/float64(den))
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
