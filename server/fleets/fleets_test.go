package fleets_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/internal/testpki"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the test clock's start.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// syncPeriod is the test fleets' sync period.
const syncPeriod = 15 * time.Second

// principals: the agents of clusters a, b and c, a platform granted a, b
// and c, a platform granted a and b only, an admin. Each one's token is
// its name.
var principals = `{"principals": [
  {"name": "agent-a", "role": "cluster:a", "token_sha256": ["` + sha("agent-a") + `"]},
  {"name": "agent-b", "role": "cluster:b", "token_sha256": ["` + sha("agent-b") + `"]},
  {"name": "agent-c", "role": "cluster:c", "token_sha256": ["` + sha("agent-c") + `"]},
  {"name": "agent-x", "role": "cluster:x", "token_sha256": ["` + sha("agent-x") + `"]},
  {"name": "platform-abc", "role": "platform", "clusters": ["a", "b", "c"], "token_sha256": ["` + sha("platform-abc") + `"]},
  {"name": "platform-ab", "role": "platform", "clusters": ["a", "b"], "token_sha256": ["` + sha("platform-ab") + `"]},
  {"name": "ops", "role": "admin", "token_sha256": ["` + sha("ops") + `"]}
]}`

// env is a running server with authentication, its clock, and a client
// per principal.
type env struct {
	t     testing.TB // the test the clients live as long as
	srv   *servertest.Server
	clock *testkit.Clock
	conns map[string]*grpc.ClientConn
}

// start runs a server over a real bbolt file on a real TCP listener, with
// authentication by bearer token and a clock the test steps.
func start(t testing.TB) *env {
	t.Helper()
	return startOn(t, nil, testkit.NewClock(t0), nil)
}

// startOn is start over backend (nil: a new bbolt file) with clock c,
// logging to log (nil: nowhere).
func startOn(t testing.TB, backend store.Store, c *testkit.Clock, log *slog.Logger) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "principals.json")
	testpki.WriteFile(t, path, []byte(principals))
	a, err := server.NewAuthenticator(path, server.ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, servertest.Config{Backend: backend, Options: server.Options{Auth: a, Now: c.Now, Logger: log}})
	return &env{t: t, srv: srv, clock: c, conns: map[string]*grpc.ClientConn{}}
}

// fleets returns a FleetService client calling as the principal whose
// token is who.
func (e *env) fleets(t testing.TB, who string) setpointv1.FleetServiceClient {
	return setpointv1.NewFleetServiceClient(e.conn(t, who))
}

// autoscaler returns an AutoscalerService client calling as who.
func (e *env) autoscaler(t *testing.T, who string) setpointv1.AutoscalerServiceClient {
	return setpointv1.NewAutoscalerServiceClient(e.conn(t, who))
}

func (e *env) conn(t testing.TB, who string) *grpc.ClientConn {
	t.Helper()
	if c, ok := e.conns[who]; ok {
		return c
	}
	c, err := grpc.NewClient(e.srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(who)))
	if err != nil {
		t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	e.conns[who] = c
	return c
}

// bearer is per-RPC bearer-token credentials that also work without TLS.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// sha is the hex SHA-256 of s: a token's hash in the principals file.
func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// fleetKey is the test fleet's key.
var fleetKey = &setpointv1.FleetKey{Namespace: "shop", Name: "web"}

// autoscaler is the test fleets' autoscaler: CPU at 50% of requests, 1 to
// 100 replicas, the default behavior.
func autoscaler() *setpointv1.HorizontalPodAutoscalerSpec {
	return &setpointv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MinReplicas:    testkit.Ptr[int32](1),
		MaxReplicas:    100,
		Metrics: []*setpointv1.MetricSpec{{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{
			Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: testkit.Ptr[int32](50)}}}},
		Behavior: &setpointv1.HorizontalPodAutoscalerBehavior{},
	}
}

// fleetSpec is a fleet of the test autoscaler over members of weight 1.
func fleetSpec(members ...string) *setpointv1.FleetSpec {
	s := &setpointv1.FleetSpec{Autoscaler: autoscaler(), SyncPeriod: durationpb.New(syncPeriod)}
	for _, m := range members {
		s.Members = append(s.Members, &setpointv1.FleetMember{Cluster: m, Weight: 1})
	}
	return s
}

// member is what one member reports: n running, ready pods requesting
// 500m CPU each and using usage (milli-CPU) each.
type member struct {
	name  string
	pods  int
	usage int
}

// report is m's report, read at now.
func (m member) report(now time.Time) *setpointv1.FleetReport {
	pods, metrics := m.pods_(now)
	return &setpointv1.FleetReport{
		Member:          m.name,
		Scale:           &setpointv1.Scale{Replicas: int32(m.pods), StatusReplicas: int32(m.pods), Selector: "app=web"},
		Pods:            pods,
		ResourceMetrics: &setpointv1.ResourceMetrics{Items: metrics},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
}

// pods_ are m's pods and their metrics, read at now.
func (m member) pods_(now time.Time) ([]*setpointv1.Pod, []*setpointv1.PodMetrics) {
	var pods []*setpointv1.Pod
	var metrics []*setpointv1.PodMetrics
	for i := range m.pods {
		name := fmt.Sprintf("%s-%d", m.name, i)
		started := timestamppb.New(now.Add(-time.Hour))
		pods = append(pods, &setpointv1.Pod{
			Name: name, Phase: "Running", StartTime: started,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: started},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m"}}},
		})
		metrics = append(metrics, &setpointv1.PodMetrics{
			Pod: name, Timestamp: timestamppb.New(now.Add(-15 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": fmt.Sprintf("%dm", m.usage)}}},
		})
	}
	return pods, metrics
}

// union is one Recommend request over every pod of ms, as one HPA would
// see them, for target name of cluster one.
func union(name string, now time.Time, ms ...member) *setpointv1.RecommendRequest {
	return unionOf(autoscaler(), name, now, ms...)
}

// unionOf is union with the autoscaler spec.
func unionOf(spec *setpointv1.HorizontalPodAutoscalerSpec, name string, now time.Time, ms ...member) *setpointv1.RecommendRequest {
	req := &setpointv1.RecommendRequest{
		Target:          &setpointv1.TargetKey{Cluster: "a", Namespace: "shop", Name: name},
		Spec:            spec,
		Scale:           &setpointv1.Scale{Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	for _, m := range ms {
		pods, metrics := m.pods_(now)
		req.Pods = append(req.Pods, pods...)
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, metrics...)
		req.Scale.Replicas += int32(m.pods)
		req.Scale.StatusReplicas += int32(m.pods)
	}
	return req
}

// put creates the fleet as the admin.
func (e *env) put(t testing.TB, spec *setpointv1.FleetSpec) {
	t.Helper()
	if _, err := e.fleets(t, "ops").PutFleet(t.Context(), &setpointv1.PutFleetRequest{Fleet: fleetKey, Spec: spec}); err != nil {
		t.Fatalf("PutFleet: %v", err)
	}
}

// report reports m as its own agent, now.
func (e *env) report(t testing.TB, m member) *setpointv1.ReportResponse {
	t.Helper()
	resp, err := e.fleets(t, "agent-"+m.name).Report(t.Context(), &setpointv1.ReportRequest{Fleet: fleetKey, Report: m.report(e.clock.Now())})
	if err != nil {
		t.Fatalf("Report of %s: %v", m.name, err)
	}
	return resp
}

// violations are the fields a status's BadRequest detail names.
func violations(err error) []string {
	var out []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out = append(out, v.GetField())
			}
		}
	}
	return out
}

func TestPutGetListDelete(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	c := e.fleets(t, "ops")
	spec := fleetSpec("a", "b", "c")
	put, err := c.PutFleet(ctx, &setpointv1.PutFleetRequest{Fleet: fleetKey, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(spec, put.GetFleet().GetSpec(), protocmp.Transform()); d != "" {
		t.Errorf("PutFleet's spec differs from the one put (-put +stored):\n%s", d)
	}
	other := &setpointv1.FleetKey{Namespace: "shop", Name: "api"}
	if _, err := c.PutFleet(ctx, &setpointv1.PutFleetRequest{Fleet: other, Spec: fleetSpec("a")}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetFleet(ctx, &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(put.GetFleet(), got.GetFleet(), protocmp.Transform()); d != "" {
		t.Errorf("GetFleet differs from PutFleet's answer (-put +get):\n%s", d)
	}
	if n := len(got.GetFleet().GetMembers()); n != 3 || got.GetFleet().GetMembers()[2].GetMember() != "c" {
		t.Errorf("members: %v, want a, b, c", got.GetFleet().GetMembers())
	}

	var names []string
	token := ""
	for {
		page, err := c.ListFleets(ctx, &setpointv1.ListFleetsRequest{PageSize: 1, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range page.GetFleets() {
			names = append(names, f.GetKey().GetName())
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if d := cmp.Diff([]string{"api", "web"}, names); d != "" {
		t.Errorf("ListFleets (-want +got):\n%s", d)
	}
	// A fleet's record is not a target: ListTargets does not show it.
	targets, err := e.autoscaler(t, "ops").ListTargets(ctx, &setpointv1.ListTargetsRequest{})
	if err != nil || len(targets.GetTargets()) != 0 {
		t.Errorf("ListTargets: %v, %v; want no targets", targets.GetTargets(), err)
	}

	if _, err := c.DeleteFleet(ctx, &setpointv1.DeleteFleetRequest{Fleet: fleetKey}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetFleet(ctx, &setpointv1.GetFleetRequest{Fleet: fleetKey}); status.Code(err) != codes.NotFound {
		t.Errorf("GetFleet after DeleteFleet: %v, want NotFound", err)
	}
	if _, err := c.DeleteFleet(ctx, &setpointv1.DeleteFleetRequest{Fleet: fleetKey}); status.Code(err) != codes.NotFound {
		t.Errorf("second DeleteFleet: %v, want NotFound", err)
	}
}

// TestPooledDecisionEqualsOneRecommend: three members report; the fleet
// decides what one Recommend over the union of their pods decides, given
// the same inputs in the same order (its first decision is over the first
// report alone, as the fleet's is).
func TestPooledDecisionEqualsOneRecommend(t *testing.T) {
	for _, tt := range []struct {
		name    string
		members []member
	}{
		{"hot", []member{{"a", 2, 450}, {"b", 3, 300}, {"c", 1, 100}}},
		{"cold", []member{{"a", 4, 50}, {"b", 4, 60}, {"c", 2, 40}}},
		{"two members", []member{{"a", 3, 400}, {"b", 1, 50}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t)
			var names []string
			for _, m := range tt.members {
				names = append(names, m.name)
			}
			e.put(t, fleetSpec(names...))
			one := e.autoscaler(t, "ops")
			first := e.report(t, tt.members[0])
			if !first.GetDecided() {
				t.Fatal("the first report did not decide")
			}
			want, err := one.Recommend(t.Context(), union("one", e.clock.Now(), tt.members[0]))
			if err != nil {
				t.Fatal(err)
			}
			sameDecision(t, "first", want.GetDecision(), first.GetDecision())
			applied(t, one, "one", want.GetDecision(), tt.members[0].pods)

			e.clock.Step(time.Second)
			for _, m := range tt.members[1:] {
				if r := e.report(t, m); r.GetDecided() {
					t.Fatalf("%s's report decided within the sync period", m.name)
				}
			}
			e.clock.Step(syncPeriod)
			got := e.report(t, tt.members[0])
			if !got.GetDecided() {
				t.Fatal("a report a sync period after the last decision did not decide")
			}
			want, err = one.Recommend(t.Context(), union("one", e.clock.Now(), tt.members...))
			if err != nil {
				t.Fatal(err)
			}
			sameDecision(t, "pooled", want.GetDecision(), got.GetDecision())
			t.Logf("pooled: %d → %d; split %s", want.GetDecision().GetStatus().GetCurrentReplicas(), got.GetDecision().GetDesiredReplicas(), got.GetSplit().GetMessage())
			var placed int32
			for _, sh := range got.GetSplit().GetShares() {
				placed += sh.GetReplicas()
			}
			if placed != got.GetTotal() || got.GetTotal() != want.GetDecision().GetDesiredReplicas() {
				t.Errorf("split places %d of total %d; the decision's replicas are %d", placed, got.GetTotal(), want.GetDecision().GetDesiredReplicas())
			}
			if got.GetShare().GetMember() != "a" || got.GetShare().GetReplicas() != got.GetSplit().GetShares()[0].GetReplicas() {
				t.Errorf("a's share %v is not its share of the split %v", got.GetShare(), got.GetSplit())
			}
		})
	}
}

// TestPooledDecisionsOverTime: rounds of random loads over 2 or 3
// members; in each round the members report and the fleet decides once.
// Every fleet decision equals the decision of one target given the union
// of the same pods round after round, its rescales recorded as applied as
// the fleet records its own: the history (stabilization windows, policy
// periods) carries the same way. A member's report read before the member
// was answered with the last split counts that split's share as its
// replicas, and so does the one target's scale.
func TestPooledDecisionsOverTime(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 30))
			names := []string{"a", "b", "c"}[:2+rng.IntN(2)]
			e := start(t)
			spec := fleetSpec(names...)
			// Policies over a minute and a scale-down window: the scale
			// events and recommendations of earlier rounds count.
			spec.Autoscaler.Behavior = &setpointv1.HorizontalPodAutoscalerBehavior{
				ScaleUp: &setpointv1.ScalingRules{Policies: []*setpointv1.ScalingPolicy{{Type: "Pods", Value: 3, PeriodSeconds: 60}}},
				ScaleDown: &setpointv1.ScalingRules{StabilizationWindowSeconds: testkit.Ptr[int32](45),
					Policies: []*setpointv1.ScalingPolicy{{Type: "Pods", Value: 2, PeriodSeconds: 60}}},
			}
			e.put(t, spec)
			one := e.autoscaler(t, "ops")
			var last []member               // the reports of the round before
			var prevShares map[string]int32 // the split of the round before
			for round := range 8 {
				ms := make([]member, len(names))
				for i, n := range names {
					ms[i] = member{n, 1 + rng.IntN(6), 20 + rng.IntN(500)}
				}
				// The first member decides; the others' reports, a second
				// later, wait for the next round's decision.
				got := e.report(t, ms[0])
				if !got.GetDecided() {
					t.Fatalf("round %d: no decision", round)
				}
				pooled := ms
				if round == 0 {
					pooled = ms[:1]
				} else {
					pooled = append([]member{ms[0]}, last[1:]...)
				}
				// The others read their reports before they were answered
				// with the last split, which their agents then apply: the
				// fleet counts each at its share in that split (from round
				// 2 on; in round 0 only a had reported, so the others had
				// no share), as one HPA's Scale shows the count it wrote.
				union := unionOf(spec.Autoscaler, "one", e.clock.Now(), pooled...)
				current := pooled[0].pods
				for _, m := range pooled[1:] {
					if sh, ok := prevShares[m.name]; ok && round >= 2 {
						current += int(sh)
					} else {
						current += m.pods
					}
				}
				union.Scale.Replicas = int32(current)
				want, err := one.Recommend(t.Context(), union)
				if err != nil {
					t.Fatal(err)
				}
				sameDecision(t, fmt.Sprintf("round %d", round), want.GetDecision(), got.GetDecision())
				prevShares = shares(got.GetSplit())
				applied(t, one, "one", want.GetDecision(), current)
				e.clock.Step(time.Second)
				for _, m := range ms[1:] {
					e.report(t, m)
				}
				last = ms
				e.clock.Step(syncPeriod - time.Second + time.Duration(rng.IntN(30))*time.Second)
			}
		})
	}
}

// applied records on target name of cluster a that a rescale decision d
// was applied from replicas, as the fleet records its own rescales.
func applied(t *testing.T, c setpointv1.AutoscalerServiceClient, name string, d *setpointv1.Decision, from int) {
	t.Helper()
	if !d.GetRescale() {
		return
	}
	_, err := c.Observe(t.Context(), &setpointv1.ObserveRequest{
		Target: &setpointv1.TargetKey{Cluster: "a", Namespace: "shop", Name: name}, DecisionId: d.GetDecisionId(),
		Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: int32(from), To: d.GetDesiredReplicas()}},
	})
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
}

// sameDecision fails when got, a fleet's decision, differs from want, one
// target's, in what it decided (the words name pods differently).
func sameDecision(t *testing.T, what string, want, got *setpointv1.Decision) {
	t.Helper()
	type outcome struct {
		Desired    int32
		Rescale    bool
		Current    int32
		Metrics    []*setpointv1.MetricStatus
		Conditions []string
	}
	of := func(d *setpointv1.Decision) outcome {
		o := outcome{Desired: d.GetDesiredReplicas(), Rescale: d.GetRescale(), Current: d.GetStatus().GetCurrentReplicas(), Metrics: d.GetStatus().GetCurrentMetrics()}
		for _, c := range d.GetStatus().GetConditions() {
			o.Conditions = append(o.Conditions, c.GetType()+"="+c.GetStatus()+"/"+c.GetReason())
		}
		return o
	}
	if d := cmp.Diff(of(want), of(got), protocmp.Transform()); d != "" {
		t.Errorf("%s decision: the fleet's differs from one Recommend over the union (-one +fleet):\n%s", what, d)
	}
}

// TestAuthorization: who may call what, on a fleet of a, b and c; a
// refusal is PermissionDenied whether or not the fleet exists.
func TestAuthorization(t *testing.T) {
	e := start(t)
	e.put(t, fleetSpec("a", "b", "c"))
	missing := &setpointv1.FleetKey{Namespace: "shop", Name: "missing"}
	ctx := t.Context()
	put := func(key *setpointv1.FleetKey, members ...string) func(setpointv1.FleetServiceClient) error {
		return func(c setpointv1.FleetServiceClient) error {
			_, err := c.PutFleet(ctx, &setpointv1.PutFleetRequest{Fleet: key, Spec: fleetSpec(members...)})
			return err
		}
	}
	get := func(key *setpointv1.FleetKey) func(setpointv1.FleetServiceClient) error {
		return func(c setpointv1.FleetServiceClient) error {
			_, err := c.GetFleet(ctx, &setpointv1.GetFleetRequest{Fleet: key})
			return err
		}
	}
	report := func(key *setpointv1.FleetKey, m string) func(setpointv1.FleetServiceClient) error {
		return func(c setpointv1.FleetServiceClient) error {
			_, err := c.Report(ctx, &setpointv1.ReportRequest{Fleet: key, Report: member{m, 1, 100}.report(e.clock.Now())})
			return err
		}
	}
	del := func(key *setpointv1.FleetKey) func(setpointv1.FleetServiceClient) error {
		return func(c setpointv1.FleetServiceClient) error {
			_, err := c.DeleteFleet(ctx, &setpointv1.DeleteFleetRequest{Fleet: key})
			return err
		}
	}
	seeded := func(key *setpointv1.FleetKey) func(setpointv1.FleetServiceClient) error {
		return func(c setpointv1.FleetServiceClient) error {
			_, err := c.SimulateFleet(ctx, &setpointv1.SimulateFleetRequest{Spec: fleetSpec("a"), SeedFrom: key,
				Steps: []*setpointv1.SimulateFleetStep{{Time: timestamppb.New(e.clock.Now()), Reports: []*setpointv1.FleetReport{member{"a", 1, 100}.report(e.clock.Now())}}}})
			return err
		}
	}
	for _, tt := range []struct {
		name string
		who  string
		call func(setpointv1.FleetServiceClient) error
		want codes.Code
	}{
		{"an agent reports for its own member", "agent-a", report(fleetKey, "a"), codes.OK},
		{"an agent cannot report as another member", "agent-a", report(fleetKey, "b"), codes.PermissionDenied},
		{"an agent of no member cannot report", "agent-x", report(fleetKey, "x"), codes.PermissionDenied},
		{"an agent cannot report to a missing fleet", "agent-a", report(missing, "a"), codes.PermissionDenied},
		{"a platform cannot report", "platform-abc", report(fleetKey, "a"), codes.PermissionDenied},
		{"an admin reports for any member", "ops", report(fleetKey, "c"), codes.OK},
		{"an admin's report of a non-member names the field", "ops", report(fleetKey, "x"), codes.InvalidArgument},
		{"an agent reads its fleet", "agent-b", get(fleetKey), codes.OK},
		{"an agent cannot read another fleet", "agent-x", get(fleetKey), codes.PermissionDenied},
		{"an agent cannot tell a missing fleet", "agent-x", get(missing), codes.PermissionDenied},
		{"a platform granted every member reads", "platform-abc", get(fleetKey), codes.OK},
		{"a platform granted some members cannot read", "platform-ab", get(fleetKey), codes.PermissionDenied},
		{"a platform cannot tell a missing fleet", "platform-abc", get(missing), codes.PermissionDenied},
		{"an admin is told a fleet is missing", "ops", get(missing), codes.NotFound},
		{"an agent cannot put a fleet", "agent-a", put(fleetKey, "a"), codes.PermissionDenied},
		{"an agent cannot create a fleet", "agent-a", put(missing, "a"), codes.PermissionDenied},
		{"a platform granted only some members cannot put", "platform-ab", put(missing, "a", "b", "c"), codes.PermissionDenied},
		{"a platform cannot take over a fleet of members it may not read", "platform-ab", put(fleetKey, "a", "b"), codes.PermissionDenied},
		{"a platform granted all members puts", "platform-abc", put(fleetKey, "a", "b", "c"), codes.OK},
		{"a platform granted all members creates", "platform-ab", put(&setpointv1.FleetKey{Namespace: "shop", Name: "ab"}, "a", "b"), codes.OK},
		{"an agent cannot seed a simulation from another fleet", "agent-x", seeded(fleetKey), codes.PermissionDenied},
		{"an agent seeds a simulation from its fleet", "agent-a", seeded(fleetKey), codes.OK},
		{"an agent cannot delete its fleet", "agent-a", del(fleetKey), codes.PermissionDenied},
		{"a platform granted some members cannot delete", "platform-ab", del(fleetKey), codes.PermissionDenied},
		{"a platform cannot tell a missing fleet on delete", "platform-abc", del(missing), codes.PermissionDenied},
		{"a platform granted all members deletes", "platform-abc", del(fleetKey), codes.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(e.fleets(t, tt.who)); status.Code(err) != tt.want {
				t.Errorf("%s: %v, want %v", tt.who, err, tt.want)
			}
		})
	}
}

// TestListFleetsFilters: a caller lists only the fleets it may read.
func TestListFleetsFilters(t *testing.T) {
	e := start(t)
	for name, members := range map[string][]string{"ab": {"a", "b"}, "bc": {"b", "c"}, "c": {"c"}} {
		if _, err := e.fleets(t, "ops").PutFleet(t.Context(), &setpointv1.PutFleetRequest{
			Fleet: &setpointv1.FleetKey{Namespace: "shop", Name: name}, Spec: fleetSpec(members...)}); err != nil {
			t.Fatal(err)
		}
	}
	for who, want := range map[string][]string{
		"ops": {"ab", "bc", "c"}, "platform-ab": {"ab"}, "platform-abc": {"ab", "bc", "c"},
		"agent-a": {"ab"}, "agent-b": {"ab", "bc"}, "agent-c": {"bc", "c"}, "agent-x": nil,
	} {
		page, err := e.fleets(t, who).ListFleets(t.Context(), &setpointv1.ListFleetsRequest{Namespace: "shop"})
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		var got []string
		for _, f := range page.GetFleets() {
			got = append(got, f.GetKey().GetName())
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s lists (-want +got):\n%s", who, d)
		}
	}
}

// TestBadSpecsNameTheField: an invalid fleet spec is InvalidArgument
// naming the field in the request.
func TestBadSpecsNameTheField(t *testing.T) {
	e := start(t)
	for _, tt := range []struct {
		name string
		edit func(*setpointv1.FleetSpec)
		want string
	}{
		{"weight over the bound", func(s *setpointv1.FleetSpec) { s.Members[1].Weight = 1001 }, "spec.members[1].weight"},
		{"duplicate member", func(s *setpointv1.FleetSpec) { s.Members[1].Cluster = "a" }, "spec.members[1].cluster"},
		{"member with a slash", func(s *setpointv1.FleetSpec) { s.Members[0].Cluster = "a/b" }, "spec.members[0].cluster"},
		{"max below min", func(s *setpointv1.FleetSpec) {
			s.Members[0].MinReplicas, s.Members[0].MaxReplicas = testkit.Ptr[int32](3), testkit.Ptr[int32](2)
		}, "spec.members[0].max_replicas"},
		{"no members", func(s *setpointv1.FleetSpec) { s.Members = nil }, "spec.members"},
		{"combine of a resource metric", func(s *setpointv1.FleetSpec) { s.Combine = []string{"Shared"} }, "spec.combine[0]"},
		{"negative stale_after", func(s *setpointv1.FleetSpec) { s.StaleAfter = durationpb.New(-time.Second) }, "spec.stale_after"},
		{"sync period too short", func(s *setpointv1.FleetSpec) { s.SyncPeriod = durationpb.New(time.Millisecond) }, "spec.sync_period"},
		{"autoscaler max replicas", func(s *setpointv1.FleetSpec) { s.Autoscaler.MaxReplicas = 0 }, "spec.autoscaler.max_replicas"},
		{"autoscaler metric", func(s *setpointv1.FleetSpec) { s.Autoscaler.Metrics[0].Type = "Nonsense" }, "spec.autoscaler.metrics[0].type"},
		{"settings", func(s *setpointv1.FleetSpec) {
			s.Settings = &setpointv1.ControllerSettings{Tolerance: testkit.Ptr(-1.0)}
		}, "spec.settings.tolerance"},
		{"no autoscaler", func(s *setpointv1.FleetSpec) { s.Autoscaler = nil }, "spec.autoscaler"},
		{"forecast", func(s *setpointv1.FleetSpec) { s.Autoscaler.Forecast = &setpointv1.Forecast{} }, "spec.autoscaler.forecast"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := fleetSpec("a", "b")
			tt.edit(spec)
			_, err := e.fleets(t, "ops").PutFleet(t.Context(), &setpointv1.PutFleetRequest{Fleet: fleetKey, Spec: spec})
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("PutFleet: %v, want InvalidArgument", err)
			}
			if got := violations(err); !slices.Contains(got, tt.want) {
				t.Errorf("violations %v do not name %s (%v)", got, tt.want, err)
			}
		})
	}
	if _, err := e.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey}); status.Code(err) != codes.NotFound {
		t.Errorf("a refused spec was stored: GetFleet %v", err)
	}
}

// TestReservedCluster: the autoscaler methods refuse the clusters that
// hold the service's own records, naming the field.
func TestReservedCluster(t *testing.T) {
	e := start(t)
	e.put(t, fleetSpec("a"))
	c := e.autoscaler(t, "ops")
	key := &setpointv1.TargetKey{Cluster: "@fleet", Namespace: "shop", Name: "web"}
	req := union("web", e.clock.Now(), member{"a", 1, 100})
	req.Target = key
	_, err := c.Recommend(t.Context(), req)
	check := func(what string, err error, field string) {
		t.Helper()
		if status.Code(err) != codes.InvalidArgument || !slices.Contains(violations(err), field) {
			t.Errorf("%s: %v, want InvalidArgument naming %s", what, err, field)
		}
	}
	check("Recommend", err, "target.cluster")
	_, err = c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key})
	check("GetTarget", err, "target.cluster")
	_, err = c.DeleteTarget(t.Context(), &setpointv1.DeleteTargetRequest{Target: key})
	check("DeleteTarget", err, "target.cluster")
	_, err = c.Observe(t.Context(), &setpointv1.ObserveRequest{Target: key, Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 1, To: 2}}})
	check("Observe", err, "target.cluster")
	_, err = c.ListTargets(t.Context(), &setpointv1.ListTargetsRequest{Cluster: "@fleet"})
	check("ListTargets", err, "cluster")
	if _, err := e.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey}); err != nil {
		t.Errorf("the fleet is gone: %v", err)
	}
}

// TestDecidesOncePerSyncPeriod: reports within a sync period less a
// tenth (early) of the last decision are stored but do not decide; the
// first one after that does, over every member's latest report.
func TestDecidesOncePerSyncPeriod(t *testing.T) {
	e := start(t)
	e.put(t, fleetSpec("a", "b"))
	const early = syncPeriod / 10
	var bShare int32 // b's share in the split b was last answered with
	for _, step := range []struct {
		after   time.Duration
		m       member
		decided bool
	}{
		{0, member{"a", 2, 400}, true},
		{time.Second, member{"b", 2, 400}, false},
		{5 * time.Second, member{"a", 2, 400}, false},
		{syncPeriod - early - 6*time.Second - time.Nanosecond, member{"b", 2, 400}, false},
		{time.Nanosecond, member{"b", 2, 400}, true},
		{time.Second, member{"a", 4, 400}, false},
		{syncPeriod, member{"a", 4, 400}, true},
	} {
		e.clock.Step(step.after)
		r := e.report(t, step.m)
		if step.m.name == "b" {
			bShare = shares(r.GetSplit())["b"]
		}
		if r.GetDecided() != step.decided {
			t.Errorf("%v after t0: %s's report decided %v, want %v", e.clock.Now().Sub(t0), step.m.name, r.GetDecided(), step.decided)
		}
	}
	f, err := e.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]time.Duration{0, syncPeriod - early, syncPeriod - early + time.Second + syncPeriod}, decisionTimes(f.GetFleet())); d != "" {
		t.Errorf("the fleet's decisions, after t0 (-want +got):\n%s", d)
	}
	// b read its last report (2 pods) before it was answered with the
	// split its agent then applies: b counts at that share.
	if got, want := f.GetFleet().GetLastDecision().GetStatus().GetCurrentReplicas(), 4+bShare; got != want || bShare == 2 {
		t.Errorf("the last decision's current replicas are %d, want %d (a's 4 and b's share %d, not its reported 2)", got, want, bShare)
	}
}

// TestStaleMemberLosesItsShare: a member whose latest report is older
// than stale_after is left out, and the others take its share.
func TestStaleMemberLosesItsShare(t *testing.T) {
	e := start(t)
	spec := fleetSpec("a", "b", "c")
	spec.StaleAfter = durationpb.New(45 * time.Second)
	e.put(t, spec)
	ms := []member{{"a", 2, 250}, {"b", 2, 250}, {"c", 2, 250}} // at the target: 6 stay 6
	for _, m := range ms {
		e.report(t, m)
	}
	e.clock.Step(syncPeriod)
	r := e.report(t, ms[0])
	if got := shares(r.GetSplit()); !cmp.Equal(got, map[string]int32{"a": 2, "b": 2, "c": 2}) {
		t.Fatalf("shares before c goes silent: %v, want 2 each", got)
	}
	// c stops reporting; a and b keep going, one sync period apart.
	var last *setpointv1.ReportResponse
	for range 4 {
		e.clock.Step(syncPeriod)
		e.report(t, ms[0])
		last = e.report(t, ms[1])
	}
	e.clock.Step(syncPeriod)
	last = e.report(t, ms[0])
	if !last.GetDecided() {
		t.Fatal("no decision")
	}
	sh := shares(last.GetSplit())
	if sh["c"] != 0 || sh["a"]+sh["b"] != last.GetTotal() || last.GetTotal() == 0 {
		t.Errorf("after c went stale: shares %v of total %d; want c 0 and a and b the total", sh, last.GetTotal())
	}
	if c := last.GetSplit().GetShares()[2]; c.GetReason() != "Excluded" || c.GetExclusion() != "Stale" {
		t.Errorf("c's share: %v, want Excluded (Stale)", c)
	}
	f, err := e.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	if c := f.GetFleet().GetMembers()[2]; c.GetPooled() || c.GetExclusion() != "Stale" || c.GetShare() != 0 {
		t.Errorf("GetFleet's c: %v, want not pooled, Stale, share 0", c)
	}
}

// decisionTimes are the times of the fleet's decisions after t0, from its
// history's recommendations: the engine seeds a new history with the
// current count just before the first decision, and each decision then
// adds its recommendation.
func decisionTimes(f *setpointv1.Fleet) []time.Duration {
	var at []time.Duration
	for _, r := range f.GetHistory().GetRecommendations() {
		if d := r.GetTime().AsTime().Sub(t0); d >= 0 {
			at = append(at, d)
		}
	}
	return at
}

// shares are a split's shares by member.
func shares(s *setpointv1.FleetSplit) map[string]int32 {
	out := map[string]int32{}
	for _, sh := range s.GetShares() {
		out[sh.GetMember()] = sh.GetReplicas()
	}
	return out
}

// TestSimulateFleet: a what-if over three members' reports decides as
// the stored fleet does for the same reports, and stores nothing.
func TestSimulateFleet(t *testing.T) {
	e := start(t)
	spec := fleetSpec("a", "b", "c")
	e.put(t, spec)
	ms := []member{{"a", 2, 450}, {"b", 3, 300}, {"c", 1, 100}}
	// The stored fleet: a's report decides, b's and c's a second later
	// are kept for the next decision, a sync period after the last. The
	// simulation: one step per decision, with the reports it decides over.
	var steps []*setpointv1.SimulateFleetStep
	var want []*setpointv1.ReportResponse
	for i := range 3 {
		now := e.clock.Now()
		step := &setpointv1.SimulateFleetStep{Time: timestamppb.New(now), Reports: []*setpointv1.FleetReport{ms[0].report(now)}}
		if i > 0 {
			// b and c read their reports before they were answered with
			// the last split; the stored fleet counts each at its share in
			// that split (once they have one), and so does the what-if.
			for _, m := range ms[1:] {
				rep := m.report(now)
				if i >= 2 {
					rep.Scale.Replicas = shares(want[i-1].GetSplit())[m.name]
				}
				step.Reports = append(step.Reports, rep)
			}
		}
		r := e.report(t, ms[0])
		if !r.GetDecided() {
			t.Fatalf("step %d: a's report did not decide", i)
		}
		want = append(want, r)
		steps = append(steps, step)
		e.clock.Step(time.Second)
		e.report(t, ms[1])
		e.report(t, ms[2])
		e.clock.Step(syncPeriod - time.Second)
	}
	before, err := e.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.fleets(t, "platform-abc").SimulateFleet(t.Context(), &setpointv1.SimulateFleetRequest{Spec: spec, Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetSteps()) != len(steps) {
		t.Fatalf("%d results for %d steps", len(resp.GetSteps()), len(steps))
	}
	for i, got := range resp.GetSteps() {
		if got.GetError() != "" {
			t.Fatalf("step %d: %s", i, got.GetError())
		}
		w := want[i].GetDecision()
		w.DecisionId = ""
		if d := cmp.Diff(w, got.GetDecision(), protocmp.Transform()); d != "" {
			t.Errorf("step %d: the simulated decision differs from the stored fleet's (-stored +simulated):\n%s", i, d)
		}
		if d := cmp.Diff(want[i].GetSplit(), got.GetSplit(), protocmp.Transform()); d != "" {
			t.Errorf("step %d: the simulated split differs (-stored +simulated):\n%s", i, d)
		}
	}
	after, err := e.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after, protocmp.Transform()); d != "" {
		t.Errorf("SimulateFleet changed the stored fleet:\n%s", d)
	}

	// Every member left out: the step says why, and has no decision.
	cannot := member{"a", 1, 100}.report(e.clock.Now())
	cannot.CannotScale = "the Deployment is gone"
	resp, err = e.fleets(t, "ops").SimulateFleet(t.Context(), &setpointv1.SimulateFleetRequest{Spec: fleetSpec("a"),
		Steps: []*setpointv1.SimulateFleetStep{{Time: timestamppb.New(e.clock.Now()), Reports: []*setpointv1.FleetReport{cannot}}}})
	if err != nil {
		t.Fatal(err)
	}
	if s := resp.GetSteps()[0]; s.GetDecision() != nil || !strings.Contains(s.GetError(), "CannotScale") && !strings.Contains(s.GetError(), "cannot scale") {
		t.Errorf("a step without a pooled member: decision %v, error %q", s.GetDecision(), s.GetError())
	}

	// Bad steps name the field.
	_, err = e.fleets(t, "ops").SimulateFleet(t.Context(), &setpointv1.SimulateFleetRequest{Spec: fleetSpec("a", "b"),
		Steps: []*setpointv1.SimulateFleetStep{
			{Time: timestamppb.New(e.clock.Now()), Reports: []*setpointv1.FleetReport{member{"a", 1, 100}.report(e.clock.Now())}},
			{Time: timestamppb.New(e.clock.Now().Add(time.Second)), Reports: []*setpointv1.FleetReport{member{"x", 1, 100}.report(e.clock.Now())}},
		}})
	if !slices.Contains(violations(err), "steps[1].reports[0].member") {
		t.Errorf("a report of a non-member: %v, want InvalidArgument naming steps[1].reports[0].member", err)
	}
}

// TestAudit: a fleet's rescale, its deletion and a refused report are in
// the audit log, naming the fleet.
func TestAudit(t *testing.T) {
	var buf lockedBuffer
	e := startOn(t, nil, testkit.NewClock(t0), slog.New(slog.NewJSONHandler(&buf, nil)))
	e.put(t, fleetSpec("a", "b"))
	e.report(t, member{"a", 2, 450})
	if _, err := e.fleets(t, "agent-a").Report(t.Context(), &setpointv1.ReportRequest{Fleet: fleetKey, Report: member{"b", 1, 100}.report(e.clock.Now())}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a's report as b: %v", err)
	}
	if _, err := e.fleets(t, "ops").DeleteFleet(t.Context(), &setpointv1.DeleteFleetRequest{Fleet: fleetKey}); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["msg"] == "audit" {
			got = append(got, map[string]any{"event": rec["event"], "principal": rec["principal"], "target": rec["target"], "outcome": rec["outcome"]})
		}
	}
	want := []map[string]any{
		{"event": "decision", "principal": "agent-a", "target": "@fleet/shop/web", "outcome": "rescale"},
		{"event": "denied", "principal": "agent-a", "target": "@fleet/shop/web", "outcome": "PermissionDenied"},
		{"event": "delete", "principal": "ops", "target": "@fleet/shop/web", "outcome": "deleted"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("audit log (-want +got):\n%s", d)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestBadReportsNameTheField: a report the fleet's spec cannot read is
// InvalidArgument naming the field under report, and is not stored.
func TestBadReportsNameTheField(t *testing.T) {
	e := start(t)
	e.put(t, fleetSpec("a", "b"))
	for _, tt := range []struct {
		name string
		edit func(*setpointv1.FleetReport)
		want string
	}{
		{"observations for another spec", func(r *setpointv1.FleetReport) { r.Observations = nil }, "report.observations"},
		{"no scale", func(r *setpointv1.FleetReport) { r.Scale = nil }, "report.scale"},
		{"negative replicas", func(r *setpointv1.FleetReport) { r.Scale.Replicas = -1 }, "report.scale.replicas"},
		{"bad quantity", func(r *setpointv1.FleetReport) { r.Pods[1].Containers[0].Requests["cpu"] = "lots" }, `report.pods[1].containers[0].requests["cpu"]`},
		{"no member", func(r *setpointv1.FleetReport) { r.Member = "" }, "report.member"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := member{"a", 2, 100}.report(e.clock.Now())
			tt.edit(rep)
			_, err := e.fleets(t, "ops").Report(t.Context(), &setpointv1.ReportRequest{Fleet: fleetKey, Report: rep})
			if status.Code(err) != codes.InvalidArgument || !slices.Contains(violations(err), tt.want) {
				t.Errorf("Report: %v, want InvalidArgument naming %s (got %v)", err, tt.want, violations(err))
			}
		})
	}
	f, err := e.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	if f.GetFleet().GetMembers()[0].GetLastReport() != nil || f.GetFleet().GetLastDecision() != nil {
		t.Errorf("a refused report was stored: %v", f.GetFleet().GetMembers()[0])
	}
}

// TestSpecChange: a new spec keeps the fleet's history; a cluster no
// longer listed is forgotten and its agent may no longer report or read.
// The answer to a report carries the spec with its defaults explicit.
func TestSpecChange(t *testing.T) {
	e := start(t)
	e.put(t, fleetSpec("a", "b", "c"))
	for _, m := range []member{{"a", 2, 400}, {"b", 2, 400}, {"c", 2, 400}} {
		e.report(t, m)
	}
	spec := fleetSpec("a", "b")
	spec.Members[0].Weight = 3
	e.put(t, spec)
	if _, err := e.fleets(t, "agent-c").Report(t.Context(), &setpointv1.ReportRequest{Fleet: fleetKey, Report: member{"c", 2, 400}.report(e.clock.Now())}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a removed member's report: %v, want PermissionDenied", err)
	}
	if _, err := e.fleets(t, "agent-c").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a removed member's read: %v, want PermissionDenied", err)
	}
	e.clock.Step(syncPeriod)
	r := e.report(t, member{"a", 2, 400})
	if !r.GetDecided() {
		t.Fatal("no decision")
	}
	if got := r.GetDecision().GetStatus().GetCurrentReplicas(); got != 4 {
		t.Errorf("pooled %d replicas, want a's and b's 4 (c is no member)", got)
	}
	if n := len(r.GetSplit().GetShares()); n != 2 {
		t.Errorf("%d shares, want 2", n)
	}
	if sh := shares(r.GetSplit()); sh["a"] <= sh["b"] {
		t.Errorf("shares %v: a's weight 3 should give it more than b", sh)
	}
	f, err := e.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]time.Duration{0, syncPeriod}, decisionTimes(f.GetFleet())); d != "" {
		t.Errorf("the history did not carry across the new spec (-want +got):\n%s", d)
	}
	s := r.GetSpec()
	if s.GetStaleAfter().AsDuration() != 3*syncPeriod || s.GetSyncPeriod().AsDuration() != syncPeriod ||
		s.GetSettings().GetTolerance() != 0.1 || len(s.GetAutoscaler().GetBehavior().GetScaleUp().GetPolicies()) == 0 || len(s.GetMembers()) != 2 {
		t.Errorf("the report's answer's spec has defaults missing: %v", s)
	}
}

// TestNoMemberPooled: a report when no member can be pooled is stored
// and answered without a new decision, not refused.
func TestNoMemberPooled(t *testing.T) {
	e := start(t)
	e.put(t, fleetSpec("a", "b"))
	rep := member{"a", 2, 100}.report(e.clock.Now())
	rep.CannotScale = "the scale update was refused"
	rep.Observations = nil // a member that cannot scale need not read the fleet's metrics
	r, err := e.fleets(t, "agent-a").Report(t.Context(), &setpointv1.ReportRequest{Fleet: fleetKey, Report: rep})
	if err != nil {
		t.Fatalf("Report: %v", err)
	}
	if r.GetDecided() || r.GetShare() != nil || r.GetDecision() != nil {
		t.Errorf("answer %v: want no decision and no share", r)
	}
	f, err := e.fleets(t, "agent-a").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	if a := f.GetFleet().GetMembers()[0]; a.GetCannotScale() != rep.CannotScale || a.GetLastReport() == nil || a.GetReplicas() != 2 || a.GetPods() != 2 {
		t.Errorf("a's state %v: want its report kept", a)
	}
	// b reports: the fleet decides over b alone.
	if r := e.report(t, member{"b", 2, 100}); !r.GetDecided() || shares(r.GetSplit())["a"] != 0 || r.GetSplit().GetShares()[0].GetExclusion() != "CannotScale" {
		t.Errorf("b's report: decided %v, split %v; want a decision without a (CannotScale)", r.GetDecided(), r.GetSplit())
	}
}

// TestSplitMovesKeepTheTotal: at a steady load a change of weights moves
// replicas between members while the total stays. The members report one
// after another, each running the share it was last answered with, so
// when the first one decides the others' reports still show their counts
// from before the last split: the fleet counts them at their shares (the
// counts their agents are writing), and the total neither grows nor
// shrinks without a rescale.
func TestSplitMovesKeepTheTotal(t *testing.T) {
	e := start(t)
	spec := fleetSpec("a", "b", "c")
	e.put(t, spec)
	running := map[string]int{"a": 4, "b": 4, "c": 4}
	period := func(i int) {
		t.Helper()
		for _, name := range []string{"a", "b", "c"} {
			// 250m of 500m: at the target. In period 0 a decides alone.
			r := e.report(t, member{name, running[name], 250})
			if d := r.GetDecision(); i > 0 && r.GetDecided() && (d.GetRescale() || r.GetTotal() != 12) {
				t.Errorf("period %d: %s's report decided %d → %d (rescale %v), split %v; want 12 kept", i, name,
					d.GetExplanation().GetCurrentReplicas(), d.GetDesiredReplicas(), d.GetRescale(), shares(r.GetSplit()))
			}
			if sh := r.GetShare(); sh != nil && sh.GetReason() != "Excluded" {
				running[name] = int(sh.GetReplicas())
			}
			e.clock.Step(time.Second)
		}
		e.clock.Step(syncPeriod - 3*time.Second)
	}
	for i := range 3 {
		period(i)
	}
	spec.Members[0].Weight = 2 // a: 6, b: 3, c: 3
	e.put(t, spec)
	for i := 3; i < 8; i++ {
		period(i)
	}
	if want := map[string]int{"a": 6, "b": 3, "c": 3}; !cmp.Equal(running, want) {
		t.Errorf("the members run %v, want %v", running, want)
	}
}

// TestLossAfterScaleUpFailsOverAtOnce: a member lost within a scale-up
// policy's period of the fleet's last scale-up hands its share to the
// others at the decision that leaves it out. Its exclusion does not change
// the fleet's total, only the split, so the policies count from the total:
// 6 → 12 (4/4/4), then c is lost and a and b run 6/6 at once. Counting
// from the smaller pool that is left (8, of which the scale-ups added 6)
// would hold 4/4 until the scale-ups left the period. The move is not a
// scale event of the fleet: its history keeps the scale-ups to 12.
func TestLossAfterScaleUpFailsOverAtOnce(t *testing.T) {
	e := start(t)
	spec := fleetSpec("a", "b", "c")
	spec.StaleAfter = durationpb.New(20 * time.Second)
	// The default scale-up policies (100% or 4 pods), over a period longer
	// than StaleAfter and a sync period, so the loss falls within it.
	spec.Autoscaler.Behavior.ScaleUp = &setpointv1.ScalingRules{Policies: []*setpointv1.ScalingPolicy{
		{Type: "Percent", Value: 100, PeriodSeconds: 120}, {Type: "Pods", Value: 4, PeriodSeconds: 120}}}
	e.put(t, spec)
	running := map[string]int{"a": 2, "b": 2, "c": 2}
	// period reports every member of demand (milli-CPU, spread over the
	// member's pods), one a second, and returns the answers that decided.
	period := func(demand map[string]int) (decided []*setpointv1.ReportResponse) {
		t.Helper()
		for _, name := range []string{"a", "b", "c"} {
			if _, ok := demand[name]; !ok {
				continue
			}
			r := e.report(t, member{name, running[name], demand[name] / running[name]})
			if sh := r.GetShare(); sh != nil && sh.GetReason() != "Excluded" {
				running[name] = int(sh.GetReplicas())
			}
			if r.GetDecided() {
				decided = append(decided, r)
			}
			e.clock.Step(time.Second)
		}
		e.clock.Step(syncPeriod - time.Duration(len(demand))*time.Second)
		return decided
	}
	for range 2 {
		period(map[string]int{"a": 500, "b": 500, "c": 500}) // at the target: 2/2/2
	}
	// The load doubles: 6 → 8 (a's new report with b's and c's older
	// ones), then → 12, 4/4/4.
	var last *setpointv1.ReportResponse
	for range 2 {
		for _, r := range period(map[string]int{"a": 1000, "b": 1000, "c": 1000}) {
			last = r
		}
	}
	if got := shares(last.GetSplit()); last.GetTotal() != 12 || !cmp.Equal(got, map[string]int32{"a": 4, "b": 4, "c": 4}) {
		t.Fatalf("the load doubled: split %v of %d, want 4/4/4 of 12", got, last.GetTotal())
	}
	// c is lost; its traffic goes to a and b: 3000m over their 8 pods.
	// The decision that leaves c out (its report 20 s old) moves its
	// share to a and b.
	var out *setpointv1.ReportResponse
	for i := 0; out == nil && i < 3; i++ {
		for _, r := range period(map[string]int{"a": 1500, "b": 1500}) {
			if c := r.GetSplit().GetShares()[2]; out == nil && c.GetReason() == "Excluded" {
				out = r
			}
		}
	}
	if out == nil {
		t.Fatal("c was never left out")
	}
	if got := shares(out.GetSplit()); out.GetTotal() != 12 || got["a"] != 6 || got["b"] != 6 {
		t.Errorf("the split that left c out: %v of %d (%s), want 6/6 of 12 at once; the decision: %v", got, out.GetTotal(), out.GetSplit().GetMessage(),
			out.GetDecision().GetExplanation())
	}
	f, err := e.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	var ups, downs []int32
	for _, ev := range f.GetFleet().GetHistory().GetScaleUpEvents() {
		ups = append(ups, ev.GetChange())
	}
	for _, ev := range f.GetFleet().GetHistory().GetScaleDownEvents() {
		downs = append(downs, ev.GetChange())
	}
	if !cmp.Equal(ups, []int32{2, 4}) || len(downs) != 0 {
		t.Errorf("the fleet's scale events: up %v, down %v; want the scale-ups 6 → 8 → 12 only", ups, downs)
	}
}
