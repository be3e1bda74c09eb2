package fleet_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/fleet"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ptr(n int32) *int32 { return &n }

// m is a member of weight w; opts set min and max.
func m(name string, w int32, opts ...func(*fleet.Member)) fleet.Member {
	mb := fleet.Member{Name: name, Weight: w}
	for _, o := range opts {
		o(&mb)
	}
	return mb
}

func minR(n int32) func(*fleet.Member) { return func(m *fleet.Member) { m.Min = n } }
func maxR(n int32) func(*fleet.Member) { return func(m *fleet.Member) { m.Max = ptr(n) } }

// pooledAll is no exclusion for n members.
func pooledAll(n int) []fleet.Exclusion { return make([]fleet.Exclusion, n) }

type shareGot struct {
	Replicas int32
	Reason   fleet.ShareReason
}

func got(s fleet.Split) []shareGot {
	var out []shareGot
	for _, sh := range s.Shares {
		out = append(out, shareGot{sh.Replicas, sh.Reason})
	}
	return out
}

// TestDivide: the weighted split, its rounding and its clamps.
func TestDivide(t *testing.T) {
	W, Mn, Mx, Sb, Ex := fleet.ShareWeighted, fleet.ShareAtMin, fleet.ShareAtMax, fleet.ShareStandby, fleet.ShareExcluded
	tests := []struct {
		name      string
		total     int32
		members   []fleet.Member
		exclusion []fleet.Exclusion // nil: all pooled
		want      []shareGot
		placed    int32
	}{
		{"equal weights, remainder to the first", 10, []fleet.Member{m("a", 1), m("b", 1), m("c", 1)}, nil,
			[]shareGot{{4, W}, {3, W}, {3, W}}, 10},
		{"largest remainders", 10, []fleet.Member{m("a", 3), m("b", 2), m("c", 2)}, nil, // 4.29, 2.86, 2.86
			[]shareGot{{4, W}, {3, W}, {3, W}}, 10},
		{"remainder tie broken by weight", 3, []fleet.Member{m("a", 1), m("b", 2), m("c", 3)}, nil, // 0.5, 1, 1.5
			[]shareGot{{0, W}, {1, W}, {2, W}}, 3},
		{"exact quotas", 12, []fleet.Member{m("a", 1), m("b", 2), m("c", 3)}, nil,
			[]shareGot{{2, W}, {4, W}, {6, W}}, 12},
		{"min clamp, the rest by weight", 10, []fleet.Member{m("a", 1, minR(3)), m("b", 1), m("c", 8)}, nil, // rest 7: 0.78, 6.22
			[]shareGot{{3, Mn}, {1, W}, {6, W}}, 10},
		{"max clamp", 10, []fleet.Member{m("a", 1, maxR(2)), m("b", 1)}, nil,
			[]shareGot{{2, Mx}, {8, W}}, 10},
		{"the min side fixed first, the max no longer binds", 20, []fleet.Member{m("a", 1, minR(5)), m("b", 10, maxR(8)), m("c", 9)}, nil,
			[]shareGot{{5, Mn}, {8, W}, {7, W}}, 20}, // a at 5 first; then 15 by 10:9 = 7.89, 7.11
		{"the max side fixed first", 20, []fleet.Member{m("a", 1, minR(2)), m("b", 10, maxR(4)), m("c", 9)}, nil, // b over by 6, a under by 1
			[]shareGot{{2, Mn}, {4, Mx}, {14, W}}, 20},
		{"max 0 takes nothing", 6, []fleet.Member{m("a", 1), m("b", 1, maxR(0)), m("c", 1)}, nil,
			[]shareGot{{3, W}, {0, Mx}, {3, W}}, 6},
		{"standby at its min", 6, []fleet.Member{m("a", 2), m("b", 0, minR(1))}, nil,
			[]shareGot{{5, W}, {1, Sb}}, 6},
		{"standbys take what the weighted cannot hold, evenly", 10, []fleet.Member{m("a", 1, maxR(4)), m("b", 0), m("c", 0)}, nil,
			[]shareGot{{4, Mx}, {3, Sb}, {3, Sb}}, 10},
		{"all weights 0", 5, []fleet.Member{m("a", 0), m("b", 0)}, nil,
			[]shareGot{{3, Sb}, {2, Sb}}, 5},
		{"below the mins: each at its min", 2, []fleet.Member{m("a", 1, minR(2)), m("b", 1, minR(2))}, nil,
			[]shareGot{{2, Mn}, {2, Mn}}, 4},
		{"above the maxes: each at its max", 10, []fleet.Member{m("a", 1, maxR(3)), m("b", 1, maxR(3))}, nil,
			[]shareGot{{3, Mx}, {3, Mx}}, 6},
		{"failover: an excluded member's share moves", 9, []fleet.Member{m("a", 1), m("b", 1), m("c", 1)},
			[]fleet.Exclusion{"", "", fleet.ExcludedStale},
			[]shareGot{{5, W}, {4, W}, {0, Ex}}, 9},
		{"failover within the others' max", 9, []fleet.Member{m("a", 1, maxR(4)), m("b", 1, maxR(4)), m("c", 1)},
			[]fleet.Exclusion{"", "", fleet.ExcludedCannotScale},
			[]shareGot{{4, Mx}, {4, Mx}, {0, Ex}}, 8},
		{"failover to a standby", 9, []fleet.Member{m("a", 1), m("b", 0)},
			[]fleet.Exclusion{fleet.ExcludedStale, ""},
			[]shareGot{{0, Ex}, {9, Sb}}, 9},
		{"all members excluded", 6, []fleet.Member{m("a", 1), m("b", 1)},
			[]fleet.Exclusion{fleet.ExcludedStale, fleet.ExcludedNoReport},
			[]shareGot{{0, Ex}, {0, Ex}}, 0},
		{"zero total", 0, []fleet.Member{m("a", 1), m("b", 3)}, nil,
			[]shareGot{{0, Mn}, {0, Mn}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := tt.exclusion
			if ex == nil {
				ex = pooledAll(len(tt.members))
			}
			s, states := fleet.Divide(fleet.SplitInput{Total: tt.total, Members: tt.members, Exclusion: ex, Now: t0})
			if diff := cmp.Diff(tt.want, got(s)); diff != "" {
				t.Errorf("shares (-want +got):\n%s\n%s", diff, s.Message)
			}
			if s.Placed != tt.placed {
				t.Errorf("placed %d, want %d: %s", s.Placed, tt.placed, s.Message)
			}
			for i, st := range states {
				if st.Share != s.Shares[i].Replicas || st.Pooled != (ex[i] == "") {
					t.Errorf("state %+v does not follow share %+v", st, s.Shares[i])
				}
			}
			for _, sh := range s.Shares {
				if sh.Message == "" || !strings.Contains(s.Message, sh.Member) {
					t.Errorf("share %s is not explained: %q in %q", sh.Member, sh.Message, s.Message)
				}
			}
		})
	}
}

// TestDivideQuota: a rounded share carries its exact quota and whether it
// got a remainder, and says so.
func TestDivideQuota(t *testing.T) {
	s, _ := fleet.Divide(fleet.SplitInput{Total: 10, Members: []fleet.Member{m("a", 3), m("b", 2), m("c", 2)}, Exclusion: pooledAll(3), Now: t0})
	type q struct {
		Num, Den  int64
		Remainder bool
	}
	var gotQ []q
	for _, sh := range s.Shares {
		gotQ = append(gotQ, q{sh.QuotaNum, sh.QuotaDen, sh.Remainder})
	}
	if diff := cmp.Diff([]q{{30, 7, false}, {20, 7, true}, {20, 7, true}}, gotQ); diff != "" {
		t.Errorf("quotas (-want +got):\n%s", diff)
	}
	if msg := s.Shares[1].Message; !strings.Contains(msg, "2.86") || !strings.Contains(msg, "rounded up") {
		t.Errorf("b's message %q does not give its quota and rounding", msg)
	}
	if msg := s.Shares[0].Message; !strings.Contains(msg, "4.29") || !strings.Contains(msg, "rounded down") {
		t.Errorf("a's message %q does not give its quota and rounding", msg)
	}
}

// slowDown is a scale-down rule of one pod per minute.
var slowDown = &engine.Rules{SelectPolicy: engine.SelectMax, Policies: []engine.Policy{{Type: engine.PodsPolicy, Value: 1, PeriodSeconds: 60}}}

// TestReturnPaced steps the clock through a member's failure and return:
// its share moves at once, and comes back as fast as the scale-down policy
// (one pod a minute) lets the other members' shares fall.
func TestReturnPaced(t *testing.T) {
	members := []fleet.Member{m("a", 1), m("b", 1), m("c", 1)}
	stale := []fleet.Exclusion{"", "", fleet.ExcludedStale}
	var states []fleet.MemberState
	steps := []struct {
		at        time.Duration
		exclusion []fleet.Exclusion
		want      []shareGot
	}{
		{0, nil, []shareGot{{3, fleet.ShareWeighted}, {3, fleet.ShareWeighted}, {3, fleet.ShareWeighted}}},
		{15 * time.Second, stale, []shareGot{{5, fleet.ShareWeighted}, {4, fleet.ShareWeighted}, {0, fleet.ShareExcluded}}},
		// c returns: a may fall from 5 to 4 this minute, b to its 3.
		{30 * time.Second, nil, []shareGot{{4, fleet.ShareHeld}, {3, fleet.ShareWeighted}, {2, fleet.ShareReturning}}},
		// a's decrease at 30s still counts within the minute.
		{45 * time.Second, nil, []shareGot{{4, fleet.ShareHeld}, {3, fleet.ShareWeighted}, {2, fleet.ShareReturning}}},
		{89 * time.Second, nil, []shareGot{{4, fleet.ShareHeld}, {3, fleet.ShareWeighted}, {2, fleet.ShareReturning}}},
		// A minute after a's decrease: a reaches 3, c its full share.
		{91 * time.Second, nil, []shareGot{{3, fleet.ShareWeighted}, {3, fleet.ShareWeighted}, {3, fleet.ShareWeighted}}},
	}
	for _, st := range steps {
		ex := st.exclusion
		if ex == nil {
			ex = pooledAll(3)
		}
		var s fleet.Split
		s, states = fleet.Divide(fleet.SplitInput{Total: 9, Members: members, Exclusion: ex, Previous: states, ScaleDown: slowDown, Now: t0.Add(st.at)})
		if diff := cmp.Diff(st.want, got(s)); diff != "" {
			t.Errorf("at +%v (-want +got):\n%s\n%s", st.at, diff, s.Message)
		}
		if s.Placed != 9 {
			t.Errorf("at +%v: placed %d of 9", st.at, s.Placed)
		}
	}
	if states[2].Returning {
		t.Errorf("c still returning after reaching its share: %+v", states[2])
	}
}

// TestReturnImmediate: with the default scale-down policy (100% per 15 s)
// and with the legacy normalization (no rules), a returning member gets
// its share back at once.
func TestReturnImmediate(t *testing.T) {
	members := []fleet.Member{m("a", 1), m("b", 1)}
	def := &engine.Rules{SelectPolicy: engine.SelectMax, Policies: []engine.Policy{{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}}}
	for name, rules := range map[string]*engine.Rules{"default policy": def, "legacy": nil} {
		_, states := fleet.Divide(fleet.SplitInput{Total: 8, Members: members, Exclusion: []fleet.Exclusion{"", fleet.ExcludedStale}, ScaleDown: rules, Now: t0})
		s, _ := fleet.Divide(fleet.SplitInput{Total: 8, Members: members, Exclusion: pooledAll(2), Previous: states, ScaleDown: rules, Now: t0.Add(15 * time.Second)})
		if diff := cmp.Diff([]shareGot{{4, fleet.ShareWeighted}, {4, fleet.ShareWeighted}}, got(s)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestReturnDisabledScaleDown: with scale-down disabled the others keep
// their shares and the returning member gets only what the total leaves.
func TestReturnDisabledScaleDown(t *testing.T) {
	members := []fleet.Member{m("a", 1), m("b", 1)}
	off := &engine.Rules{SelectPolicy: engine.SelectDisabled}
	_, states := fleet.Divide(fleet.SplitInput{Total: 8, Members: members, Exclusion: []fleet.Exclusion{"", fleet.ExcludedStale}, ScaleDown: off, Now: t0})
	s, _ := fleet.Divide(fleet.SplitInput{Total: 10, Members: members, Exclusion: pooledAll(2), Previous: states, ScaleDown: off, Now: t0.Add(time.Hour)})
	if diff := cmp.Diff([]shareGot{{8, fleet.ShareHeld}, {2, fleet.ShareReturning}}, got(s)); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, s.Message)
	}
}

// TestReturnYieldsToMin: a returning member's Min comes before holding the
// others.
func TestReturnYieldsToMin(t *testing.T) {
	members := []fleet.Member{m("a", 1), m("b", 1, minR(4))}
	_, states := fleet.Divide(fleet.SplitInput{Total: 8, Members: members, Exclusion: []fleet.Exclusion{"", fleet.ExcludedStale}, ScaleDown: slowDown, Now: t0})
	s, _ := fleet.Divide(fleet.SplitInput{Total: 8, Members: members, Exclusion: pooledAll(2), Previous: states, ScaleDown: slowDown, Now: t0.Add(15 * time.Second)})
	if diff := cmp.Diff([]shareGot{{4, fleet.ShareWeighted}, {4, fleet.ShareWeighted}}, got(s)); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, s.Message)
	}
}
