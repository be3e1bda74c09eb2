package fleet_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/fleet"
	"github.com/setpointhq/setpoint/internal/scenario"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
)

// splitsPerScenario is how many random ways each corpus scenario is split
// across members (2 to 4 of them, chosen at random each time).
const splitsPerScenario = 8

// TestPooledEqualsOne is the fleet's defining property: for every scenario
// of the public corpus, the pods, metrics and replicas of every step split
// across 2–4 members at random (a new split each step) make the fleet
// decide exactly what one HPA over those pods decides, step by step
// through the scenario's history — the corpus' recorded outcome (replicas,
// scale, conditions, metric statuses) and the whole decision of a target
// given the unsplit input (status, explanation, history), messages aside,
// since the fleet's name pods by member. Each step's split of the total
// must place it exactly.
func TestPooledEqualsOne(t *testing.T) {
	loaded, bad, err := scenario.Load("../testdata/conformance/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("unparsable scenario file: %v", b)
	}
	if len(loaded) == 0 {
		t.Fatal("no scenarios found")
	}
	replays, steps := 0, 0
	for si, l := range loaded {
		sc := l.Scenario
		t.Run(sc.Name, func(t *testing.T) {
			for k := range splitsPerScenario {
				rng := rand.New(rand.NewPCG(uint64(si), uint64(k)))
				if err := replaySplit(&sc, rng); err != nil {
					t.Fatalf("%s, split %d: %v", l.Path, k, err)
				}
				replays++
				steps += len(sc.Steps)
			}
		})
	}
	t.Logf("%d scenarios × %d splits = %d replays, %d fleet decisions", len(loaded), splitsPerScenario, replays, steps)
}

// replaySplit replays sc once with each step's input split at random.
func replaySplit(sc *scenario.Scenario, rng *rand.Rand) error {
	n := 2 + rng.IntN(3)
	spec := fleet.Spec{StaleAfter: time.Minute}
	for i := range n {
		spec.Members = append(spec.Members, fleet.Member{Name: "c" + strconv.Itoa(i), Weight: int32(1 + rng.IntN(3))})
	}
	var one target.Record
	var rec fleet.Record
	for i := range sc.Steps {
		st := &sc.Steps[i]
		req := sc.Request(i)
		in, err := convert.Input(req, st.Time)
		if err != nil {
			return fmt.Errorf("step %d: convert: %v", i, err)
		}
		spec.Combine = make([]fleet.Combine, len(in.Spec.Metrics))
		for j, m := range in.Spec.Metrics {
			if m.Type == engine.ObjectSource || m.Type == engine.ExternalSource {
				spec.Combine[j] = []fleet.Combine{fleet.CombineSum, fleet.CombineShared}[rng.IntN(2)]
			}
		}
		id := strconv.Itoa(i + 1)
		ref := convert.TargetRef(req.GetSpec().GetScaleTargetRef())
		if err := target.Decide(&one, target.Input{Ref: ref, Engine: in}, id, st.Time); err != nil {
			return fmt.Errorf("step %d: one HPA: %v", i, err)
		}
		reports := splitInput(rng, in, spec, st.Time)
		if err := fleet.Decide(&rec, fleet.Input{Ref: ref, Engine: in, Fleet: spec, Reports: reports}, id, st.Time); err != nil {
			return fmt.Errorf("step %d: fleet: %v", i, err)
		}
		got, want := rec.Target.Last.Decision, one.Last.Decision
		if mm := scenario.Compare(&st.Expect, scenario.OutcomeOf(got)); mm != nil {
			mm.Step = i
			return fmt.Errorf("fleet differs from the corpus: %s", mm)
		}
		if (got.Error == "") != (want.Error == "") {
			return fmt.Errorf("step %d: fleet error %q, one HPA's %q", i, got.Error, want.Error)
		}
		if !reflect.DeepEqual(wordless(want), wordless(got)) {
			if diff := cmp.Diff(want, got, decisionOpts); diff != "" {
				return fmt.Errorf("step %d: fleet decision differs from one HPA's (-one +fleet):\n%s", i, diff)
			}
		}
		if !reflect.DeepEqual(one.History, rec.Target.History) {
			if diff := cmp.Diff(one.History, rec.Target.History, cmpopts.EquateEmpty()); diff != "" {
				return fmt.Errorf("step %d: histories differ (-one +fleet):\n%s", i, diff)
			}
		}
		if s := rec.Split; s.Placed != s.Total || s.Total != wantTotal(got, in.Scale.Replicas) {
			return fmt.Errorf("step %d: split placed %d of %d (decision %d, rescale %v): %s", i, s.Placed, s.Total, got.DesiredReplicas, got.Rescale, s.Message)
		}
		if w := st.Expect.Scale; w != nil {
			o := target.Observation{Kind: target.EventApplied, DecisionID: id, From: st.Scale.Replicas, To: *w}
			if err := target.Observe(&one, o, st.Time); err != nil {
				return fmt.Errorf("step %d: one HPA applied: %v", i, err)
			}
			if err := target.Observe(&rec.Target, o, st.Time); err != nil {
				return fmt.Errorf("step %d: fleet applied: %v", i, err)
			}
		}
	}
	return nil
}

// wantTotal is what the split divides: the decision's count when it
// rescales, the current count otherwise.
func wantTotal(d engine.Decision, current int32) int32 {
	if d.Rescale {
		return d.DesiredReplicas
	}
	return current
}

// wordless is d without the words decisionOpts ignore, for a quick
// reflect.DeepEqual before the slower cmp.Diff explains a difference.
func wordless(d engine.Decision) engine.Decision {
	d.Error, d.History = "", engine.History{}
	d.Status.Conditions = slices.Clone(d.Status.Conditions)
	for i := range d.Status.Conditions {
		d.Status.Conditions[i].Message = ""
	}
	e := &d.Explanation
	e.Steps, e.Metrics = slices.Clone(e.Steps), slices.Clone(e.Metrics)
	for i := range e.Steps {
		e.Steps[i].Message = ""
	}
	for i := range e.Metrics {
		e.Metrics[i].Err = ""
	}
	return d
}

// decisionOpts compare two decisions on everything but words: messages,
// the reconcile error's text and metric errors name pods, which the fleet
// names by member.
var decisionOpts = cmp.Options{
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreFields(engine.Decision{}, "Error", "History"),
	cmpopts.IgnoreFields(engine.Condition{}, "Message"),
	cmpopts.IgnoreFields(engine.Step{}, "Message"),
	cmpopts.IgnoreFields(engine.MetricExplanation{}, "Err"),
}

// splitInput divides one step's engine input among the members at random,
// as their agents would report it: every pod (with its resource and Pods
// metric samples) to one member, the scale's replicas as random parts, a
// fetch error to one member or several, Sum metrics' series (External)
// or value (Object, in parts of the same sign) spread over the members,
// and Shared metrics' answer to one member while the others hold older,
// different answers.
func splitInput(rng *rand.Rand, in engine.Input, spec fleet.Spec, now time.Time) []fleet.Report {
	n := len(spec.Members)
	reps := make([]fleet.Report, n)
	for i := range reps {
		reps[i] = fleet.Report{
			Member:       spec.Members[i].Name,
			At:           now.Add(-time.Duration(rng.IntN(30)) * time.Second),
			Scale:        engine.Scale{Selector: in.Scale.Selector, SelectorError: in.Scale.SelectorError},
			Observations: make([]engine.Observation, len(in.Spec.Metrics)),
		}
	}
	parts := func(total int32) []int32 {
		out := make([]int32, n)
		for range total {
			out[rng.IntN(n)]++
		}
		return out
	}
	for i, p := range parts(in.Scale.Replicas) {
		reps[i].Scale.Replicas = p
	}
	for i, p := range parts(in.Scale.StatusReplicas) {
		reps[i].Scale.StatusReplicas = p
	}
	owner := map[string]int{}
	for _, p := range in.Pods {
		i := rng.IntN(n)
		owner[p.Name] = i
		reps[i].Pods = append(reps[i].Pods, p)
	}
	memberOf := func(pod string) int {
		if i, ok := owner[pod]; ok {
			return i
		}
		return rng.IntN(n)
	}
	if e := in.ResourceMetrics.Err; e != "" {
		reps[rng.IntN(n)].ResourceMetrics.Err = e
	}
	for _, u := range in.ResourceMetrics.Pods {
		i := memberOf(u.Pod)
		reps[i].ResourceMetrics.Pods = append(reps[i].ResourceMetrics.Pods, u)
	}
	for j, m := range in.Spec.Metrics {
		o := in.Observations[j]
		shared := j < len(spec.Combine) && spec.Combine[j] == fleet.CombineShared
		switch {
		case o.Err != "" && shared:
			for i := range reps { // an error at some members, nothing at the others
				if i == 0 || rng.IntN(2) == 0 {
					reps[i].Observations[j].Err = o.Err
				}
			}
		case o.Err != "":
			reps[rng.IntN(n)].Observations[j].Err = o.Err
		case m.Type == engine.PodsSource:
			for _, v := range o.Values {
				i := memberOf(v.Pod)
				reps[i].Observations[j].Values = append(reps[i].Observations[j].Values, v)
			}
		case shared:
			k := rng.IntN(n)
			reps[k].Observations[j].Values = o.Values
			if len(o.Values) == 0 {
				continue
			}
			newest := o.Values[0].Timestamp
			for _, v := range o.Values {
				if v.Timestamp.After(newest) {
					newest = v.Timestamp
				}
			}
			for i := range reps {
				if i != k && rng.IntN(2) == 0 {
					reps[i].Observations[j].Values = []engine.MetricValue{{Milli: rng.Int64N(1 << 40), Timestamp: newest.Add(-time.Minute)}}
				}
			}
		case m.Type == engine.ExternalSource:
			for _, v := range o.Values {
				i := rng.IntN(n)
				reps[i].Observations[j].Values = append(reps[i].Observations[j].Values, v)
			}
		case m.Type == engine.ObjectSource && len(o.Values) > 0:
			v := o.Values[0]
			rest := v.Milli
			for i := range reps {
				part := rest
				if i < n-1 && rest != 0 {
					part = rng.Int64N(abs(rest)/2+1) * sign(rest)
				}
				rest -= part
				reps[i].Observations[j].Values = []engine.MetricValue{{Milli: part, Timestamp: v.Timestamp}}
			}
		}
	}
	return reps
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func sign(n int64) int64 {
	if n < 0 {
		return -1
	}
	return 1
}
