package server_test

import (
	"slices"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/conformance"
	"github.com/setpointhq/setpoint/internal/scenario"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store/boltstore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const corpus = "../testdata/conformance/scenarios"

// TestSimulateReplaysConformance replays every scenario of the corpus
// through Simulate, one call per scenario, and requires exactly the
// controller's outcome at every step; nothing may be written.
func TestSimulateReplaysConformance(t *testing.T) {
	ts := start(t, setup{opts: server.Options{ExpireAfter: -1}}) // no expiry pass writes either
	c := ts.client(t)
	loaded, bad, err := scenario.Load(corpus, "../testdata/scenarios")
	if err != nil || len(bad) > 0 {
		t.Fatalf("load corpus: %v %v", err, bad)
	}
	if len(loaded) < 50 {
		t.Fatalf("only %d scenarios loaded", len(loaded))
	}
	for _, l := range loaded {
		mm, err := conformance.Simulate(t.Context(), c, &l.Scenario)
		if err != nil {
			t.Errorf("%s (%s): %v", l.Scenario.Name, l.Path, err)
		} else if mm != nil {
			t.Errorf("%s (%s): %s", l.Scenario.Name, l.Path, mm)
		}
	}
	if st := ts.store.(*boltstore.Store).Stats(); st.Writes != 0 {
		t.Errorf("store writes = %d after simulations, want 0", st.Writes)
	}
	list, err := c.ListTargets(t.Context(), &setpointv1.ListTargetsRequest{})
	if err != nil || len(list.GetTargets()) != 0 {
		t.Errorf("ListTargets = %v, %v; want no targets", list, err)
	}
}

// TestSimulateCorruptedExpectationIsCaught proves the replay can fail: a
// scenario whose expected count is altered must be reported.
func TestSimulateCorruptedExpectationIsCaught(t *testing.T) {
	ts := start(t, setup{})
	scs, lerr := scenario.LoadFile(corpus + "/behavior-steps.json")
	if lerr != nil {
		t.Fatal(lerr)
	}
	sc := scs[0]
	sc.Steps[1].Expect.DesiredReplicas += 1000
	mm, err := conformance.Simulate(t.Context(), ts.client(t), &sc)
	if err != nil || mm == nil || mm.Step != 1 || mm.Field != "desiredReplicas" {
		t.Fatalf("mismatch = %v, %v; want step 1 desiredReplicas", mm, err)
	}
}

// TestSimulateIgnoredSpecEditIsCaught proves Simulate follows a step's
// spec edit: the spec-edits scenarios replay exactly with their edits, and
// some fail when the steps' edits are dropped from the request.
func TestSimulateIgnoredSpecEditIsCaught(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	scs, lerr := scenario.LoadFile(corpus + "/spec-edits.json")
	if lerr != nil {
		t.Fatal(lerr)
	}
	caught := 0
	for _, sc := range scs {
		req := conformance.SimulateRequest(&sc)
		for _, st := range req.GetSteps() {
			st.Spec = nil
		}
		resp, err := c.Simulate(t.Context(), req)
		if status.Code(err) == codes.InvalidArgument {
			caught++ // the observations follow the edited metrics
			continue
		} else if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		for i, r := range resp.GetSteps() {
			got, err := conformance.Outcome(r.GetDecision())
			if err != nil {
				t.Fatal(err)
			}
			if scenario.Compare(&sc.Steps[i].Expect, got) != nil {
				caught++
				break
			}
		}
	}
	if caught == 0 {
		t.Fatalf("no spec-edits scenario differs when its edits are dropped")
	}
	t.Logf("%d of %d scenarios differ without their edits", caught, len(scs))
}

// legacySpec is a spec without behavior (the legacy stabilization, which
// can raise a count to a recent recommendation): cpu at 50% utilization,
// 1 to 100 replicas.
func legacySpec(name string) *setpointv1.HorizontalPodAutoscalerSpec {
	spec := request(name, 1, t0).GetSpec()
	spec.Behavior = nil
	return spec
}

// step is the Simulate step of request(name, n, at): n pods using 400m of
// 500m cpu, or usage instead of 400m.
func step(name string, n int, at time.Time, usage string) *setpointv1.SimulateStep {
	req := request(name, n, at)
	if usage != "" {
		for _, it := range req.GetResourceMetrics().GetItems() {
			it.GetContainers()[0].Usage["cpu"] = usage
		}
	}
	return &setpointv1.SimulateStep{Time: timestamppb.New(at), Scale: req.GetScale(), Pods: req.GetPods(),
		ResourceMetrics: req.GetResourceMetrics(), Observations: req.GetObservations()}
}

// TestSimulateSeededLeavesStoreUntouched seeds a simulation from a stored
// target: the stored recommendation of 7 is in the simulated history (the
// legacy stabilization raises a count of 3 toward it), and the stored
// record and file are unchanged.
func TestSimulateSeededLeavesStoreUntouched(t *testing.T) {
	ts := start(t, setup{opts: server.Options{ExpireAfter: -1}}) // no expiry pass writes either
	c := ts.client(t)
	ctx := t.Context()
	rec := request("web", 4, ts.clock.Now())
	rec.Spec = legacySpec("web")
	if d, err := c.Recommend(ctx, rec); err != nil || d.GetDecision().GetDesiredReplicas() != 7 {
		t.Fatalf("Recommend = %v, %v; want 7", d, err)
	}
	before, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("web")})
	if err != nil {
		t.Fatal(err)
	}
	writes := ts.store.(*boltstore.Store).Stats().Writes

	// 3 pods at 50% of their request: the metric proposes 3.
	sim := &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: []*setpointv1.SimulateStep{
		step("web", 3, t0.Add(time.Minute), "250m"),
		step("web", 3, t0.Add(2*time.Minute), "250m"),
	}}
	plain, err := c.Simulate(ctx, sim)
	if err != nil {
		t.Fatal(err)
	}
	if d := plain.GetSteps()[0].GetDecision(); d.GetDesiredReplicas() != 3 || d.GetRescale() || plain.GetSteps()[0].GetApplied() {
		t.Errorf("unseeded step 0 = %v, want 3 without a rescale", d)
	}
	sim.SeedFrom = key("web")
	seeded, err := c.Simulate(ctx, sim)
	if err != nil {
		t.Fatal(err)
	}
	// max(recommendations in 5m) = 7, at most max(2×3, 4) = 6.
	s0 := seeded.GetSteps()[0]
	if d := s0.GetDecision(); d.GetDesiredReplicas() != 6 || !d.GetRescale() || !s0.GetApplied() || d.GetDecisionId() != "" {
		t.Errorf("seeded step 0 = %v applied=%v, want an applied rescale to 6 without an id", d, s0.GetApplied())
	}
	if !hasCondition(s0.GetDecision().GetStatus(), "ScalingLimited", "True", "ScaleUpLimit") {
		t.Errorf("seeded step 0 conditions = %v, want ScaleUpLimit", s0.GetDecision().GetStatus().GetConditions())
	}
	// The second step gives its own scale (3 again), as a caller may.
	if got := seeded.GetSteps()[1].GetDecision().GetExplanation().GetCurrentReplicas(); got != 3 {
		t.Errorf("seeded step 1 current = %d, want the step's own scale 3", got)
	}

	after, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("web")})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(before, after) {
		t.Errorf("stored target changed by Simulate:\nbefore %v\nafter  %v", before, after)
	}
	if got := ts.store.(*boltstore.Store).Stats().Writes; got != writes {
		t.Errorf("store writes %d → %d during Simulate", writes, got)
	}

	// A step before the seed's last decision is refused.
	sim.Steps[0].Time = timestamppb.New(t0.Add(-time.Minute))
	sim.Steps[1].Time = timestamppb.New(t0.Add(-time.Second))
	_, err = c.Simulate(ctx, sim)
	wantViolation(t, err, "steps[0].time")
	// An unknown seed is NotFound.
	sim.SeedFrom = key("nope")
	if _, err := c.Simulate(ctx, sim); status.Code(err) != codes.NotFound {
		t.Errorf("unknown seed: %v, want NotFound", err)
	}
}

// wantViolation fails unless err is InvalidArgument with a BadRequest
// naming field.
func wantViolation(t *testing.T, err error, field string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("err = %v, want InvalidArgument naming %s", err, field)
	}
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	if !slices.Contains(fields, field) {
		t.Fatalf("violations %v (%v) do not name %s", fields, err, field)
	}
}

func TestSimulateLimits(t *testing.T) {
	ts := start(t, setup{opts: server.Options{MaxSimulateSteps: 3, MaxSimulatePods: 20}})
	c := ts.client(t)
	steps := func(n int) []*setpointv1.SimulateStep {
		var out []*setpointv1.SimulateStep
		for i := range n {
			out = append(out, step("web", 2, t0.Add(time.Duration(i)*15*time.Second), ""))
		}
		return out
	}
	if _, err := c.Simulate(t.Context(), &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: steps(3)}); err != nil {
		t.Fatalf("3 steps (the limit): %v", err)
	}
	tests := []struct {
		name  string
		req   *setpointv1.SimulateRequest
		field string
	}{
		{"too many steps", &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: steps(4)}, "steps"},
		{"no steps", &setpointv1.SimulateRequest{Spec: legacySpec("web")}, "steps"},
		{"no spec", &setpointv1.SimulateRequest{Steps: steps(1)}, "spec"},
		{"time not increasing", func() *setpointv1.SimulateRequest {
			s := steps(2)
			s[1].Time = s[0].Time
			return &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: s}
		}(), "steps[1].time"},
		{"time missing", func() *setpointv1.SimulateRequest {
			s := steps(2)
			s[1].Time = nil
			return &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: s}
		}(), "steps[1].time"},
		{"first scale missing", func() *setpointv1.SimulateRequest {
			s := steps(2)
			s[0].Scale = nil
			return &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: s}
		}(), "steps[0].scale"},
		{"bad step input", func() *setpointv1.SimulateRequest {
			s := steps(2)
			s[1].Pods[0].Phase = "Dancing"
			return &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: s}
		}(), "steps[1].pods[0].phase"},
		{"bad spec", func() *setpointv1.SimulateRequest {
			spec := legacySpec("web")
			spec.Metrics[0].Resource.Target.AverageUtilization = testkit.Ptr[int32](-1)
			return &setpointv1.SimulateRequest{Spec: spec, Steps: steps(1)}
		}(), "spec.metrics[0].resource.target.average_utilization"},
		{"bad seed", &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: steps(1), SeedFrom: &setpointv1.TargetKey{Cluster: "eu1"}}, "seed_from.namespace"},
		{"pod model too large", &setpointv1.SimulateRequest{Spec: legacySpec("web"), PodModel: &setpointv1.PodModel{InitialReplicas: 2},
			Steps: []*setpointv1.SimulateStep{{Time: timestamppb.New(t0), MetricValues: []string{"1"}}}}, "spec.max_replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Simulate(t.Context(), tt.req)
			wantViolation(t, err, tt.field)
		})
	}

	// An invalid edit is named once, where it is, not again at the steps
	// it stays in force for.
	t.Run("bad spec edit named once", func(t *testing.T) {
		s := steps(3)
		s[1].Spec = legacySpec("web")
		s[1].Spec.MaxReplicas = 0
		_, err := c.Simulate(t.Context(), &setpointv1.SimulateRequest{Spec: legacySpec("web"), Steps: s})
		var fields []string
		for _, d := range status.Convert(err).Details() {
			if br, ok := d.(*errdetails.BadRequest); ok {
				for _, v := range br.GetFieldViolations() {
					fields = append(fields, v.GetField())
				}
			}
		}
		if !slices.Equal(fields, []string{"steps[1].spec.max_replicas"}) {
			t.Errorf("violations %v (%v), want steps[1].spec.max_replicas alone", fields, err)
		}
	})
}

// TestSimulatePodModel runs metric values through the pod model: a
// scale-up is applied, the added pods are unready for ready_after, steps
// without a scale continue from the count reached, and an empty value
// fails its metric.
func TestSimulatePodModel(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	spec := legacySpec("web")
	spec.MaxReplicas = 10
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	resp, err := c.Simulate(t.Context(), &setpointv1.SimulateRequest{
		Spec: spec,
		PodModel: &setpointv1.PodModel{InitialReplicas: 2, Requests: map[string]string{"cpu": "500m"},
			ReadyAfter: durationpb.New(30 * time.Second)},
		Steps: []*setpointv1.SimulateStep{
			{Time: at(0), MetricValues: []string{"400m"}},  // 80% of 50%: ceil(2 × 1.6) = 4
			{Time: at(15), MetricValues: []string{"400m"}}, // 2 new pods not ready yet
			{Time: at(75), MetricValues: []string{"400m"}}, // all 4 ready: ceil(4 × 1.6) = 7
			{Time: at(90), MetricValues: []string{""}},     // the metric fails
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetSteps()
	if len(got) != 4 {
		t.Fatalf("%d results, want 4", len(got))
	}
	if d := got[0].GetDecision(); d.GetDesiredReplicas() != 4 || !got[0].GetApplied() {
		t.Errorf("step 0 = %v, want an applied rescale to 4", d)
	}
	m1 := got[1].GetDecision().GetExplanation().GetMetrics()
	if ex := got[1].GetDecision().GetExplanation(); ex.GetCurrentReplicas() != 4 || len(m1) != 1 || m1[0].GetReadyPods() != 2 || m1[0].GetUnreadyPods() != 2 {
		t.Errorf("step 1 explanation = %v, want 4 current replicas, 2 ready and 2 unready pods", ex)
	}
	if got[1].GetApplied() {
		t.Errorf("step 1 applied a rescale: %v", got[1].GetDecision())
	}
	if d := got[2].GetDecision(); d.GetDesiredReplicas() != 7 || !got[2].GetApplied() || d.GetExplanation().GetMetrics()[0].GetReadyPods() != 4 {
		t.Errorf("step 2 = %v, want 4 ready pods and an applied rescale to 7", d)
	}
	if d := got[3].GetDecision(); d.GetExplanation().GetCurrentReplicas() != 7 || d.GetExplanation().GetMetrics()[0].GetOutcome() != "Failed" ||
		!hasCondition(d.GetStatus(), "ScalingActive", "False", "FailedGetResourceMetric") {
		t.Errorf("step 3 = %v, want the cpu metric failed at 7 replicas", d)
	}
}
