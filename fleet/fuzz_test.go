package fleet_test

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/fleet"
)

// FuzzDivide checks the split's invariants over members, weights, bounds,
// exclusions, previous states and scale-down rules generated from the
// fuzzer's seeds, for two splits in a row (the second may see a member
// return):
//   - equal inputs give equal splits (determinism);
//   - an excluded member gets 0, a pooled one a share within its Min and
//     Max;
//   - Placed is the sum of the shares; when the pooled members' Min and
//     Max can hold the total, Placed is the total, else every pooled
//     member is at its Min (total too low) or Max (too high);
//   - a Weighted share is its exact quota rounded down or up;
//   - without a returning member, every share is its weighted share.
func FuzzDivide(f *testing.F) {
	f.Add(int32(10), uint64(1), uint64(2), uint8(3))
	f.Add(int32(0), uint64(7), uint64(7), uint8(1))
	f.Add(int32(1000), uint64(42), uint64(9), uint8(6))
	f.Add(int32(2147483647), uint64(3), uint64(5), uint8(4))
	f.Fuzz(divideInvariants)
}

// divideInvariants is FuzzDivide's body: three splits in a row from the
// seeds, each checked.
func divideInvariants(t *testing.T, total int32, seed1, seed2 uint64, n uint8) {
	if total < 0 {
		total = -(total + 1)
	}
	rng := rand.New(rand.NewPCG(seed1, seed2))
	count := 1 + int(n)%8
	var members []fleet.Member
	for i := range count {
		mb := fleet.Member{Name: string(rune('a' + i)), Weight: int32(rng.IntN(4))}
		if rng.IntN(2) == 0 {
			mb.Weight = int32(rng.IntN(fleet.MaxWeight + 1))
		}
		if rng.IntN(3) == 0 {
			mb.Min = int32(rng.IntN(20))
		}
		if rng.IntN(3) == 0 {
			mb.Max = ptr(mb.Min + int32(rng.IntN(30)))
		}
		members = append(members, mb)
	}
	exclusions := func() []fleet.Exclusion {
		ex := make([]fleet.Exclusion, count)
		for i := range ex {
			if rng.IntN(4) == 0 {
				ex[i] = fleet.ExcludedStale
			}
		}
		return ex
	}
	var rules *engine.Rules
	if rng.IntN(3) > 0 {
		rules = &engine.Rules{SelectPolicy: []engine.SelectPolicy{engine.SelectMax, engine.SelectMin, engine.SelectDisabled}[rng.IntN(3)]}
		for range rng.IntN(3) {
			p := engine.Policy{Type: engine.PodsPolicy, Value: int32(1 + rng.IntN(5)), PeriodSeconds: int32(15 + rng.IntN(120))}
			if rng.IntN(2) == 0 {
				p.Type, p.Value = engine.PercentPolicy, int32(1+rng.IntN(150))
			}
			rules.Policies = append(rules.Policies, p)
		}
	}
	var prev []fleet.MemberState
	for k := range 3 {
		in := fleet.SplitInput{Total: total, Members: members, Exclusion: exclusions(), Previous: prev, ScaleDown: rules,
			Now: t0.Add(time.Duration(k) * 20 * time.Second)}
		if k > 0 && rng.IntN(2) == 0 {
			in.Total = int32(rng.IntN(int(min(total, 1<<20)) + 1))
		}
		s, states := fleet.Divide(in)
		s2, states2 := fleet.Divide(in)
		if !reflect.DeepEqual(s, s2) || !reflect.DeepEqual(states, states2) {
			t.Fatalf("split %d not deterministic:\n%+v\n%+v", k, s, s2)
		}
		check(t, in, s, prev)
		prev = states
	}
}

// check asserts the invariants of split s of in (prev: the states in
// started from).
func check(t *testing.T, in fleet.SplitInput, s fleet.Split, prev []fleet.MemberState) {
	t.Helper()
	var placed, minSum, maxSum int64
	pooled := 0
	returning := false
	for i, sh := range s.Shares {
		mb := in.Members[i]
		placed += int64(sh.Replicas)
		if in.Exclusion[i] != "" {
			if sh.Replicas != 0 || sh.Reason != fleet.ShareExcluded {
				t.Fatalf("excluded %s got %d (%s)", mb.Name, sh.Replicas, sh.Reason)
			}
			continue
		}
		pooled++
		minSum += int64(mb.Min)
		hi := int64(1<<31 - 1)
		if mb.Max != nil {
			hi = int64(*mb.Max)
		}
		maxSum += hi
		if sh.Replicas < mb.Min || int64(sh.Replicas) > hi {
			t.Fatalf("%s's share %d outside [%d, %d]: %s", mb.Name, sh.Replicas, mb.Min, hi, s.Message)
		}
		if sh.Reason == fleet.ShareWeighted {
			if sh.QuotaDen <= 0 {
				t.Fatalf("%s weighted without a quota: %+v", mb.Name, sh)
			}
			if q := sh.QuotaNum / sh.QuotaDen; int64(sh.Replicas) != q && int64(sh.Replicas) != q+1 {
				t.Fatalf("%s's share %d is not its quota %d/%d rounded", mb.Name, sh.Replicas, sh.QuotaNum, sh.QuotaDen)
			}
		}
		if sh.Reason == fleet.ShareReturning || sh.Reason == fleet.ShareHeld {
			returning = true
		} else if sh.Replicas != sh.Weighted {
			t.Fatalf("%s's share %d differs from its weighted %d without being held or returning", mb.Name, sh.Replicas, sh.Weighted)
		}
	}
	if int64(s.Placed) != min(placed, 1<<31-1) {
		t.Fatalf("placed %d, shares sum to %d", s.Placed, placed)
	}
	total := int64(in.Total)
	switch {
	case pooled == 0:
		if placed != 0 {
			t.Fatalf("nothing pooled, %d placed", placed)
		}
	case minSum <= total && total <= maxSum:
		if placed != total {
			t.Fatalf("feasible total %d, placed %d: %s", total, placed, s.Message)
		}
	case total < minSum:
		if placed != minSum {
			t.Fatalf("total %d below mins %d, placed %d", total, minSum, placed)
		}
	default:
		if placed != maxSum {
			t.Fatalf("total %d above maxes %d, placed %d", total, maxSum, placed)
		}
	}
	if returning {
		wasOut := false
		for i, p := range prev {
			if !p.Pooled && in.Exclusion[i] == "" || p.Returning {
				wasOut = true
			}
		}
		if !wasOut {
			t.Fatalf("shares held or returning with no member returning: %s", s.Message)
		}
	}
}
