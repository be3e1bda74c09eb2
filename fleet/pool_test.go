package fleet_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/fleet"
	"github.com/setpointhq/setpoint/target"
)

// cpuPod is a running pod started 10 minutes ago, Ready for 9, with one
// container "app" requesting cpu millicores.
func cpuPod(name string, cpu int64) engine.Pod {
	return engine.Pod{
		Name: name, Phase: engine.PodRunning, StartTime: t0.Add(-10 * time.Minute),
		Ready:      &engine.PodReadiness{Status: engine.ConditionTrue, LastTransitionTime: t0.Add(-9 * time.Minute)},
		Containers: []engine.Container{{Name: "app", Requests: engine.ResourceList{{Name: "cpu", Milli: cpu}}}},
	}
}

// cpuUsage is a sample of pod's container "app" using cpu millicores.
func cpuUsage(pod string, cpu int64) engine.PodUsage {
	return engine.PodUsage{Pod: pod, Timestamp: t0.Add(-10 * time.Second), Window: 30 * time.Second,
		Containers: []engine.ContainerUsage{{Name: "app", Usage: engine.ResourceList{{Name: "cpu", Milli: cpu}}}}}
}

// base is the fleet's engine input: metrics as given, min 1, max 100, the
// controller defaults, no behavior.
func base(metrics ...engine.MetricSpec) engine.Input {
	return engine.Input{
		Namespace: "shop",
		Spec:      engine.Spec{MinReplicas: 1, MaxReplicas: 100, Metrics: metrics},
		Settings: engine.Settings{Tolerance: 0.1, CPUInitializationPeriod: 5 * time.Minute,
			InitialReadinessDelay: 30 * time.Second, DownscaleStabilizationWindow: 5 * time.Minute},
	}
}

var cpu60 = engine.MetricSpec{Type: engine.ResourceSource, Resource: "cpu", Target: engine.Target{Type: engine.UtilizationTarget, Utilization: 60}}

// report is a fresh report of member with its pods (cpu requests) and
// usages, one observation per metric.
func report(member string, nMetrics int, pods []engine.Pod, usage ...engine.PodUsage) fleet.Report {
	return fleet.Report{
		Member: member, At: t0.Add(-5 * time.Second),
		Scale:           engine.Scale{Replicas: int32(len(pods)), StatusReplicas: int32(len(pods)), Selector: "app=web"},
		Pods:            pods,
		ResourceMetrics: engine.ResourceMetrics{Pods: usage},
		Observations:    make([]engine.Observation, nMetrics),
	}
}

func members(names ...string) fleet.Spec {
	s := fleet.Spec{StaleAfter: time.Minute}
	for _, n := range names {
		s.Members = append(s.Members, fleet.Member{Name: n, Weight: 1})
	}
	return s
}

// TestPoolUnion: pods of the same name in two members stay apart, each
// metric sample follows its pod, and the scale is the sum.
func TestPoolUnion(t *testing.T) {
	pods := podsMetric("rps", 100)
	spec := members("eu", "us")
	eu := report("eu", 2, []engine.Pod{cpuPod("web-1", 100)}, cpuUsage("web-1", 50))
	eu.Observations[1] = engine.Observation{Values: []engine.MetricValue{{Pod: "web-1", Milli: 80, Timestamp: t0}}}
	us := report("us", 2, []engine.Pod{cpuPod("web-1", 100), cpuPod("web-2", 100)}, cpuUsage("web-1", 70), cpuUsage("web-2", 90))
	us.Observations[1] = engine.Observation{Values: []engine.MetricValue{{Pod: "web-2", Milli: 120, Timestamp: t0}}}
	p, err := fleet.Pool(spec, base(cpu60, pods), []fleet.Report{us, eu}, t0)
	if err != nil {
		t.Fatal(err)
	}
	var names, usages, values []string
	for _, pod := range p.Input.Pods {
		names = append(names, pod.Name)
	}
	for _, u := range p.Input.ResourceMetrics.Pods {
		usages = append(usages, u.Pod)
	}
	for _, v := range p.Input.Observations[1].Values {
		values = append(values, v.Pod)
	}
	want := struct{ Names, Usages, Values []string }{
		[]string{"eu/web-1", "us/web-1", "us/web-2"}, []string{"eu/web-1", "us/web-1", "us/web-2"}, []string{"eu/web-1", "us/web-2"},
	}
	if diff := cmp.Diff(want, struct{ Names, Usages, Values []string }{names, usages, values}); diff != "" {
		t.Errorf("pooled names in spec order (-want +got):\n%s", diff)
	}
	if s := p.Input.Scale; s.Replicas != 3 || s.StatusReplicas != 3 || s.Selector != "app=web" {
		t.Errorf("pooled scale %+v, want 3 replicas, 3 status replicas, app=web", s)
	}
	if p.Pooled != 2 {
		t.Errorf("pooled %d members, want 2", p.Pooled)
	}
}

func podsMetric(name string, milli int64) engine.MetricSpec {
	return engine.MetricSpec{Type: engine.PodsSource, Metric: engine.MetricIdentifier{Name: name}, Target: engine.Target{Type: engine.AverageValueTarget, Milli: milli}}
}

// TestPooledUtilization: utilization is total usage over total requests,
// not an average of the members' utilizations: eu's two pods use 150% of
// small requests, us's one pod 25% of a large one; together 400m of 600m
// is 66%, where the members' mean would be 87%.
func TestPooledUtilization(t *testing.T) {
	eu := report("eu", 1, []engine.Pod{cpuPod("a", 100), cpuPod("b", 100)}, cpuUsage("a", 150), cpuUsage("b", 150))
	us := report("us", 1, []engine.Pod{cpuPod("a", 400)}, cpuUsage("a", 100))
	var rec fleet.Record
	in := fleet.Input{Engine: base(cpu60), Fleet: members("eu", "us"), Reports: []fleet.Report{eu, us}}
	if err := fleet.Decide(&rec, in, "1", t0); err != nil {
		t.Fatal(err)
	}
	d := rec.Target.Last.Decision
	if u := d.Status.CurrentMetrics[0].AverageUtilization; u == nil || *u != 66 {
		t.Fatalf("utilization %v, want 66 (400m of 600m)", u)
	}
	// ratio 66/60 = 1.1 is within the 0.1 tolerance: no change.
	if d.Rescale || rec.Split.Total != 3 {
		t.Errorf("rescale %v, total %d; want no rescale over 3 replicas", d.Rescale, rec.Split.Total)
	}
}

// TestPoolExclusion: a stale member, one that cannot scale and one that
// never reported are left out, and their replicas with them.
func TestPoolExclusion(t *testing.T) {
	spec := members("a", "b", "c", "d")
	a := report("a", 1, []engine.Pod{cpuPod("p", 100), cpuPod("q", 100)})
	b := report("b", 1, []engine.Pod{cpuPod("p", 100)})
	b.At = t0.Add(-61 * time.Second)
	c := report("c", 1, []engine.Pod{cpuPod("p", 100)})
	c.CannotScale = "deployments.apps \"web\" not found"
	p, err := fleet.Pool(spec, base(cpu60), []fleet.Report{a, b, c}, t0)
	if err != nil {
		t.Fatal(err)
	}
	var ex []fleet.Exclusion
	for _, pm := range p.Members {
		ex = append(ex, pm.Exclusion)
	}
	if diff := cmp.Diff([]fleet.Exclusion{"", fleet.ExcludedStale, fleet.ExcludedCannotScale, fleet.ExcludedNoReport}, ex); diff != "" {
		t.Errorf("exclusions (-want +got):\n%s", diff)
	}
	if p.Input.Scale.Replicas != 2 || len(p.Input.Pods) != 2 || p.Pooled != 1 {
		t.Errorf("pool has %d replicas, %d pods, %d members; want a's 2, 2, 1", p.Input.Scale.Replicas, len(p.Input.Pods), p.Pooled)
	}
	if msg := p.Members[1].Message; !strings.Contains(msg, "1m1s") || !strings.Contains(msg, "not counted") {
		t.Errorf("stale member's message %q does not say its age and what it means", msg)
	}
}

func objectMetric(tt engine.TargetType, milli int64) engine.MetricSpec {
	return engine.MetricSpec{Type: engine.ObjectSource, Metric: engine.MetricIdentifier{Name: "rps"},
		DescribedObject: engine.ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"},
		Target:          engine.Target{Type: tt, Milli: milli}}
}

func externalMetric(milli int64) engine.MetricSpec {
	return engine.MetricSpec{Type: engine.ExternalSource, Metric: engine.MetricIdentifier{Name: "queue"}, Target: engine.Target{Type: engine.AverageValueTarget, Milli: milli}}
}

func vals(at time.Time, milli ...int64) engine.Observation {
	o := engine.Observation{Values: []engine.MetricValue{}}
	for _, v := range milli {
		o.Values = append(o.Values, engine.MetricValue{Milli: v, Timestamp: at})
	}
	return o
}

// TestPoolCombine: how Object and External metrics combine across members.
func TestPoolCombine(t *testing.T) {
	old, newer := t0.Add(-time.Minute), t0.Add(-10*time.Second)
	tests := []struct {
		name    string
		metric  engine.MetricSpec
		combine fleet.Combine
		a, b    engine.Observation
		want    engine.Observation
	}{
		{"Object Value summed", objectMetric(engine.ValueTarget, 1), fleet.CombineSum, vals(old, 300), vals(newer, 500),
			vals(newer, 800)},
		{"Object AverageValue summed (the engine divides by the pooled replicas)", objectMetric(engine.AverageValueTarget, 1), "", vals(old, 300), vals(newer, 500),
			vals(newer, 800)},
		{"Object summed saturates", objectMetric(engine.ValueTarget, 1), fleet.CombineSum, vals(old, 1<<62), vals(newer, 1<<62),
			vals(newer, 1<<63-1)},
		{"Object Shared: the freshest", objectMetric(engine.ValueTarget, 1), fleet.CombineShared, vals(newer, 300), vals(old, 500),
			vals(newer, 300)},
		{"Object: one member without a value fails the sum", objectMetric(engine.ValueTarget, 1), fleet.CombineSum, vals(old, 300), vals(newer),
			engine.Observation{Err: "member b: no value returned, so the fleet's total is unknown"}},
		{"Object: no member with a value", objectMetric(engine.ValueTarget, 1), fleet.CombineSum, vals(old), vals(newer),
			engine.Observation{}},
		{"Object: a member's error fails the sum", objectMetric(engine.ValueTarget, 1), fleet.CombineSum, vals(old, 300), engine.Observation{Err: "503"},
			engine.Observation{Err: "member b: 503"}},
		{"Object Shared: an error where another member answered", objectMetric(engine.ValueTarget, 1), fleet.CombineShared, engine.Observation{Err: "503"}, vals(old, 500),
			vals(old, 500)},
		{"External series concatenated (the engine sums them)", externalMetric(1), fleet.CombineSum, vals(old, 1, 2), vals(newer, 3),
			engine.Observation{Values: []engine.MetricValue{{Milli: 1, Timestamp: old}, {Milli: 2, Timestamp: old}, {Milli: 3, Timestamp: newer}}}},
		{"External Shared: the freshest member's series", externalMetric(1), fleet.CombineShared, vals(old, 1, 2), vals(newer, 3),
			vals(newer, 3)},
		{"External Shared: errors everywhere", externalMetric(1), fleet.CombineShared, engine.Observation{Err: "x"}, engine.Observation{Err: "y"},
			engine.Observation{Err: "member a: x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := members("a", "b")
			spec.Combine = []fleet.Combine{tt.combine}
			a, b := report("a", 1, nil), report("b", 1, nil)
			a.Observations[0], b.Observations[0] = tt.a, tt.b
			p, err := fleet.Pool(spec, base(tt.metric), []fleet.Report{a, b}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, p.Input.Observations[0]); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestObjectAverageOverFleet: an Object AverageValue metric over a fleet is
// the members' total over the fleet's replicas: 800 over 4 replicas with a
// target of 100 each asks for 8.
func TestObjectAverageOverFleet(t *testing.T) {
	a := report("a", 1, []engine.Pod{cpuPod("p", 100)})
	b := report("b", 1, []engine.Pod{cpuPod("p", 100), cpuPod("q", 100), cpuPod("r", 100)})
	a.Observations[0], b.Observations[0] = vals(t0, 300_000), vals(t0, 500_000)
	var rec fleet.Record
	in := fleet.Input{Engine: base(objectMetric(engine.AverageValueTarget, 100_000)), Fleet: members("a", "b"), Reports: []fleet.Report{a, b}}
	if err := fleet.Decide(&rec, in, "1", t0); err != nil {
		t.Fatal(err)
	}
	d := rec.Target.Last.Decision
	if !d.Rescale || d.DesiredReplicas != 8 {
		t.Fatalf("decision %d (rescale %v), want 8", d.DesiredReplicas, d.Rescale)
	}
	if av := d.Status.CurrentMetrics[0].AverageValue; av == nil || av.Milli != 200_000 {
		t.Errorf("average %v, want 200 (800 over 4 replicas)", av)
	}
	if diff := cmp.Diff([]int32{4, 4}, []int32{rec.Split.Shares[0].Replicas, rec.Split.Shares[1].Replicas}); diff != "" {
		t.Errorf("split (-want +got):\n%s", diff)
	}
}

// TestPoolInvalid: reports that cannot be pooled name the field.
func TestPoolInvalid(t *testing.T) {
	spec := members("a", "b")
	tests := []struct {
		name    string
		reports []fleet.Report
		field   string
	}{
		{"unknown member", []fleet.Report{report("x", 1, nil)}, "reports[0].member"},
		{"second report", []fleet.Report{report("a", 1, nil), report("a", 1, nil)}, "reports[1].member"},
		{"observations", []fleet.Report{report("a", 2, nil)}, "reports[0].observations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fleet.Pool(spec, base(cpu60), tt.reports, t0)
			if !errors.Is(err, fleet.ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("err = %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
}

// TestSpecInvalid: a fleet spec that cannot be split names the field.
func TestSpecInvalid(t *testing.T) {
	tests := []struct {
		name  string
		spec  fleet.Spec
		field string
	}{
		{"no members", fleet.Spec{StaleAfter: time.Minute}, "members"},
		{"slash in name", fleet.Spec{StaleAfter: time.Minute, Members: []fleet.Member{m("a/b", 1)}}, "members[0].name"},
		{"duplicate", fleet.Spec{StaleAfter: time.Minute, Members: []fleet.Member{m("a", 1), m("a", 1)}}, "members[1].name"},
		{"weight", fleet.Spec{StaleAfter: time.Minute, Members: []fleet.Member{m("a", fleet.MaxWeight+1)}}, "members[0].weight"},
		{"max below min", fleet.Spec{StaleAfter: time.Minute, Members: []fleet.Member{m("a", 1, minR(3), maxR(2))}}, "members[0].max"},
		{"stale bound", fleet.Spec{Members: []fleet.Member{m("a", 1)}}, "staleAfter"},
		{"combine on a resource metric", fleet.Spec{StaleAfter: time.Minute, Members: []fleet.Member{m("a", 1)}, Combine: []fleet.Combine{fleet.CombineSum}}, "combine[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec fleet.Record
			err := fleet.Decide(&rec, fleet.Input{Engine: base(cpu60), Fleet: tt.spec}, "1", t0)
			if !errors.Is(err, fleet.ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("err = %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
}

// TestDecideNoHealthyMember: with every member left out there is nothing
// to decide over; the record is unchanged and the error names each
// member's reason.
func TestDecideNoHealthyMember(t *testing.T) {
	a := report("a", 1, []engine.Pod{cpuPod("p", 100)})
	a.At = t0.Add(-time.Hour)
	var rec fleet.Record
	err := fleet.Decide(&rec, fleet.Input{Engine: base(cpu60), Fleet: members("a", "b"), Reports: []fleet.Report{a}}, "1", t0)
	if !errors.Is(err, fleet.ErrNoHealthyMember) || !strings.Contains(err.Error(), "a: report 1h0m0s old") || !strings.Contains(err.Error(), "b: no report") {
		t.Errorf("err = %v, want ErrNoHealthyMember naming both members' reasons", err)
	}
	if rec.Target.Last != nil || rec.Split != nil {
		t.Errorf("record changed: %+v", rec)
	}
}

// TestDecideFailover steps a three-member fleet through a member's loss:
// the lost member's pods and replicas leave the pool, the hot survivors
// make the fleet scale up, and the total is split among them. Every
// member's pods run at 90% of a 60% target.
func TestDecideFailover(t *testing.T) {
	spec := members("a", "b", "c")
	hot := func(name string, at time.Time, n int) fleet.Report { return loaded(name, at, n, 90) }
	var rec fleet.Record
	decide := func(at time.Time, reports ...fleet.Report) {
		t.Helper()
		in := fleet.Input{Engine: base(cpu60), Fleet: spec, Reports: reports}
		in.Engine.Spec.MaxReplicas = 12
		if err := fleet.Decide(&rec, in, at.String(), at); err != nil {
			t.Fatal(err)
		}
		if d := rec.Target.Last.Decision; d.Rescale {
			err := target.Observe(&rec.Target, target.Observation{Kind: target.EventApplied, DecisionID: at.String(), From: rec.Target.Last.From, To: d.DesiredReplicas}, at)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// 2 pods each at 90% of 60%: 6 × 1.5 = 9, split 3/3/3.
	decide(t0, hot("a", t0, 2), hot("b", t0, 2), hot("c", t0, 2))
	if diff := cmp.Diff([]int32{3, 3, 3}, shares(rec.Split)); diff != "" {
		t.Fatalf("first split (-want +got):\n%s\n%s", diff, rec.Split.Message)
	}
	// c stops reporting; a and b run 3 pods each at 90%: 6 × 1.5 = 9 over
	// a and b, c's share gone.
	at := t0.Add(90 * time.Second)
	decide(at, hot("a", at, 3), hot("b", at, 3), hot("c", t0, 3))
	if got := rec.Target.Last.Decision.Explanation.CurrentReplicas; got != 6 {
		t.Errorf("pooled current %d, want 6 (c's replicas not counted)", got)
	}
	if diff := cmp.Diff([]int32{5, 4, 0}, shares(rec.Split)); diff != "" {
		t.Errorf("failover split (-want +got):\n%s\n%s", diff, rec.Split.Message)
	}
	if rec.Split.Shares[2].Reason != fleet.ShareExcluded || rec.Split.Shares[2].Exclusion != fleet.ExcludedStale {
		t.Errorf("c's share %+v, want excluded as stale", rec.Split.Shares[2])
	}
	if !strings.Contains(rec.Split.Message, "c excluded (Stale)") {
		t.Errorf("split message %q does not name c's exclusion", rec.Split.Message)
	}
}

// TestDecideLossKeepsTotal: a member lost within a scale-up policy's
// period of the fleet's last scale-up hands its share to the others at
// once. Its loss takes its replicas out of the pooled count but not out
// of the fleet's total, so the policies count from the total (9), not from
// the survivors' 6 of which the scale-up added 3; Record.From is the
// total, so the rescale records nothing.
func TestDecideLossKeepsTotal(t *testing.T) {
	spec := members("a", "b", "c")
	in := fleet.Input{Engine: base(cpu60), Fleet: spec}
	in.Engine.Spec.Behavior = &engine.Behavior{
		ScaleUp: engine.Rules{SelectPolicy: engine.SelectMax, Tolerance: 0.1, Policies: []engine.Policy{
			{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 60}, {Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 60}}},
		ScaleDown: engine.Rules{SelectPolicy: engine.SelectMax, Tolerance: 0.1, Policies: []engine.Policy{{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}}},
	}
	var rec fleet.Record
	// 2 pods each at 90% of 60%: 6 → 9, split 3/3/3, applied.
	in.Reports = []fleet.Report{loaded("a", t0, 2, 90), loaded("b", t0, 2, 90), loaded("c", t0, 2, 90)}
	if err := fleet.Decide(&rec, in, "1", t0); err != nil {
		t.Fatal(err)
	}
	if rec.From != 6 || rec.Target.Last.Decision.DesiredReplicas != 9 {
		t.Fatalf("first decision from %d to %d, want 6 → 9", rec.From, rec.Target.Last.Decision.DesiredReplicas)
	}
	if err := target.Observe(&rec.Target, target.Observation{Kind: target.EventApplied, DecisionID: "1", From: rec.From, To: 9}, t0); err != nil {
		t.Fatal(err)
	}
	history := rec.Target.History
	// 20 s later, within the scale-up period: c cannot scale; a and b run
	// their 3 pods each at 90%: 6 × 1.5 = 9 over a and b.
	at := t0.Add(20 * time.Second)
	c := loaded("c", at, 3, 90)
	c.CannotScale = "the Scale update is refused"
	in.Reports = []fleet.Report{loaded("a", at, 3, 90), loaded("b", at, 3, 90), c}
	if err := fleet.Decide(&rec, in, "2", at); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int32{5, 4, 0}, shares(rec.Split)); diff != "" {
		t.Errorf("split after c's loss (-want +got):\n%s\n%s\n%+v", diff, rec.Split.Message, rec.Target.Last.Decision.Explanation)
	}
	if got := rec.Target.Last.Decision.Explanation.CurrentReplicas; got != 6 {
		t.Errorf("pooled current %d, want 6 (c's replicas not pooled)", got)
	}
	if rec.From != 9 {
		t.Errorf("From = %d, want the total 9 (6 pooled + c's share of 3)", rec.From)
	}
	if diff := cmp.Diff(history, rec.Target.History, cmpopts.IgnoreFields(engine.History{}, "Recommendations")); diff != "" {
		t.Errorf("the loss's offset was kept in the history (-before +after):\n%s", diff)
	}
}

func shares(s *fleet.Split) []int32 {
	var out []int32
	for _, sh := range s.Shares {
		out = append(out, sh.Replicas)
	}
	return out
}

// TestDecideReturn steps a fleet through a member's loss and return with a
// scale-down policy of one pod a minute: the returning member takes its
// share back as fast as that policy lets the others' shares fall, while
// the total stays what the pooled decision says.
func TestDecideReturn(t *testing.T) {
	spec := members("a", "b", "c")
	at := loaded
	b := &engine.Behavior{
		ScaleUp: engine.Rules{SelectPolicy: engine.SelectMax, Tolerance: 0.1, Policies: []engine.Policy{
			{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 15}, {Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}}},
		ScaleDown: engine.Rules{SelectPolicy: engine.SelectMax, Tolerance: 0.1, Policies: []engine.Policy{{Type: engine.PodsPolicy, Value: 1, PeriodSeconds: 60}}},
	}
	var rec fleet.Record
	steps := []struct {
		at      time.Duration
		reports func(now time.Time) []fleet.Report
		want    []int32
	}{
		// 4 pods each at the 60% target: 12, split 4/4/4.
		{0, func(now time.Time) []fleet.Report {
			return []fleet.Report{at("a", now, 4, 60), at("b", now, 4, 60), at("c", now, 4, 60)}
		}, []int32{4, 4, 4}},
		// c is stale; a and b at 90%: 8 × 1.5 = 12 over a and b.
		{90 * time.Second, func(now time.Time) []fleet.Report {
			return []fleet.Report{at("a", now, 4, 90), at("b", now, 4, 90), at("c", t0, 4, 60)}
		}, []int32{6, 6, 0}},
		// c is back with no pods; a and b at the target with 6 each: the
		// total stays 12, a and b may fall by one this minute.
		{120 * time.Second, func(now time.Time) []fleet.Report {
			return []fleet.Report{at("a", now, 6, 60), at("b", now, 6, 60), at("c", now, 0, 0)}
		}, []int32{5, 5, 2}},
		{150 * time.Second, func(now time.Time) []fleet.Report {
			return []fleet.Report{at("a", now, 5, 60), at("b", now, 5, 60), at("c", now, 2, 60)}
		}, []int32{5, 5, 2}},
		{181 * time.Second, func(now time.Time) []fleet.Report {
			return []fleet.Report{at("a", now, 5, 60), at("b", now, 5, 60), at("c", now, 2, 60)}
		}, []int32{4, 4, 4}},
	}
	for _, st := range steps {
		now := t0.Add(st.at)
		in := fleet.Input{Engine: base(cpu60), Fleet: spec, Reports: st.reports(now)}
		in.Engine.Spec.Behavior = b
		if err := fleet.Decide(&rec, in, now.String(), now); err != nil {
			t.Fatal(err)
		}
		if d := rec.Target.Last.Decision; d.Rescale {
			o := target.Observation{Kind: target.EventApplied, DecisionID: now.String(), From: rec.Target.Last.From, To: d.DesiredReplicas}
			if err := target.Observe(&rec.Target, o, now); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(st.want, shares(rec.Split)); diff != "" {
			t.Errorf("at +%v (-want +got):\n%s\n%s", st.at, diff, rec.Split.Message)
		}
	}
	if rec.Members[2].Returning {
		t.Errorf("c still returning at its full share: %+v", rec.Members[2])
	}
}

// loaded is member's report received at `at`: n pods requesting 100m cpu,
// each using use millicores, for a fleet with one metric.
func loaded(member string, at time.Time, n int, use int64) fleet.Report {
	var pods []engine.Pod
	var u []engine.PodUsage
	for i := range n {
		p := string(rune('p' + i))
		pods, u = append(pods, cpuPod(p, 100)), append(u, cpuUsage(p, use))
	}
	r := report(member, 1, pods, u...)
	r.At = at
	return r
}
