package agent

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/hpa"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// fakeFleets is a hand-written FleetService server: GetFleet returns spec,
// Report answers with answer(report) and records every request.
type fakeFleets struct {
	setpointv1.UnimplementedFleetServiceServer

	mu      sync.Mutex
	spec    *setpointv1.FleetSpec
	getErr  error
	gets    []*setpointv1.GetFleetRequest
	reports []*setpointv1.ReportRequest
	answer  func(*setpointv1.ReportRequest) (*setpointv1.ReportResponse, error)
}

func (f *fakeFleets) GetFleet(_ context.Context, req *setpointv1.GetFleetRequest) (*setpointv1.GetFleetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = append(f.gets, req)
	if f.getErr != nil {
		return nil, f.getErr
	}
	return &setpointv1.GetFleetResponse{Fleet: &setpointv1.Fleet{Key: req.GetFleet(), Spec: f.spec}}, nil
}

func (f *fakeFleets) Report(_ context.Context, req *setpointv1.ReportRequest) (*setpointv1.ReportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, req)
	return f.answer(req)
}

// calls returns the GetFleet and Report requests so far.
func (f *fakeFleets) calls() ([]*setpointv1.GetFleetRequest, []*setpointv1.ReportRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*setpointv1.GetFleetRequest(nil), f.gets...), append([]*setpointv1.ReportRequest(nil), f.reports...)
}

// serveFleets serves f over gRPC on a loopback port and returns a client
// of it; both stop when the test ends.
func serveFleets(t *testing.T, f *fakeFleets) setpointv1.FleetServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	setpointv1.RegisterFleetServiceServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-done
	})
	return setpointv1.NewFleetServiceClient(conn)
}

// fleetMember is the test Autoscaler as a member of fleet "web-fleet":
// only scaleTargetRef and fleet are set.
func fleetMember() *v1alpha1.Autoscaler {
	a := testAutoscaler()
	a.Spec = v1alpha1.AutoscalerSpec{ScaleTargetRef: a.Spec.ScaleTargetRef, Fleet: &v1alpha1.FleetRef{Name: "web-fleet"}}
	return a
}

// fleetSpec is a fleet's spec with a cpu and an External metric.
func fleetSpec() *setpointv1.FleetSpec {
	return &setpointv1.FleetSpec{
		Autoscaler: hpa.Spec(autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2),
			MaxReplicas:    20,
			Metrics:        testAutoscaler().Spec.Metrics,
		}),
		Members: []*setpointv1.FleetMember{{Cluster: "c1", Weight: 1}, {Cluster: "c2", Weight: 1}},
	}
}

// shareOf answers every report with share replicas (reason) of total.
func shareOf(replicas, total int32, reason string) func(*setpointv1.ReportRequest) (*setpointv1.ReportResponse, error) {
	return func(*setpointv1.ReportRequest) (*setpointv1.ReportResponse, error) {
		return &setpointv1.ReportResponse{
			Share: &setpointv1.FleetShare{Member: "c1", Replicas: replicas, Weighted: replicas, Reason: reason, Message: "weight 1 of 2"},
			Total: total,
			Spec:  fleetSpec(),
			Decision: &setpointv1.Decision{DesiredReplicas: total, Status: &setpointv1.HorizontalPodAutoscalerStatus{
				Conditions: []*setpointv1.Condition{
					{Type: "AbleToScale", Status: "True", Reason: "ReadyForNewScale", Message: "the fleet may scale"},
					{Type: "ScalingActive", Status: "True", Reason: "ValidMetricFound", Message: "the fleet computed its replicas"},
				},
			}},
			Split: &setpointv1.FleetSplit{Total: total, Placed: total, Message: "split by weight"},
		}, nil
	}
}

func newFleetHarness(t *testing.T, f *fakeFleets) *harness {
	t.Helper()
	h := newHarness(t, fleetMember(), nil)
	h.c.opts.Fleets = serveFleets(t, f)
	return h
}

func TestFleetMemberAppliesShare(t *testing.T) {
	f := &fakeFleets{spec: fleetSpec(), answer: shareOf(5, 9, "Weighted")}
	h := newFleetHarness(t, f)
	reg := prometheus.NewRegistry()
	h.c.opts.Prometheus = NewMetrics(reg)
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	// The member's series: its share, and the rescale; no metric series
	// (the fleet's metrics are not this Autoscaler's).
	got := samples(t, reg)
	for name, want := range map[string]float64{
		`setpoint_agent_desired_replicas{hpa_name="web",namespace="ns"}`:       5,
		`setpoint_agent_rescales_total{result="applied"}`:                      1,
		`setpoint_agent_reconciliations_total{action="scale_up",error="none"}`: 1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	for name := range got {
		if strings.HasPrefix(name, "setpoint_agent_metric_") {
			t.Errorf("fleet member has a metric series %s", name)
		}
	}
	gets, reports := f.calls()
	if len(gets) != 1 || !proto.Equal(gets[0].GetFleet(), &setpointv1.FleetKey{Namespace: "ns", Name: "web-fleet"}) {
		t.Fatalf("GetFleet calls = %v, want one for ns/web-fleet", gets)
	}
	// One report per sync: the share applied is not reported again (the
	// service counts the member at its share until its next report).
	if len(reports) != 1 {
		t.Fatalf("reports = %v, want 1", reports)
	}
	rep := reports[0].GetReport()
	if rep.GetMember() != "c1" || rep.GetCannotScale() != "" {
		t.Errorf("report member %q cannot_scale %q, want c1 and empty", rep.GetMember(), rep.GetCannotScale())
	}
	if diff := cmp.Diff(&setpointv1.Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"}, rep.GetScale(), protocmp.Transform()); diff != "" {
		t.Errorf("scale (-want +got):\n%s", diff)
	}
	if len(rep.GetPods()) != 1 || rep.GetPods()[0].GetName() != "web-1" {
		t.Errorf("pods = %v, want only web-1", rep.GetPods())
	}
	// The fleet's metrics were fetched: cpu through the resource metrics
	// API, the External metric through its API (no client: an error).
	obs := rep.GetObservations()
	if len(obs) != 2 || rep.GetResourceMetrics() == nil || obs[0].GetError() == "" || !strings.Contains(obs[1].GetError(), "external metrics API") {
		t.Errorf("resource metrics %v, observations %v: want both fetched, with their errors", rep.GetResourceMetrics(), obs)
	}
	if got := h.scales.scales["ns/web"].Spec.Replicas; got != 5 {
		t.Errorf("scale replicas = %d, want the share 5", got)
	}
	st := h.status(t)
	if st.DesiredReplicas != 5 || st.CurrentReplicas != 2 || ptr.Deref(st.FleetReplicas, -1) != 9 || st.LastScaleTime == nil {
		t.Errorf("status desired %d current %d fleet %v lastScale %v, want 5, 2, 9, set", st.DesiredReplicas, st.CurrentReplicas, st.FleetReplicas, st.LastScaleTime)
	}
	if c := findCondition(st.Conditions, v1alpha1.ConditionFleetShare); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "Weighted" {
		t.Errorf("FleetShare = %+v, want True Weighted", c)
	}
	if c := findCondition(st.Conditions, autoscalingv2.AbleToScale); c == nil || c.Reason != "SucceededRescale" {
		t.Errorf("AbleToScale = %+v, want the member's own SucceededRescale, not the fleet's", c)
	}
	if c := findCondition(st.Conditions, autoscalingv2.ScalingActive); c == nil || c.Reason != "ValidMetricFound" {
		t.Errorf("ScalingActive = %+v, want the fleet decision's", c)
	}
	if st.Explanation == nil || !strings.Contains(st.Explanation.Summary, "fleet web-fleet") || !strings.Contains(st.Explanation.Summary, "split by weight") {
		t.Errorf("explanation = %+v", st.Explanation)
	}
	evs := strings.Join(h.drainEvents(), "\n")
	for _, want := range []string{
		"Normal FleetShareChanged share 5 of fleet web-fleet's 9 replicas (was none)",
		"Normal SuccessfulRescale New size: 5; reason: share of fleet web-fleet (Weighted)",
	} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}

	// The next sync follows the spec the answer carried, without GetFleet,
	// and its one report reads the share as applied; the same share and
	// total change nothing.
	h.refresh(t)
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	gets, reports = f.calls()
	if len(gets) != 1 || len(reports) != 2 {
		t.Fatalf("after two syncs: %d GetFleet, %d reports; want 1 and 2", len(gets), len(reports))
	}
	if got := reports[1].GetReport().GetScale().GetReplicas(); got != 5 {
		t.Errorf("second sync's report: replicas = %d, want the applied share 5", got)
	}
	if st := h.status(t); st.DesiredReplicas != 5 || ptr.Deref(st.FleetReplicas, -1) != 9 {
		t.Errorf("after the second sync: desired %d of %v, want 5 of 9", st.DesiredReplicas, st.FleetReplicas)
	}
	if h.scales.updates != 1 {
		t.Errorf("%d scale updates, want 1", h.scales.updates)
	}
	if evs := h.drainEvents(); len(evs) != 0 {
		t.Errorf("unchanged share recorded events: %v", evs)
	}
}

// refresh puts the Autoscaler as last written (status included) back into
// the controller's cache, as the informer would.
func (h *harness) refresh(t *testing.T) {
	t.Helper()
	a := h.a.DeepCopy()
	a.Status = h.status(t)
	if err := h.c.autoscalers.GetIndexer().Update(a); err != nil {
		t.Fatal(err)
	}
}

func TestFleetMemberLeavesReplicasWithoutShare(t *testing.T) {
	noSplit := func(*setpointv1.ReportRequest) (*setpointv1.ReportResponse, error) {
		return &setpointv1.ReportResponse{Spec: fleetSpec()}, nil
	}
	tests := []struct {
		name   string
		answer func(*setpointv1.ReportRequest) (*setpointv1.ReportResponse, error)
		reason string
		total  *int32
	}{
		{"no split yet", noSplit, v1alpha1.ReasonNoSplit, nil},
		// An excluded member's share is 0: it must not be applied.
		{"excluded", shareOf(0, 8, "Excluded"), v1alpha1.ReasonExcluded, ptr.To[int32](8)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFleetHarness(t, &fakeFleets{spec: fleetSpec(), answer: tt.answer})
			if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if got := h.scales.scales["ns/web"].Spec.Replicas; got != 2 || h.scales.updates != 0 {
				t.Errorf("scale replicas = %d after %d updates, want 2 untouched", got, h.scales.updates)
			}
			st := h.status(t)
			if c := findCondition(st.Conditions, v1alpha1.ConditionFleetShare); c == nil || c.Status != corev1.ConditionFalse || c.Reason != tt.reason {
				t.Errorf("FleetShare = %+v, want False %s", c, tt.reason)
			}
			if st.DesiredReplicas != 2 || !cmp.Equal(st.FleetReplicas, tt.total) {
				t.Errorf("desired %d fleet %v, want 2 and %v", st.DesiredReplicas, st.FleetReplicas, tt.total)
			}
		})
	}
}

// A refused Scale update is reported to the fleet at once, and every
// later report says the member cannot scale until a write of the Scale
// succeeds again.
func TestFleetMemberRefusedScaleReportsCannotScale(t *testing.T) {
	f := &fakeFleets{spec: fleetSpec(), answer: shareOf(5, 9, "Weighted")}
	h := newFleetHarness(t, f)
	h.scales.updateErr = apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("denied by policy"))
	err := h.c.reconcile(context.Background(), "ns/web")
	if !errors.Is(err, errTerminal) {
		t.Fatalf("reconcile = %v, want a terminal error", err)
	}
	_, reports := f.calls()
	if len(reports) != 2 || reports[0].GetReport().GetCannotScale() != "" || !strings.Contains(reports[1].GetReport().GetCannotScale(), "denied by policy") {
		t.Fatalf("reports = %v, want one able, then one saying why it cannot scale", reports)
	}
	st := h.status(t)
	if c := findCondition(st.Conditions, autoscalingv2.AbleToScale); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "FailedUpdateScale" {
		t.Errorf("AbleToScale = %+v, want False FailedUpdateScale", c)
	}
	if evs := strings.Join(h.drainEvents(), "\n"); !strings.Contains(evs, "Warning FleetCannotScale") || !strings.Contains(evs, "Warning FailedRescale") {
		t.Errorf("events lack FleetCannotScale and FailedRescale:\n%s", evs)
	}

	// Still refused: the report says so from the start, and no share is
	// applied.
	h.refresh(t)
	_ = h.c.reconcile(context.Background(), "ns/web")
	_, reports = f.calls()
	if len(reports) != 3 || !strings.Contains(reports[2].GetReport().GetCannotScale(), "cannot update the scale") {
		t.Fatalf("third report = %v, want cannot_scale", reports[len(reports)-1])
	}

	// Allowed again: the member reports that it can scale and applies its
	// share.
	h.scales.updateErr = nil
	h.refresh(t)
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile once allowed: %v", err)
	}
	_, reports = f.calls()
	if got := reports[len(reports)-1].GetReport().GetCannotScale(); got != "" {
		t.Errorf("last report's cannot_scale = %q, want empty", got)
	}
	if got := h.scales.scales["ns/web"].Spec.Replicas; got != 5 {
		t.Errorf("scale replicas = %d, want 5", got)
	}
}

func TestFleetMemberMissingWorkload(t *testing.T) {
	f := &fakeFleets{spec: fleetSpec(), answer: shareOf(0, 6, "Excluded")}
	h := newFleetHarness(t, f)
	delete(h.scales.scales, "ns/web")
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	_, reports := f.calls()
	if len(reports) != 1 || !strings.Contains(reports[0].GetReport().GetCannotScale(), "cannot read the scale of Deployment/web") {
		t.Fatalf("reports = %v, want one saying the workload is missing", reports)
	}
	// The service wants one observation per metric of the fleet's spec,
	// even from a member that could read nothing.
	if got := len(reports[0].GetReport().GetObservations()); got != 2 {
		t.Errorf("%d observations, want 2", got)
	}
	if c := findCondition(h.status(t).Conditions, autoscalingv2.AbleToScale); c == nil || c.Reason != "FailedGetScale" {
		t.Errorf("AbleToScale = %+v, want FailedGetScale", c)
	}
}

// A report that followed an older spec's metrics is sent again with the
// metrics of the spec the answer carries.
func TestFleetMemberFollowsNewSpec(t *testing.T) {
	old := fleetSpec()
	old.Autoscaler.Metrics = old.Autoscaler.Metrics[:1]
	f := &fakeFleets{spec: old, answer: shareOf(2, 4, "Weighted")}
	h := newFleetHarness(t, f)
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	_, reports := f.calls()
	if len(reports) != 2 || len(reports[0].GetReport().GetObservations()) != 1 || len(reports[1].GetReport().GetObservations()) != 2 {
		t.Fatalf("reports = %v, want one with 1 observation, then one with 2", reports)
	}
}

func TestFleetMemberServiceErrors(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		reason   string
		terminal bool
	}{
		{"unavailable", status.Error(codes.Unavailable, "down"), v1alpha1.ReasonServiceUnavailable, false},
		{"permission denied", status.Error(codes.PermissionDenied, "not a member"), v1alpha1.ReasonServiceError, true},
		{"invalid", status.Error(codes.InvalidArgument, "report.observations: 1 for 2 metrics"), v1alpha1.ReasonInvalidSpec, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeFleets{spec: fleetSpec(), answer: func(*setpointv1.ReportRequest) (*setpointv1.ReportResponse, error) { return nil, tt.err }}
			h := newFleetHarness(t, f)
			err := h.c.reconcile(context.Background(), "ns/web")
			if err == nil || errors.Is(err, errTerminal) != tt.terminal {
				t.Fatalf("reconcile = %v, want an error, terminal %v", err, tt.terminal)
			}
			if h.scales.updates != 0 {
				t.Errorf("%d scale updates, want none", h.scales.updates)
			}
			if c := findCondition(h.status(t).Conditions, v1alpha1.ConditionServiceAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != tt.reason {
				t.Errorf("ServiceAvailable = %+v, want False %s", c, tt.reason)
			}
		})
	}
}

// The fleet's metrics read back from the API are the metrics the spec was
// written with, defaults applied (hpa.Spec).
func TestMetricsOf(t *testing.T) {
	want := testAutoscaler().Spec.Metrics
	got := metricsOf(fleetSpec().GetAutoscaler().GetMetrics())
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// A member whose pods another autoscaler of its cluster also selects
// reports that it cannot scale, as the HPA controller refuses to act.
func TestFleetMemberAmbiguousSelector(t *testing.T) {
	f := &fakeFleets{spec: fleetSpec(), answer: shareOf(5, 9, "Weighted")}
	h := newFleetHarness(t, f)
	h.c.selectors["ns/other"] = labels.SelectorFromSet(labels.Set{"app": "web"})
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	_, reports := f.calls()
	if len(reports) != 1 || !strings.Contains(reports[0].GetReport().GetCannotScale(), "controlled by more than one HPA") {
		t.Fatalf("reports = %v, want one saying the selector is ambiguous", reports)
	}
	if h.scales.updates != 0 {
		t.Errorf("%d scale updates, want none", h.scales.updates)
	}
	if c := findCondition(h.status(t).Conditions, autoscalingv2.ScalingActive); c == nil || c.Reason != "AmbiguousSelector" {
		t.Errorf("ScalingActive = %+v, want AmbiguousSelector over the fleet decision's", c)
	}
}

// A paused member neither reports nor scales; a member without a fleet
// client says so and does not retry before the next sync.
func TestFleetMemberPausedOrWithoutClient(t *testing.T) {
	f := &fakeFleets{spec: fleetSpec(), answer: shareOf(5, 9, "Weighted")}
	paused := fleetMember()
	paused.Spec.Paused = true
	h := newHarness(t, paused, nil)
	h.c.opts.Fleets = serveFleets(t, f)
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if gets, reports := f.calls(); len(gets)+len(reports) != 0 || h.scales.updates != 0 {
		t.Errorf("paused: %d GetFleet, %d reports, %d scale updates; want none", len(gets), len(reports), h.scales.updates)
	}

	h = newHarness(t, fleetMember(), nil)
	if err := h.c.reconcile(context.Background(), "ns/web"); !errors.Is(err, errTerminal) {
		t.Fatalf("reconcile without a fleet client = %v, want a terminal error", err)
	}
	if c := findCondition(h.status(t).Conditions, autoscalingv2.ScalingActive); c == nil || c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "no fleet service client") {
		t.Errorf("ScalingActive = %+v, want InvalidSpec naming the missing client", c)
	}
}

// An Autoscaler that leaves its fleet is decided on its own again, and its
// status no longer shows a fleet.
func TestLeavingTheFleetClearsTheStatus(t *testing.T) {
	f := &fakeFleets{spec: fleetSpec(), answer: shareOf(5, 9, "Weighted")}
	h := newFleetHarness(t, f)
	h.svc.rec = scaleUp()
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile as a member: %v", err)
	}
	a := testAutoscaler()
	a.Status = h.status(t)
	if a.Status.FleetReplicas == nil {
		t.Fatal("the member's status has no fleetReplicas")
	}
	if err := h.c.autoscalers.GetIndexer().Update(a); err != nil {
		t.Fatal(err)
	}
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatalf("reconcile on its own: %v", err)
	}
	st := h.status(t)
	if st.FleetReplicas != nil || findCondition(st.Conditions, v1alpha1.ConditionFleetShare) != nil {
		t.Errorf("status after leaving the fleet: fleetReplicas %v, FleetShare %v", st.FleetReplicas, findCondition(st.Conditions, v1alpha1.ConditionFleetShare))
	}
	if len(h.svc.requests) != 1 || st.DesiredReplicas != 4 {
		t.Errorf("%d Recommend calls, desired %d; want 1 and 4", len(h.svc.requests), st.DesiredReplicas)
	}
}

// Two Autoscalers of one cluster in one fleet would report as the same
// member: only the first by name does; the other says why it does not.
func TestFleetOneMemberPerCluster(t *testing.T) {
	f := &fakeFleets{spec: fleetSpec(), answer: shareOf(5, 9, "Weighted")}
	h := newFleetHarness(t, f)
	first := fleetMember()
	first.Name = "api"
	cached, err := v1alpha1.ToUnstructured(first)
	if err != nil {
		t.Fatal(err)
	}
	typed, err := typedAutoscaler(cached)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.autoscalers.GetIndexer().Add(typed); err != nil {
		t.Fatal(err)
	}
	if err := h.c.reconcile(context.Background(), "ns/web"); !errors.Is(err, errTerminal) {
		t.Fatalf("reconcile = %v, want a terminal error", err)
	}
	if gets, reports := f.calls(); len(gets)+len(reports) != 0 || h.scales.updates != 0 {
		t.Errorf("%d GetFleet, %d reports, %d scale updates; want none", len(gets), len(reports), h.scales.updates)
	}
	if c := findCondition(h.status(t).Conditions, autoscalingv2.ScalingActive); c == nil || c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "ns/api is this cluster's member of fleet web-fleet") {
		t.Errorf("ScalingActive = %+v, want InvalidSpec naming ns/api", c)
	}
}

// A passing failure to read the Scale sends no report (the member goes
// stale if it lasts) and is retried with back-off.
func TestFleetMemberScaleReadFailsForNow(t *testing.T) {
	f := &fakeFleets{spec: fleetSpec(), answer: shareOf(5, 9, "Weighted")}
	h := newFleetHarness(t, f)
	h.scales.getErr = apierrors.NewServiceUnavailable("etcd is slow")
	err := h.c.reconcile(context.Background(), "ns/web")
	if err == nil || errors.Is(err, errTerminal) {
		t.Fatalf("reconcile = %v, want an error to retry", err)
	}
	if _, reports := f.calls(); len(reports) != 0 {
		t.Errorf("%d reports, want none", len(reports))
	}
	if c := findCondition(h.status(t).Conditions, autoscalingv2.AbleToScale); c == nil || c.Reason != "FailedGetScale" {
		t.Errorf("AbleToScale = %+v, want FailedGetScale", c)
	}
}

func TestRefused(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	tests := []struct {
		err  error
		want bool
	}{
		{apierrors.NewNotFound(gr, "web"), true},
		{apierrors.NewForbidden(gr, "web", errors.New("no")), true},
		{apierrors.NewBadRequest("bad"), true},
		{apierrors.NewConflict(gr, "web", errors.New("modified")), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
		{apierrors.NewServiceUnavailable("down"), false},
		{apierrors.NewTimeoutError("slow", 1), false},
		{errConcurrentRescale, false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := refused(tt.err); got != tt.want {
			t.Errorf("refused(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
