package ha

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// checkClocks checks that each server runs on its own clock: a first
// decision of a fresh target is stamped by the server's clock, its offset
// from the test's.
func (c *cluster) checkClocks(t *testing.T) {
	t.Helper()
	for i, n := range c.nodes {
		name := fmt.Sprintf("clock-s%d", i)
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		start := time.Now()
		resp, err := n.probe.Recommend(ctx, request(name, replicas, 100))
		end := time.Now()
		cancel()
		if err != nil {
			t.Fatalf("Recommend via server %d: %v", i, err)
		}
		at := resp.GetDecision().GetDecisionTime().AsTime()
		if at.Before(start.Add(n.offset)) || at.After(end.Add(n.offset)) {
			t.Fatalf("server %d stamped a first decision at %v, want between %v and %v: its clock is not offset by %v",
				i, at, start.Add(n.offset), end.Add(n.offset), n.offset)
		}
	}
	t.Logf("server clocks offset by %v from the test's", []time.Duration{c.nodes[0].offset, c.nodes[1].offset, c.nodes[2].offset})
}

// checkStamps checks each acknowledged Recommend's decision time against
// the clocks: never before its own server's clock when the call began (a
// target's clock never runs backwards, but a server never goes back
// either), never after the fastest server's clock when it ended (a
// target's clock follows the fastest clock that has written it, no
// further). It logs how many decisions were stamped later than their
// server's clock because a faster server had written the target.
func checkStamps(t *testing.T, l *load) {
	t.Helper()
	var fastest time.Duration
	for _, n := range l.c.nodes {
		fastest = max(fastest, n.offset)
	}
	// The system clock may be slewed during a run (by at most 500 ppm).
	tol := 20*time.Millisecond + time.Since(l.hist.began)/1000
	wall := func(ns int64) time.Time { return l.hist.began.Add(time.Duration(ns)) }
	var acked, later, wrong int
	for name, calls := range l.hist.calls {
		for _, c := range calls {
			if c.in.kind != recommend || c.out.unknown {
				continue
			}
			acked++
			at, off := time.Unix(0, c.at), l.c.nodes[c.server].offset
			lo, hi := wall(c.start).Add(off-tol), wall(c.end).Add(fastest+tol)
			if at.Before(lo) || at.After(hi) {
				if wrong++; wrong <= 10 {
					t.Errorf("%s: decision %s via server %d (clock %+v) stamped at %v, want between %v and %v",
						name, c.id, c.server, off, at, lo, hi)
				}
			}
			if at.After(wall(c.end).Add(off)) {
				later++
			}
		}
	}
	t.Logf("clocks: %d of %d acknowledged decisions stamped later than their server's clock (a target's clock follows the fastest server that wrote it); %d stamped outside the clocks",
		later, acked, wrong)
}

// disorder says how a load target's decisions are not stamped in the
// order they were recorded (nothing when they are): the history read from
// every server, in which the load's hour-long window keeps every
// recommendation in the order it was recorded, must hold them at strictly
// increasing times, and the decision log, kept by time, must list them in
// that order. (With a shorter window the engine, as upstream's controller
// does, writes a new recommendation over one that has left the window, so
// the history's order is not time's.)
func disorder(final []*setpointv1.Target, log []*setpointv1.LoggedDecision) []string {
	var logged []int64
	for _, d := range log {
		logged = append(logged, d.GetDecisionTime().AsTime().UnixNano())
	}
	var out []string
	if !slices.IsSorted(logged) || len(slices.Compact(slices.Clone(logged))) != len(logged) {
		out = append(out, fmt.Sprintf("the decision log is not in strictly increasing time order: %v", logged))
	}
	for s, tg := range final {
		var recs []int64
		for _, r := range tg.GetHistory().GetRecommendations() {
			recs = append(recs, r.GetTime().AsTime().UnixNano())
		}
		for i := 1; i < len(recs); i++ {
			if recs[i] <= recs[i-1] {
				out = append(out, fmt.Sprintf("the history read from server %d has decision %d stamped at %d ns, not after the one before it (%d ns)", s, i, recs[i], recs[i-1]))
				break
			}
		}
		inLog := slices.DeleteFunc(slices.Clone(logged), func(at int64) bool { return !slices.Contains(recs, at) })
		inHistory := slices.DeleteFunc(slices.Clone(recs), func(at int64) bool { return !slices.Contains(logged, at) })
		if !slices.Equal(inLog, inHistory) {
			out = append(out, fmt.Sprintf("the decision log lists the history's decisions (read from server %d) in another order: %v, history %v", s, inLog, inHistory))
		}
	}
	return out
}

// largeSkew is how far TestClockSkew's servers' clocks are apart: more
// than its stabilization window.
const largeSkew = 30 * time.Second

// TestClockSkew: with the servers' clocks 30 s behind, right and ahead, a
// target's clock is the fastest clock that has written it, and its
// stabilization window is measured on that clock.
//
//   - A decision via the server ahead is stamped by its clock; the window
//     ends there, so a recommendation recorded by the right clock 20 s
//     (the window) before that is out of it, as it would be after one
//     clock stepped forward 30 s: skew shortens the windows by up to its
//     size (docs/reliability.md).
//   - A decision via the server behind, while the target's clock is
//     ahead of it, is stamped a nanosecond after the last one: never
//     before it, never a recommendation seen as in the future; so is an
//     Observe's Applied event.
//   - Every server's history and the decision log keep one order.
func TestClockSkew(t *testing.T) {
	c := startCluster(t, skewed(largeSkew))
	c.checkClocks(t)
	clients := c.dial(t)
	const behind, right, ahead = 0, 1, 2
	const window = 20 * time.Second
	name := "skew"
	recommend := func(via int, p int32) *setpointv1.Decision {
		t.Helper()
		req := request(name, replicas, p)
		req.Settings.DownscaleStabilizationWindow = durationpb.New(window)
		resp, err := clients[via].Recommend(t.Context(), req)
		if err != nil {
			t.Fatalf("Recommend(%d) via server %d: %v", p, via, err)
		}
		return resp.GetDecision()
	}
	at := func(d *setpointv1.Decision) time.Time { return d.GetDecisionTime().AsTime() }

	// Set up as the load does: a first decision at 1 replica (a target's
	// first decision holds its current count in the window).
	setup := request(name, 1, 1)
	setup.Settings.DownscaleStabilizationWindow = durationpb.New(window)
	if _, err := clients[right].Recommend(t.Context(), setup); err != nil {
		t.Fatal(err)
	}
	first := recommend(right, 500)
	if got := first.GetDesiredReplicas(); got != 500 {
		t.Fatalf("first decision: %d replicas, want 500", got)
	}
	// The server ahead: its decision is 30 s later on the target's clock,
	// so 500, recorded by the right clock, is out of its 20 s window.
	second := recommend(ahead, 100)
	if gap := at(second).Sub(at(first)); gap < largeSkew-time.Second || gap > largeSkew+5*time.Second {
		t.Errorf("the decision via the server %v ahead is stamped %v after the one before it, want about %v", largeSkew, gap, largeSkew)
	}
	if got := second.GetDesiredReplicas(); got != 100 {
		t.Errorf("the decision via the server ahead: %d replicas, want 100 (500 was recorded %v earlier on its clock, out of the %v window)", got, at(second).Sub(at(first)).Round(time.Second), window)
	}
	// The server behind, 60 s behind the target's clock: stamped right
	// after the last decision, and deciding on that clock (100 in the
	// window, 500 not).
	third := recommend(behind, 50)
	if want := at(second).Add(time.Nanosecond); !at(third).Equal(want) {
		t.Errorf("the decision via the server behind is stamped %v, want a nanosecond after the last one (%v)", at(third), want)
	}
	if got := third.GetDesiredReplicas(); got != 100 {
		t.Errorf("the decision via the server behind: %d replicas, want 100 (the largest recommendation in the window on the target's clock)", got)
	}
	if _, err := clients[behind].Applied(t.Context(), key(name), third.GetDecisionId(), replicas, third.GetDesiredReplicas()); err != nil {
		t.Fatalf("Observe(applied) via the server behind: %v", err)
	}
	fourth := recommend(behind, 60)
	if !at(fourth).After(at(third)) {
		t.Errorf("a second decision via the server behind is stamped %v, not after the one before it (%v)", at(fourth), at(third))
	}

	// The set-up's and the first recommendation are out of the window on
	// the target's clock, and so out of the history.
	wantTimes := []time.Time{at(second), at(third), at(fourth)}
	var final []*setpointv1.Target
	for s, cl := range clients {
		tg, err := cl.Target(t.Context(), key(name))
		if err != nil {
			t.Fatalf("GetTarget via server %d: %v", s, err)
		}
		final = append(final, tg)
		var got []time.Time
		for _, r := range tg.GetHistory().GetRecommendations() {
			got = append(got, r.GetTime().AsTime())
		}
		slices.SortFunc(got, time.Time.Compare) // see disorder
		if !slices.EqualFunc(got, wantTimes, time.Time.Equal) {
			t.Errorf("the history read from server %d has recommendations at %v, want %v", s, got, wantTimes)
		}
		for _, e := range tg.GetEvents() {
			if e.GetKind() == "Applied" && e.GetTime().AsTime().Before(at(third)) {
				t.Errorf("server %d: the Applied event is stamped %v, before the decision it reports (%v)", s, e.GetTime().AsTime(), at(third))
			}
		}
	}
	var logged []time.Time
	for _, d := range decisionLog(t, clients[behind], name) {
		logged = append(logged, d.GetDecisionTime().AsTime())
	}
	if len(logged) == 0 {
		t.Fatal("the decision log is empty")
	}
	if want := append([]time.Time{logged[0], at(first)}, wantTimes...); !slices.EqualFunc(logged, want, time.Time.Equal) {
		t.Errorf("the decision log has decisions at %v, want the set-up's, then %v", logged, want[1:])
	}
	t.Logf("decisions at %v", []string{fmtAt(first), fmtAt(second), fmtAt(third), fmtAt(fourth)})
}

// fmtAt is a decision's time and replicas, for the log.
func fmtAt(d *setpointv1.Decision) string {
	return fmt.Sprintf("%s → %d", d.GetDecisionTime().AsTime().Format("15:04:05.000000000"), d.GetDesiredReplicas())
}
