package ha

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The sequential model of one target that the histories are checked
// against. The load is built so that every call's answer says what the
// call saw (load_test.go):
//
//   - every load Recommend of a target carries its own proposal p (an
//     External metric; no two of a target's calls share one) and
//     replicas above every proposal, so the decision scales down and the
//     one-hour stabilization window makes it max(p, every proposal before
//     it): the Recommend appends p to the history and its answer tells the
//     largest proposal it found there;
//   - Observe(applied) of decision p is accepted when p is the target's
//     last decision (it appends p to the Applied events) and refused with
//     InvalidArgument when another decision came after it;
//   - a read (GetTarget) returns the proposals of the history and the
//     Applied events, in order.
//
// Every call appends its own value, so in any linearization the appends
// come in the order the final read (after the load, after every fault)
// shows: a different order would make that read fail. The model is told
// that order and accepts an append only as the next one of it. This prunes
// only orders the final read would reject anyway, and so the checker need
// not try every order of concurrent calls first — without it, a target of
// 40 calls could take minutes. Its state is then how far each order has
// got, and the last decision.

// kind is the kind of a call.
type kind uint8

const (
	recommend kind = iota
	observe
	read
)

// input is a call: its kind and the proposal it concerns (none for read).
type input struct {
	kind kind
	p    int32
}

// output is what a call returned.
type output struct {
	// unknown: the call failed in a way that leaves open whether it took
	// effect (the server or etcd went away mid-call).
	unknown bool
	// desired is a Recommend's decided replica count.
	desired int32
	// refused: Observe was refused as not the last decision.
	refused bool
	// recs and applied are what a read saw, as lengths of prefixes of the
	// final order: -1 when what it saw is no prefix of it.
	recs, applied int
	// shown is what a read saw, for the log.
	shown string
}

// state is the model's state of one target: the history holds the first
// recs proposals of the final order, the Applied events the first applied
// of theirs, and last is the last decision's proposal (0 for none).
type state struct {
	recs, applied int
	last          int32
}

// order is the final read of one target: what the model appends in.
type order struct {
	recs, applied []int32
	highest       []int32 // highest[i] is the largest of recs[:i]
}

func newOrder(recs, applied []int32) *order {
	o := &order{recs: recs, applied: applied, highest: make([]int32, len(recs)+1)}
	for i, p := range recs {
		o.highest[i+1] = max(o.highest[i], p)
	}
	return o
}

// prefix is the length of the prefix of full that seen is, or -1.
func prefix(seen, full []int32) int {
	if len(seen) > len(full) || !slices.Equal(seen, full[:len(seen)]) {
		return -1
	}
	return len(seen)
}

// model is the porcupine model of a target whose final read is o.
func (o *order) model() porcupine.Model {
	return porcupine.Model{
		Init:              func() any { return state{} },
		Step:              o.step,
		DescribeOperation: describe,
		DescribeState: func(st any) string {
			s := st.(state)
			return fmt.Sprintf("recs %v applied %v last %d", o.recs[:s.recs], o.applied[:s.applied], s.last)
		},
	}
}

// step is the model's transition; see the comment at the top.
func (o *order) step(st, in0, out0 any) (bool, any) {
	s, in, out := st.(state), in0.(input), out0.(output)
	switch in.kind {
	case recommend:
		if s.recs == len(o.recs) || o.recs[s.recs] != in.p {
			return false, s
		}
		if !out.unknown && out.desired != max(in.p, o.highest[s.recs]) {
			return false, s
		}
		return true, state{recs: s.recs + 1, applied: s.applied, last: in.p}
	case observe:
		if slices.Contains(o.applied[:s.applied], in.p) { // a repeated report changes nothing
			return !out.refused, s
		}
		if s.last == in.p {
			if out.refused || s.applied == len(o.applied) || o.applied[s.applied] != in.p {
				return false, s
			}
			return true, state{recs: s.recs, applied: s.applied + 1, last: s.last}
		}
		return out.unknown || out.refused, s
	default:
		return out.recs == s.recs && out.applied == s.applied, s
	}
}

// describe renders a call for porcupine's visualization and the test log.
func describe(in0, out0 any) string {
	in, out := in0.(input), out0.(output)
	var res string
	switch {
	case out.unknown:
		res = "?"
	case in.kind == recommend:
		res = fmt.Sprint(out.desired)
	case in.kind == observe && out.refused:
		res = "refused"
	case in.kind == observe:
		res = "ok"
	default:
		res = out.shown
	}
	switch in.kind {
	case recommend:
		return fmt.Sprintf("Recommend(%d) → %s", in.p, res)
	case observe:
		return fmt.Sprintf("Observe(applied %d) → %s", in.p, res)
	default:
		return "GetTarget → " + res
	}
}

// call is one recorded call of one target.
type call struct {
	client     int
	in         input
	out        output
	start, end int64 // nanoseconds since the load began; end is unset for unknown
	server     int
	// Of an acknowledged Recommend: the decision's id and time.
	id string
	at int64 // decision time, Unix nanoseconds
	// Of a read, as returned: the proposals (setup entries left out) and
	// the Applied events' decision ids; turned into out.recs and
	// out.applied once every decision id is known.
	readRecs []int32
	readIDs  []string
}

// operations turns one target's calls into porcupine operations and
// returns them with the model to check them against, whose order is the
// final read's. Reads get their outputs; calls of unknown outcome end at
// infinity (they may take effect at any moment after they began), and
// those whose effect no read ever saw are left out — they did not take
// effect, since nothing leaves a history during a run — which keeps the
// search small.
func operations(calls []call, final call, proposalOf map[string]int32) ([]porcupine.Operation, porcupine.Model, error) {
	appliedOf := func(c *call) ([]int32, error) {
		var ps []int32
		for _, id := range c.readIDs {
			p, ok := proposalOf[id]
			if !ok {
				return nil, fmt.Errorf("a read saw an Applied event of decision %s, which no acknowledged Recommend of the target returned", id)
			}
			ps = append(ps, p)
		}
		return ps, nil
	}
	finalApplied, err := appliedOf(&final)
	if err != nil {
		return nil, porcupine.Model{}, err
	}
	o := newOrder(final.readRecs, finalApplied)
	seenRecs, seenApplied := map[int32]bool{}, map[int32]bool{}
	for i := range calls {
		c := &calls[i]
		if c.in.kind != read || c.out.unknown {
			continue
		}
		applied, err := appliedOf(c)
		if err != nil {
			return nil, porcupine.Model{}, err
		}
		c.out.recs, c.out.applied = prefix(c.readRecs, o.recs), prefix(applied, o.applied)
		c.out.shown = fmt.Sprintf("recs %v applied %v", c.readRecs, applied)
		for _, p := range c.readRecs {
			seenRecs[p] = true
		}
		for _, p := range applied {
			seenApplied[p] = true
		}
	}
	var ops []porcupine.Operation
	for _, c := range calls {
		end := c.end
		if c.out.unknown {
			switch {
			case c.in.kind == read,
				c.in.kind == recommend && !seenRecs[c.in.p],
				c.in.kind == observe && !seenApplied[c.in.p]:
				continue
			}
			end = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{ClientId: c.client, Input: c.in, Output: c.out, Call: c.start, Return: end})
	}
	return ops, o.model(), nil
}

// explain lists a target's calls in the order they began (after
// operations filled in the reads' outputs), for a failed check.
func explain(calls []call) string {
	var b strings.Builder
	for i, c := range calls {
		if i == 200 {
			fmt.Fprintf(&b, "… %d more\n", len(calls)-i)
			break
		}
		end := "∞"
		if !c.out.unknown {
			end = fmt.Sprintf("%.3f", float64(c.end)/1e9)
		}
		fmt.Fprintf(&b, "  [%.3f s, %s s] caller %d via server %d: %s\n", float64(c.start)/1e9, end, c.client, c.server, describe(c.in, c.out))
	}
	return b.String()
}
