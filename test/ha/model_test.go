package ha

import (
	"fmt"
	"math"
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
// The state is strings of 2-byte proposals, so that states compare with ==.

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
	// recs and applied are what a read saw: the history's proposals and
	// the Applied events' proposals, in order, encoded as the state is.
	recs, applied string
}

// state is the model's state of one target.
type state struct {
	recs, applied string // proposals, 2 bytes each
	last          int32  // the last decision's proposal; 0 for none
}

// enc is the 2-byte encoding of proposals.
func enc(ps ...int32) string {
	b := make([]byte, 0, 2*len(ps))
	for _, p := range ps {
		b = append(b, byte(p>>8), byte(p))
	}
	return string(b)
}

// dec is enc's inverse.
func dec(s string) []int32 {
	ps := make([]int32, 0, len(s)/2)
	for i := 0; i+1 < len(s); i += 2 {
		ps = append(ps, int32(s[i])<<8|int32(s[i+1]))
	}
	return ps
}

func contains(s string, p int32) bool {
	for _, q := range dec(s) {
		if q == p {
			return true
		}
	}
	return false
}

func maxOf(s string) int32 {
	var m int32
	for _, q := range dec(s) {
		m = max(m, q)
	}
	return m
}

// step is the model's transition; see the comment at the top.
func step(st, in0, out0 any) (bool, any) {
	s, in, out := st.(state), in0.(input), out0.(output)
	switch in.kind {
	case recommend:
		if !out.unknown && out.desired != max(in.p, maxOf(s.recs)) {
			return false, s
		}
		return true, state{recs: s.recs + enc(in.p), applied: s.applied, last: in.p}
	case observe:
		if contains(s.applied, in.p) { // a repeated report changes nothing
			return !out.refused, s
		}
		if s.last == in.p {
			if out.refused {
				return false, s
			}
			return true, state{recs: s.recs, applied: s.applied + enc(in.p), last: s.last}
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
		res = fmt.Sprintf("recs %v applied %v", dec(out.recs), dec(out.applied))
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

// model is the porcupine model of one target's history.
var model = porcupine.Model{
	Init:              func() any { return state{} },
	Step:              step,
	DescribeOperation: describe,
	DescribeState: func(st any) string {
		s := st.(state)
		return fmt.Sprintf("recs %v applied %v last %d", dec(s.recs), dec(s.applied), s.last)
	},
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

// operations turns one target's calls into porcupine operations: reads get
// their outputs; calls of unknown outcome end at infinity (they may take
// effect at any moment after they began), and those whose effect no read
// ever saw are left out — they did not take effect, since nothing leaves
// a history during a run — which keeps the search small.
func operations(calls []call, proposalOf map[string]int32) ([]porcupine.Operation, error) {
	seenRecs, seenApplied := map[int32]bool{}, map[int32]bool{}
	for i := range calls {
		c := &calls[i]
		if c.in.kind != read || c.out.unknown {
			continue
		}
		var applied []int32
		for _, id := range c.readIDs {
			p, ok := proposalOf[id]
			if !ok {
				return nil, fmt.Errorf("a read saw an Applied event of decision %s, which no acknowledged Recommend of the target returned", id)
			}
			applied = append(applied, p)
		}
		c.out.recs, c.out.applied = enc(c.readRecs...), enc(applied...)
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
	return ops, nil
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
