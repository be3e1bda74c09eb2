package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/engine"
)

// FuzzProposals checks the invariants of proposals from outside the
// metrics on FuzzDecide's inputs: every decision invariant still holds
// (checkDecision); with healthy metrics a fallback changes nothing; and
// when the metrics succeed, adding proposals never lowers the decision
// (the merge is a max, and normalization is monotone in the proposal).
func FuzzProposals(f *testing.F) {
	f.Add(int32(6), int32(1), int32(20), int32(38), uint16(100), uint8(16), int32(39), int32(0), []byte{1, 7, 0, 2, 30, 0, 1, 3})
	f.Add(int32(4), int32(1), int32(20), int32(60), uint16(100), uint8(fuzzFailures), int32(0), int32(300), []byte{2, 9, 1, 0, 5, 2})
	f.Add(int32(3), int32(0), int32(10), int32(80), uint16(50), uint8(fuzzExternal|fuzzBehavior), int32(0), int32(60), []byte{3, 0, 0, 1, 255, 2, 255, 255})
	f.Fuzz(func(t *testing.T, current, minR, maxR, target int32, tolPermille uint16, flags uint8, upWin, downWin int32, data []byte) {
		r := &fuzzBytes{data}
		in := fuzzInput(r, current, minR, maxR, target, tolPermille, flags, upWin, downWin)
		base, err := engine.Decide(in, engine.History{})
		if err != nil {
			return
		}
		kinds := []engine.ProposalKind{engine.ProposalFallback, engine.ProposalSchedule, engine.ProposalForecast}
		var ps, fallbacks []engine.Proposal
		for i := range int(r.u8() % 5) {
			p := engine.Proposal{Name: "p" + string(rune('a'+i)), Kind: kinds[r.u8()%3], Replicas: int32(r.u16() % 200), Explanation: "fuzz"}
			ps = append(ps, p)
			if p.Kind == engine.ProposalFallback {
				fallbacks = append(fallbacks, p)
			}
		}
		in.Proposals = ps
		if !checkDecision(t, in, engine.History{}) {
			t.Fatalf("valid proposals made a valid input invalid: %+v", ps)
		}
		d, _ := engine.Decide(in, engine.History{})
		healthy := base.Error == "" && base.Explanation.Winner >= 0
		if healthy && d.DesiredReplicas < base.DesiredReplicas {
			t.Fatalf("proposals %+v lowered the decision %d → %d", ps, base.DesiredReplicas, d.DesiredReplicas)
		}
		if healthy {
			in.Proposals = fallbacks
			only, _ := engine.Decide(in, engine.History{})
			if !cmp.Equal(base, only, cmpopts.EquateNaNs()) {
				t.Fatalf("a fallback changed a healthy decision:\n%s", cmp.Diff(base, only, cmpopts.EquateNaNs()))
			}
		}
	})
}
