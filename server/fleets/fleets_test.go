package fleets_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/internal/testpki"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
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
	srv   *servertest.Server
	clock *testkit.Clock
	conns map[string]*grpc.ClientConn
}

// start runs a server over a real bbolt file on a real TCP listener, with
// authentication by bearer token and a clock the test steps.
func start(t *testing.T) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "principals.json")
	testpki.WriteFile(t, path, []byte(principals))
	a, err := server.NewAuthenticator(path, server.ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := testkit.NewClock(t0)
	id := 0
	srv := servertest.Start(t, servertest.Config{Options: server.Options{
		Auth: a, Now: c.Now,
		NewID: func() string { id++; return fmt.Sprintf("d%d", id) },
	}})
	return &env{srv: srv, clock: c, conns: map[string]*grpc.ClientConn{}}
}

// fleets returns a FleetService client calling as the principal whose
// token is who.
func (e *env) fleets(t *testing.T, who string) setpointv1.FleetServiceClient {
	return setpointv1.NewFleetServiceClient(e.conn(t, who))
}

// autoscaler returns an AutoscalerService client calling as who.
func (e *env) autoscaler(t *testing.T, who string) setpointv1.AutoscalerServiceClient {
	return setpointv1.NewAutoscalerServiceClient(e.conn(t, who))
}

func (e *env) conn(t *testing.T, who string) *grpc.ClientConn {
	t.Helper()
	if c, ok := e.conns[who]; ok {
		return c
	}
	c, err := grpc.NewClient(e.srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(who)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
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
	req := &setpointv1.RecommendRequest{
		Target:          &setpointv1.TargetKey{Cluster: "a", Namespace: "shop", Name: name},
		Spec:            autoscaler(),
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
func (e *env) put(t *testing.T, spec *setpointv1.FleetSpec) {
	t.Helper()
	if _, err := e.fleets(t, "ops").PutFleet(t.Context(), &setpointv1.PutFleetRequest{Fleet: fleetKey, Spec: spec}); err != nil {
		t.Fatalf("PutFleet: %v", err)
	}
}

// report reports m as its own agent, now.
func (e *env) report(t *testing.T, m member) *setpointv1.ReportResponse {
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
