package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
	"github.com/setpointhq/setpoint/hpa"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/internal/twin"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// The fleet of TestFleets: one autoscaler over the Deployment shop/web of
// clusters a, b and c, equal weights.
const (
	fleetName = "web"
	// fleetMin and fleetMax bound the fleet's total.
	fleetMin, fleetMax = 3, 30
	// startReplicas is each member's Deployment at the start.
	startReplicas = 2
)

// fleetKey is the fleet's key.
func fleetKey() *setpointv1.FleetKey {
	return &setpointv1.FleetKey{Namespace: workloadNS, Name: fleetName}
}

// fleetWindows are the fleet's settings in a run: the agents' sync period
// (also the fleet's: the shortest time between two fleet decisions), the
// scale-down stabilization window, and the period of the scale-down
// policy (one pod per period) that paces a returning member.
type fleetWindows struct {
	windows
	podsPeriod time.Duration
}

// fleetSettings are CI's (1 s sync, 10 s window, one pod per 5 s) or, with
// SETPOINT_FLEET_LONG, the controller's defaults and one pod a minute.
func fleetSettings() fleetWindows {
	if long {
		return fleetWindows{windows: dflt, podsPeriod: time.Minute}
	}
	return fleetWindows{windows: short, podsPeriod: 5 * time.Second}
}

// staleAfter is the fleet's StaleAfter: the spec leaves it unset, so it
// is the documented default of three sync periods.
func (w fleetWindows) staleAfter() time.Duration { return 3 * w.sync }

// failoverBound is the documented bound (docs/fleets.md, "Failover
// timing") from a member's last report to the other members running its
// share: StaleAfter + 2 × sync period.
func (w fleetWindows) failoverBound() time.Duration { return w.staleAfter() + 2*w.sync }

// settleTimeout bounds every wait for the fleet to reach a split: pods
// start and turn Ready in a few seconds; a return takes two scale-down
// periods.
func (w fleetWindows) settleTimeout() time.Duration {
	return 90*time.Second + 4*w.podsPeriod + 6*w.sync
}

// fleetSpec is the fleet PutFleet stores: the Deployment web of each
// member, 3 to 30 replicas in all, CPU at 50% of the 200m requested (100m a
// pod), a scale-down of one pod per podsPeriod, three members of weight 1.
func fleetSpec(w fleetWindows) *setpointv1.FleetSpec {
	hpaSpec := twin.CPUHPA(workloadName, fleetMin, fleetMax, targetUtil).Spec
	hpaSpec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To(int32(w.downscaleStabilizing / time.Second)),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: int32(w.podsPeriod / time.Second)}},
		},
	}
	spec := &setpointv1.FleetSpec{
		Autoscaler: hpa.Spec(hpaSpec),
		Settings:   fleetControllerSettings(w),
	}
	for _, c := range clusterNames {
		spec.Members = append(spec.Members, &setpointv1.FleetMember{Cluster: c, Weight: 1})
	}
	return spec
}

// fleetControllerSettings are the fleet's controller settings: the run's
// sync period and scale-down window.
func fleetControllerSettings(w fleetWindows) *setpointv1.ControllerSettings {
	return &setpointv1.ControllerSettings{DownscaleStabilizationWindow: durationpb.New(w.downscaleStabilizing)}
}

// loadPhase is one step of the loads: each cluster's demand (CPU
// millicores; 100m a pod at the target) from the step on, and the split
// the fleet must settle on.
type loadPhase struct {
	name   string
	demand map[string]float64
	want   []int32 // shares of a, b, c
}

// Levels sit half a pod between whole pods (550m is 5.5 pods' worth), so
// that the ±2% noise cannot tip a count: 550m over 6 pods is 92% of the
// target (within the 10% tolerance) and ceil(5.5) = 6 outside it, so 6
// holds either way; likewise 1150m and 12.
var (
	// phaseStart: most of the load in a. The fleet pools it: 550m over
	// the 6 pods the members start with holds 6, two each.
	phaseStart = loadPhase{"start", map[string]float64{"a": 350, "b": 100, "c": 100}, []int32{2, 2, 2}}
	// phaseMove: a's extra load moves to b, the sum stays; nothing may
	// change (one HPA per cluster would scale b up and a down).
	phaseMove = loadPhase{"move a→b", map[string]float64{"a": 100, "b": 350, "c": 100}, []int32{2, 2, 2}}
	// phaseRise: b's load rises: 1150m asks for 12, four each.
	phaseRise = loadPhase{"rise in b", map[string]float64{"a": 100, "b": 950, "c": 100}, []int32{4, 4, 4}}
	// phaseLost: c's agent stops and its traffic goes to a; the survivors
	// carry 1150m: 12 over a and b.
	phaseLost = loadPhase{"c lost", map[string]float64{"a": 200, "b": 950, "c": 0}, []int32{6, 6, 0}}
	// phaseBack: c's traffic comes back once c holds its share again; the
	// sum stays.
	phaseBack = loadPhase{"c's traffic back", map[string]float64{"a": 100, "b": 950, "c": 100}, []int32{4, 4, 4}}
)

// fleetRun is TestFleets' running system and what it records.
type fleetRun struct {
	t      *testing.T
	w      fleetWindows
	svc    *service
	twins  map[string]*twin.Twin
	agents map[string]*twin.Agent
	loads  map[string]*twin.Load
	logs   map[string]*replicaLog
	fleets setpointv1.FleetServiceClient // as the platform
	splits *splitLog
	start  time.Time
}

func TestFleets(t *testing.T) {
	start := time.Now()
	w := fleetSettings()
	svc := startService(t, 3, clusterNames)
	tws := startTwins(t, clusterNames)
	t.Logf("service and 3 twins ready in %v", time.Since(start).Round(time.Millisecond))
	r := &fleetRun{t: t, w: w, svc: svc, twins: map[string]*twin.Twin{}, agents: map[string]*twin.Agent{},
		loads: map[string]*twin.Load{}, logs: map[string]*replicaLog{}, splits: &splitLog{}, start: start}
	r.fleets = setpointv1.NewFleetServiceClient(svc.client(t, "platform").Conn())

	// The platform puts the fleet; each cluster runs the Deployment, an
	// Autoscaler that names the fleet, and its agent.
	if _, err := r.fleets.PutFleet(t.Context(), &setpointv1.PutFleetRequest{Fleet: fleetKey(), Spec: fleetSpec(w)}); err != nil {
		t.Fatalf("the platform's PutFleet: %v", err)
	}
	followCtx, stopFollow := context.WithCancel(t.Context())
	var followWG sync.WaitGroup
	t.Cleanup(func() {
		stopFollow()
		followWG.Wait()
		if t.Failed() {
			t.Logf("splits seen:\n%s", r.splits.describe(r.start))
			for _, name := range clusterNames {
				t.Logf("cluster %s: replicas%s", name, describe(r.logs[name].snapshot(), r.start))
			}
		}
	})
	for i, name := range clusterNames {
		tw := tws[i]
		r.twins[name] = tw
		createWorkloadN(t, tw, startReplicas)
		createFleetAutoscaler(t, tw)
		r.loads[name] = tw.AddWorkload(twin.Workload{Namespace: workloadNS, Selector: workloadLabels,
			Trace: twin.Steady(phaseStart.demand[name], 0), Noise: 0.02, Idle: 5, Seed: uint64(i + 1)})
		r.logs[name] = &replicaLog{}
		followWG.Go(func() { r.logs[name].follow(followCtx, tw) })
		r.agents[name] = startAgent(t, svc, tw, name, "", w.windows)
	}
	followWG.Go(func() { r.splits.follow(followCtx, r.fleets) })

	// The loads' sum never falls: what moves between clusters stays in
	// the fleet, and the fleet follows the sum.
	phases := []loadPhase{phaseStart, phaseMove, phaseRise, phaseLost, phaseBack}
	for i := 1; i < len(phases); i++ {
		if sum(phases[i].demand) < sum(phases[i-1].demand) {
			t.Fatalf("phase %q: the loads' sum falls from %v to %v", phases[i].name, sum(phases[i-1].demand), sum(phases[i].demand))
		}
	}

	r.settle(phaseStart)
	r.move(phaseMove)
	r.hold(phaseMove)
	r.move(phaseRise)
	r.settle(phaseRise)
	r.failover()
	r.ret()
	r.move(phaseBack)
	r.hold(phaseBack)
	r.checkStatuses(phaseBack)

	r.checkIdentities()
	t.Logf("fleets: %v in all", time.Since(start).Round(time.Millisecond))
}

// move sets every cluster's demand to p's.
func (r *fleetRun) move(p loadPhase) {
	r.t.Logf("%v: load %q: %v", r.since(), p.name, p.demand)
	for _, name := range clusterNames {
		r.loads[name].SetTrace(twin.Steady(p.demand[name], 0))
	}
}

// since is the time since the test started, for logs.
func (r *fleetRun) since() time.Duration { return time.Since(r.start).Round(100 * time.Millisecond) }

// settle waits until the fleet's split is p.want, every share Weighted,
// and each cluster runs its share: the Deployment's replicas, that many
// pods, all Ready, and the Autoscaler's status showing the share and the
// fleet's total.
func (r *fleetRun) settle(p loadPhase) *setpointv1.FleetSplit {
	r.t.Helper()
	var split *setpointv1.FleetSplit
	testkit.Eventually(r.t, r.w.settleTimeout(), fmt.Sprintf("phase %q: the split %v, run by every cluster", p.name, p.want), func() error {
		f, err := r.fleet()
		if err != nil {
			return err
		}
		split = f.GetSplit()
		if err := splitIs(split, p.want); err != nil {
			return err
		}
		for i, name := range clusterNames {
			if err := r.runs(name, p.want[i], split.GetTotal()); err != nil {
				return err
			}
		}
		return nil
	})
	r.t.Logf("%v: phase %q settled: %s", r.since(), p.name, split.GetMessage())
	return split
}

// hold checks that the fleet keeps p.want over at least three fleet
// decisions after the loads moved: the fleet pools the members' pods, so
// load that moves between clusters moves no replica.
func (r *fleetRun) hold(p loadPhase) {
	r.t.Helper()
	first := r.settle(p)
	from := first.GetTime().AsTime()
	// Three decisions later, from the loads of p (the first split may be
	// older than the move).
	testkit.Eventually(r.t, r.w.settleTimeout(), fmt.Sprintf("phase %q: three fleet decisions", p.name), func() error {
		f, err := r.fleet()
		if err != nil {
			return err
		}
		if n := r.splits.since(from); n < 3 {
			return fmt.Errorf("%d decisions since %v; last split %s", n, from, f.GetSplit().GetMessage())
		}
		return nil
	})
	for _, s := range r.splits.after(from) {
		if err := splitIs(s, p.want); err != nil {
			r.t.Errorf("phase %q: the load moved and the fleet's split changed: %v", p.name, err)
		}
	}
	for i, name := range clusterNames {
		if err := r.runs(name, p.want[i], sum32(p.want)); err != nil {
			r.t.Errorf("phase %q: %v", p.name, err)
		}
	}
}

// failover stops cluster c's agent, moves c's traffic to a, and scales
// c's Deployment down to one replica (c's workload is lost with it: a
// cluster that fails loses its pods, and one that returns starts small).
// Within StaleAfter + 2 × sync period of the agent's stop, the service
// must have left c out and a and b must run the whole total.
func (r *fleetRun) failover() {
	t := r.t
	t.Helper()
	if err := r.agents["c"].Stop(); err != nil {
		t.Fatalf("stop agent c: %v", err)
	}
	stopped := time.Now()
	r.move(phaseLost)
	scaleDeployment(t, r.twins["c"], 1)
	t.Logf("%v: agent c stopped, its traffic moved to a, its Deployment scaled to 1", r.since())
	var moved time.Time
	var split *setpointv1.FleetSplit
	err := testkit.Poll(t.Context(), r.w.settleTimeout(), func() error {
		f, err := r.fleet()
		if err != nil {
			return err
		}
		split = f.GetSplit()
		c := shareOf(split, "c")
		if c.GetReason() != "Excluded" || c.GetExclusion() != "Stale" {
			return fmt.Errorf("c in the split: %v", c)
		}
		a, b := shareOf(split, "a"), shareOf(split, "b")
		if a.GetReplicas()+b.GetReplicas() != split.GetTotal() {
			return fmt.Errorf("a %d + b %d, total %d", a.GetReplicas(), b.GetReplicas(), split.GetTotal())
		}
		for _, s := range []*setpointv1.FleetShare{a, b} {
			if got := r.replicas(s.GetMember()); got != s.GetReplicas() {
				return fmt.Errorf("%s runs %d, its share is %d", s.GetMember(), got, s.GetReplicas())
			}
		}
		moved = time.Now()
		return nil
	})
	if err != nil {
		t.Fatalf("c's share never moved to a and b: %v", err)
	}
	took := moved.Sub(stopped)
	lastReport := r.lastReport("c")
	t.Logf("%v: c's share moved %v after its agent stopped (%v after its last report), bound %v: %s",
		r.since(), took.Round(time.Millisecond), moved.Sub(lastReport).Round(time.Millisecond), r.w.failoverBound(), split.GetMessage())
	if took > r.w.failoverBound() {
		t.Errorf("c's share moved to a and b %v after its agent stopped; the documented bound is StaleAfter + 2 × sync period = %v", took, r.w.failoverBound())
	}
	if lastReport.After(stopped) {
		t.Errorf("c's last report (%v) is after its agent stopped (%v)", lastReport, stopped)
	}
	r.settle(phaseLost)
}

// ret starts cluster c's agent again: c takes its share back as the
// scale-down policy lets a and b release theirs (one pod per period
// each), the first splits holding a and b and returning c, and the fleet
// ends at the weighted split.
func (r *fleetRun) ret() {
	t := r.t
	t.Helper()
	restarted := time.Now()
	if err := r.agents["c"].Start(); err != nil {
		t.Fatalf("start agent c: %v", err)
	}
	t.Logf("%v: agent c started again", r.since())
	final := r.settle(loadPhase{"c returned", phaseLost.demand, []int32{4, 4, 4}})

	// The splits made since the restart: c pooled again, first returning
	// while a and b are held, then weighted.
	var back []*setpointv1.FleetSplit
	for _, s := range r.splits.after(restarted.Add(-time.Second)) {
		if shareOf(s, "c").GetReason() != "Excluded" {
			back = append(back, s)
		}
	}
	if len(back) == 0 {
		t.Fatal("no split pooled c after its agent started again")
	}
	first := back[0]
	c := shareOf(first, "c")
	if c.GetReason() != "Returning" || c.GetReplicas() >= c.GetWeighted() {
		t.Errorf("c's first share after its return: %v, want Returning below its weighted share", c)
	}
	// One pod per period: a and b, at 6, may fall to 5 in the first
	// split that returns c, and to 4 one period after it.
	for _, name := range []string{"a", "b"} {
		s := shareOf(first, name)
		if s.GetReason() != "Held" || s.GetReplicas() != phaseLost.want[index(name)]-1 {
			t.Errorf("%s's share when c returns: %v, want Held at %d", name, s, phaseLost.want[index(name)]-1)
		}
	}
	for _, s := range back {
		if s.GetTime().AsTime().Sub(first.GetTime().AsTime()) >= r.w.podsPeriod {
			break
		}
		for _, name := range []string{"a", "b"} {
			if got := shareOf(s, name).GetReplicas(); got < phaseLost.want[index(name)]-1 {
				t.Errorf("split at %v, %v after c's return began: %s has %d, more than one pod below its %d within the scale-down period %v: %s",
					s.GetTime().AsTime().Format(time.RFC3339Nano), s.GetTime().AsTime().Sub(first.GetTime().AsTime()), name, got, phaseLost.want[index(name)], r.w.podsPeriod, s.GetMessage())
			}
		}
	}
	for _, s := range final.GetShares() {
		if s.GetReason() != "Weighted" {
			t.Errorf("after the return, %s is %s: %s", s.GetMember(), s.GetReason(), s.GetMessage())
		}
	}
	// c's Deployment came back through a count below its share.
	var path []int32
	for _, p := range r.logs["c"].snapshot() {
		if !p.at.Before(restarted) {
			path = append(path, p.replicas)
		}
	}
	t.Logf("%v: c returned over %d splits (%v from its restart); c's replicas since: %v; first: %s",
		r.since(), len(back), time.Since(restarted).Round(time.Millisecond), path, first.GetMessage())
}

// checkStatuses checks each member's Autoscaler: its share and the
// fleet's total in its status, and an Event for a change of share.
func (r *fleetRun) checkStatuses(p loadPhase) {
	r.t.Helper()
	for i, name := range clusterNames {
		if err := r.runs(name, p.want[i], sum32(p.want)); err != nil {
			r.t.Errorf("phase %q: %v", p.name, err)
		}
	}
}

// checkIdentities: cluster a's identity may report for a and read its
// own fleet, and nothing else: it cannot report as b, change the fleet,
// or read a fleet that does not list a; each refusal is
// PERMISSION_DENIED, the same whether the fleet exists or not.
func (r *fleetRun) checkIdentities() {
	t := r.t
	t.Helper()
	// A fleet of b and c only.
	other := &setpointv1.FleetKey{Namespace: workloadNS, Name: "bc"}
	spec := fleetSpec(r.w)
	spec.Members = spec.Members[1:]
	if _, err := r.fleets.PutFleet(t.Context(), &setpointv1.PutFleetRequest{Fleet: other, Spec: spec}); err != nil {
		t.Fatalf("the platform's PutFleet of b and c: %v", err)
	}
	missing := &setpointv1.FleetKey{Namespace: workloadNS, Name: "nowhere"}
	agentA := setpointv1.NewFleetServiceClient(r.svc.client(t, "agent-a").Conn())
	before, err := r.fleet()
	if err != nil {
		t.Fatal(err)
	}
	// Its own fleet it may read.
	if _, err := agentA.GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey()}); err != nil {
		t.Errorf("cluster a's GetFleet of its own fleet: %v", err)
	}
	report := &setpointv1.FleetReport{Member: "b", Scale: &setpointv1.Scale{Replicas: 30, StatusReplicas: 30}}
	denied := map[string]error{}
	_, denied["Report as b"] = agentA.Report(t.Context(), &setpointv1.ReportRequest{Fleet: fleetKey(), Report: report})
	_, denied["Report as b to b and c's fleet"] = agentA.Report(t.Context(), &setpointv1.ReportRequest{Fleet: other, Report: report})
	_, denied["Report as a to b and c's fleet"] = agentA.Report(t.Context(), &setpointv1.ReportRequest{Fleet: other,
		Report: &setpointv1.FleetReport{Member: "a", Scale: &setpointv1.Scale{Replicas: 1, StatusReplicas: 1}}})
	_, denied["Report to a missing fleet"] = agentA.Report(t.Context(), &setpointv1.ReportRequest{Fleet: missing,
		Report: &setpointv1.FleetReport{Member: "a", Scale: &setpointv1.Scale{Replicas: 1, StatusReplicas: 1}}})
	_, denied["GetFleet of b and c's"] = agentA.GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: other})
	_, denied["GetFleet of a missing fleet"] = agentA.GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: missing})
	weighted := fleetSpec(r.w)
	weighted.Members[0].Weight = 1000
	_, denied["PutFleet of its own fleet"] = agentA.PutFleet(t.Context(), &setpointv1.PutFleetRequest{Fleet: fleetKey(), Spec: weighted})
	_, denied["PutFleet of a new fleet"] = agentA.PutFleet(t.Context(), &setpointv1.PutFleetRequest{Fleet: missing, Spec: weighted})
	_, denied["DeleteFleet of its own fleet"] = agentA.DeleteFleet(t.Context(), &setpointv1.DeleteFleetRequest{Fleet: fleetKey()})
	_, denied["DeleteFleet of b and c's"] = agentA.DeleteFleet(t.Context(), &setpointv1.DeleteFleetRequest{Fleet: other})
	for what, err := range denied {
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("cluster a's %s: %v, want PermissionDenied", what, err)
		}
	}
	// Listing shows it no fleet without a.
	if resp, err := agentA.ListFleets(t.Context(), &setpointv1.ListFleetsRequest{}); err == nil {
		for _, f := range resp.GetFleets() {
			if !slices.ContainsFunc(f.GetSpec().GetMembers(), func(m *setpointv1.FleetMember) bool { return m.GetCluster() == "a" }) {
				t.Errorf("cluster a's ListFleets shows %s/%s, which does not list a", f.GetKey().GetNamespace(), f.GetKey().GetName())
			}
		}
	} else if status.Code(err) != codes.PermissionDenied {
		t.Errorf("cluster a's ListFleets: %v", err)
	}
	// Nothing changed: the fleet's spec, b's latest report and b and c's
	// fleet are as they were.
	after, err := r.fleet()
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(before.GetSpec(), after.GetSpec()) {
		t.Errorf("the fleet's spec changed after cluster a's refused calls: %v", after.GetSpec())
	}
	for _, m := range after.GetMembers() {
		if m.GetMember() == "b" && m.GetReplicas() == 30 {
			t.Errorf("b's report shows cluster a's forged 30 replicas: %v", m)
		}
	}
	if _, err := r.fleets.GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: other}); err != nil {
		t.Errorf("b and c's fleet after cluster a tried to delete it: %v", err)
	}
}

// fleet returns the fleet as the platform reads it.
func (r *fleetRun) fleet() (*setpointv1.Fleet, error) {
	ctx, cancel := context.WithTimeout(r.t.Context(), 5*time.Second)
	defer cancel()
	resp, err := r.fleets.GetFleet(ctx, &setpointv1.GetFleetRequest{Fleet: fleetKey()})
	if err != nil {
		return nil, fmt.Errorf("GetFleet: %w", err)
	}
	return resp.GetFleet(), nil
}

// lastReport returns when the service received member's latest report.
func (r *fleetRun) lastReport(member string) time.Time {
	f, err := r.fleet()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, m := range f.GetMembers() {
		if m.GetMember() == member {
			return m.GetLastReport().AsTime()
		}
	}
	r.t.Fatalf("no member %s in %v", member, f.GetMembers())
	return time.Time{}
}

// replicas returns the spec.replicas of cluster name's Deployment, or -1.
func (r *fleetRun) replicas(name string) int32 {
	d, err := r.twins[name].Cluster.Client().AppsV1().Deployments(workloadNS).Get(r.t.Context(), workloadName, metav1.GetOptions{})
	if err != nil || d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}

// runs reports whether cluster name runs share: its Deployment's
// replicas, that many pods, all Ready and none other, and its
// Autoscaler's status showing the share and the fleet's total.
func (r *fleetRun) runs(name string, share, total int32) error {
	if got := r.replicas(name); got != share {
		return fmt.Errorf("cluster %s: the Deployment has %d replicas, its share is %d", name, got, share)
	}
	pods := r.twins[name].Pods(workloadNS, workloadLabels)
	ready := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil && podReady(p) {
			ready++
		}
	}
	if len(pods) != int(share) || ready != int(share) {
		return fmt.Errorf("cluster %s: %d pods, %d Ready, want %d", name, len(pods), ready, share)
	}
	st, err := autoscalerStatus(r.t.Context(), r.twins[name])
	if err != nil {
		return err
	}
	if st.share != share || st.total != total {
		return fmt.Errorf("cluster %s: the Autoscaler's status shows share %d of %d, want %d of %d", name, st.share, st.total, share, total)
	}
	return nil
}

// podReady reports whether p's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// splitIs reports whether split's shares are want (members in spec
// order), every one Weighted.
func splitIs(split *setpointv1.FleetSplit, want []int32) error {
	if split == nil {
		return fmt.Errorf("no split yet")
	}
	var got []int32
	for _, s := range split.GetShares() {
		got = append(got, s.GetReplicas())
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("split %v, want %v: %s", got, want, split.GetMessage())
	}
	for _, s := range split.GetShares() {
		if s.GetReplicas() > 0 && s.GetReason() != "Weighted" {
			return fmt.Errorf("%s is %s: %s", s.GetMember(), s.GetReason(), split.GetMessage())
		}
	}
	if split.GetPlaced() != split.GetTotal() || split.GetTotal() != sum32(want) {
		return fmt.Errorf("split of %d placed %d: %s", split.GetTotal(), split.GetPlaced(), split.GetMessage())
	}
	return nil
}

// shareOf returns member's share in split, or nil.
func shareOf(split *setpointv1.FleetSplit, member string) *setpointv1.FleetShare {
	for _, s := range split.GetShares() {
		if s.GetMember() == member {
			return s
		}
	}
	return nil
}

// splitLog records every split the platform's GetFleet showed, polled
// every 200 ms, in the order of their times.
type splitLog struct {
	mu     sync.Mutex
	splits []*setpointv1.FleetSplit
}

// follow polls the fleet until ctx ends.
func (l *splitLog) follow(ctx context.Context, fleets setpointv1.FleetServiceClient) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := fleets.GetFleet(cctx, &setpointv1.GetFleetRequest{Fleet: fleetKey()})
		cancel()
		if s := resp.GetFleet().GetSplit(); err == nil && s != nil {
			l.mu.Lock()
			if n := len(l.splits); n == 0 || s.GetTime().AsTime().After(l.splits[n-1].GetTime().AsTime()) {
				l.splits = append(l.splits, s)
			}
			l.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// after returns the splits made after t.
func (l *splitLog) after(t time.Time) []*setpointv1.FleetSplit {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*setpointv1.FleetSplit
	for _, s := range l.splits {
		if s.GetTime().AsTime().After(t) {
			out = append(out, s)
		}
	}
	return out
}

// since returns how many splits were made after t.
func (l *splitLog) since(t time.Time) int { return len(l.after(t)) }

// describe lists the splits, one a line, timed from start.
func (l *splitLog) describe(start time.Time) string {
	var b strings.Builder
	for _, s := range l.after(time.Time{}) {
		fmt.Fprintf(&b, "  %v: %s\n", s.GetTime().AsTime().Sub(start).Round(100*time.Millisecond), s.GetMessage())
	}
	return b.String()
}

// createWorkloadN creates the namespace and the Deployment with replicas
// replicas in the twin.
func createWorkloadN(t *testing.T, tw *twin.Twin, replicas int32) {
	t.Helper()
	if err := tw.CreateNamespace(t.Context(), workloadNS); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Cluster.Client().AppsV1().Deployments(workloadNS).Create(t.Context(), twin.Deployment(workloadName, workloadLabels, replicas, cpuRequest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// scaleDeployment sets the twin's Deployment's replicas through its Scale.
func scaleDeployment(t *testing.T, tw *twin.Twin, replicas int32) {
	t.Helper()
	deps := tw.Cluster.Client().AppsV1().Deployments(workloadNS)
	sc, err := deps.GetScale(t.Context(), workloadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = replicas
	if _, err := deps.UpdateScale(t.Context(), workloadName, sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createFleetAutoscaler creates the Autoscaler of the Deployment that
// names the fleet: its agent reports to the fleet and applies its share.
func createFleetAutoscaler(t *testing.T, tw *twin.Twin) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version, "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": workloadName, "namespace": workloadNS},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": workloadName},
			"maxReplicas":    int64(fleetMax),
			"fleet":          map[string]any{"name": fleetName},
		},
	}}
	if _, err := tw.Cluster.Dynamic().Resource(v1alpha1.AutoscalerResource).Namespace(workloadNS).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the fleet's Autoscaler: %v", err)
	}
}

// memberStatus is what a member's Autoscaler status says of the fleet.
type memberStatus struct {
	share, current, total int32
}

// autoscalerStatus reads the twin's Autoscaler's status.
func autoscalerStatus(ctx context.Context, tw *twin.Twin) (memberStatus, error) {
	u, err := tw.Cluster.Dynamic().Resource(v1alpha1.AutoscalerResource).Namespace(workloadNS).Get(ctx, workloadName, metav1.GetOptions{})
	if err != nil {
		return memberStatus{}, err
	}
	get := func(path ...string) int32 {
		v, _, _ := unstructured.NestedInt64(u.Object, path...)
		return int32(v)
	}
	return memberStatus{share: get("status", "desiredReplicas"), current: get("status", "currentReplicas"), total: get("status", "fleet", "total")}, nil
}

func index(name string) int { return slices.Index(clusterNames, name) }

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

func sum32(vs []int32) int32 {
	var s int32
	for _, v := range vs {
		s += v
	}
	return s
}
