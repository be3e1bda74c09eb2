package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/internal/twin"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// maxDecisionGap bounds how long any cluster may go without a decision
// while a server and then the etcd leader are killed: the agent's
// -recommend-timeout (3 s) for a call the dead server or the leaderless
// etcd holds, its back-off (at most one sync period), an etcd election
// (about a second on loopback) and a sync period, with room for a busy
// 2-core machine: 12 s with CI's 1 s sync period. docs/fleet-twin.md.
func maxDecisionGap(w windows) time.Duration { return 2*w.sync + 10*time.Second }

// clusterNames are the fleet's clusters; cluster:<name> is each agent's role.
var clusterNames = []string{"a", "b", "c"}

// traces gives each cluster its load (CPU millicores; 100m a pod at the
// target): each rises from about 2 pods' worth to 6–8 pods' worth, at
// levels between whole pods so that noise cannot tip them, and falls back.
func traces() map[string]twin.Trace {
	tr := map[string]twin.Trace{
		// a holds its peak longer: its Deployment rolls out meanwhile.
		"a": {Name: "ramp", Points: []twin.Point{pt(0, 150), pt(10*time.Second, 150), pt(16*time.Second, 650),
			pt(45*time.Second, 650), pt(45*time.Second+time.Millisecond, 150), pt(75*time.Second, 150)}},
		"b": twin.Spike(150, 750, 12*time.Second, 30*time.Second, 35*time.Second),
		"c": twin.Spike(180, 550, 16*time.Second, 28*time.Second, 35*time.Second),
	}
	if long {
		for k, v := range tr {
			tr[k] = v.Scaled(8)
		}
	}
	return tr
}

// pt is the point of a trace at at.
func pt(at time.Duration, demand float64) twin.Point { return twin.Point{At: at, Demand: demand} }

// decisionSeen is one decision the platform's Watch delivered.
type decisionSeen struct {
	at      time.Time // when it was received
	decided time.Time // its decision_time
	desired int32
	rescale bool
}

func TestFleet(t *testing.T) {
	start := time.Now()
	svc := startService(t, 3, clusterNames)
	t.Logf("service (3 servers, 3-member etcd, mTLS) ready in %v", time.Since(start).Round(time.Millisecond))
	twins := startTwins(t, clusterNames)
	t.Logf("3 twins ready in %v", time.Since(start).Round(time.Millisecond))
	w := settings()
	for i, name := range clusterNames {
		createWorkload(t, twins[i])
		createAutoscaler(t, twins[i])
		startAgent(t, svc, twins[i], name, "", w)
	}

	// The platform watches every cluster through any server.
	platform := svc.client(t, "platform")
	var seenMu sync.Mutex
	seen := map[string][]decisionSeen{}
	watchCtx, stopWatch := context.WithCancel(t.Context())
	var watchWG sync.WaitGroup
	watchWG.Go(func() {
		for ch, err := range platform.Changes(watchCtx, &setpointv1.WatchRequest{}) {
			if err != nil {
				if watchCtx.Err() == nil {
					t.Errorf("platform Watch: %v", err)
				}
				return
			}
			if d := ch.GetDecision(); d != nil {
				seenMu.Lock()
				c := ch.GetTarget().GetCluster()
				seen[c] = append(seen[c], decisionSeen{at: time.Now(), decided: d.GetDecisionTime().AsTime(), desired: d.GetDesiredReplicas(), rescale: d.GetRescale()})
				seenMu.Unlock()
			}
		}
	})

	// The loads start together; each Deployment's scale writes are logged.
	trs := traces()
	loads := map[string]*twin.Load{}
	logs := map[string]*replicaLog{}
	followCtx, stopFollow := context.WithCancel(t.Context())
	var followWG sync.WaitGroup
	loadStart := time.Now()
	for i, name := range clusterNames {
		loads[name] = twins[i].AddWorkload(twin.Workload{Namespace: workloadNS, Selector: workloadLabels, Trace: trs[name],
			Noise: 0.03, Burst: 50, BurstFor: 5 * time.Second, Idle: 5, Seed: uint64(i + 1)})
		logs[name] = &replicaLog{}
		followWG.Go(func() { logs[name].follow(followCtx, twins[i]) })
	}
	t.Cleanup(func() {
		stopFollow()
		followWG.Wait()
		stopWatch()
		watchWG.Wait()
	})

	// Faults, while the loads run: a server, then the etcd leader.
	scale := 1.0
	if long {
		scale = 8
	}
	at := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	var faults sync.WaitGroup
	faults.Go(func() {
		sleepUntil(loadStart.Add(at(18 * time.Second)))
		t.Logf("%v: SIGKILL server 0", time.Since(loadStart).Round(time.Millisecond))
		svc.Servers[0].Kill()
		sleepUntil(loadStart.Add(at(26 * time.Second)))
		if err := svc.Servers[0].Start(t.Context()); err != nil {
			t.Error(err)
		}
		t.Logf("%v: server 0 back", time.Since(loadStart).Round(time.Millisecond))
		leader := leaderOf(t, svc)
		sleepUntil(loadStart.Add(at(32 * time.Second)))
		t.Logf("%v: kill etcd leader (member %d)", time.Since(loadStart).Round(time.Millisecond), leader)
		svc.etcd.Kill(leader)
		sleepUntil(loadStart.Add(at(40 * time.Second)))
		if err := svc.etcd.Restart(t.Context(), leader); err != nil {
			t.Errorf("restart etcd member %d: %v", leader, err)
		}
		t.Logf("%v: etcd member %d back", time.Since(loadStart).Round(time.Millisecond), leader)
	})

	// A rolling update of cluster a's Deployment once its scale-up began.
	rolled := make(chan time.Time, 1)
	faults.Go(func() {
		err := testkit.Poll(t.Context(), at(40*time.Second), func() error {
			if ps := logs["a"].snapshot(); len(ps) == 0 || ps[len(ps)-1].replicas < 3 {
				return fmt.Errorf("cluster a at%s", describe(ps, loadStart))
			}
			return nil
		})
		if err != nil {
			t.Errorf("cluster a never began to scale up: %v", err)
			return
		}
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"fleet.setpoint.dev/rollout":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
		if _, err := twins[0].Cluster.Client().AppsV1().Deployments(workloadNS).Patch(t.Context(), workloadName, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Errorf("rolling update: %v", err)
			return
		}
		t.Logf("%v: rolling update of cluster a's Deployment", time.Since(loadStart).Round(time.Millisecond))
		rolled <- time.Now()
	})

	// Each cluster scales up through Ready pods that bring the CPU per
	// pod back under the target, and back down once the load falls.
	var wg sync.WaitGroup
	for i, name := range clusterNames {
		wg.Go(func() { checkCluster(t, name, twins[i], loads[name], trs[name], logs[name], loadStart) })
	}
	wg.Wait()
	faults.Wait()

	// The rolling update finished, every pod on the new template.
	select {
	case <-rolled:
		testkit.Eventually(t, at(60*time.Second), "cluster a's rollout to finish", func() error {
			d, err := twins[0].Cluster.Client().AppsV1().Deployments(workloadNS).Get(t.Context(), workloadName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !rolledOut(d) {
				return fmt.Errorf("status %+v", d.Status)
			}
			return nil
		})
	default:
		t.Error("no rolling update happened")
	}

	// Nothing acknowledged is lost, and no cluster stopped deciding for
	// longer than the bound.
	stopFollow()
	followWG.Wait()
	time.Sleep(2 * w.sync)
	stopWatch()
	watchWG.Wait()
	admin := svc.client(t, "admin")
	for _, name := range clusterNames {
		seenMu.Lock()
		got := append([]decisionSeen(nil), seen[name]...)
		seenMu.Unlock()
		checkGaps(t, name, got, loadStart, maxDecisionGap(w))
		checkLogged(t, admin, name, got, logs[name].snapshot())
	}

	checkIsolation(t, svc)
	t.Logf("fleet: %v in all", time.Since(start).Round(time.Millisecond))
}

// checkCluster follows one cluster through its trace.
func checkCluster(t *testing.T, name string, tw *twin.Twin, load *twin.Load, tr twin.Trace, log *replicaLog, loadStart time.Time) {
	peakDemand := 0.0
	for _, p := range tr.Points {
		peakDemand = max(peakDemand, p.Demand)
	}
	low := tr.At(0)
	wantHigh := int(peakDemand/100 + 0.999) // pods at 100m each
	wantLow := int(low/100 + 0.999)
	timeout := tr.Duration() + time.Minute
	// Up: enough Ready pods, at the target.
	var pressed float64
	err := testkit.Poll(t.Context(), timeout, func() error {
		s := load.Last()
		if s.Demand == peakDemand {
			pressed = max(pressed, s.PerReadyPod)
		}
		if s.Demand != peakDemand || s.Ready < wantHigh-1 || s.PerReadyPod > 110 {
			return fmt.Errorf("last sample %+v", s)
		}
		return nil
	})
	if err != nil {
		t.Errorf("cluster %s: no scale-up to ~%d Ready pods at the target: %v; replicas%s", name, wantHigh, err, describe(log.snapshot(), loadStart))
		return
	}
	if pressed <= 110 {
		t.Errorf("cluster %s: the CPU per Ready pod never rose above the target at the peak (%.0fm): the load did not press", name, pressed)
	}
	upAt := time.Now()
	t.Logf("cluster %s: %d Ready pods at %.0fm each after %v", name, load.Last().Ready, load.Last().PerReadyPod, upAt.Sub(loadStart).Round(time.Millisecond))
	// Down: the pods beyond the low load's need are gone.
	err = testkit.Poll(t.Context(), timeout, func() error {
		s := load.Last()
		pods := tw.Pods(workloadNS, workloadLabels)
		if s.Demand != low || s.Ready > wantLow+1 || len(pods) > wantLow+1 {
			return fmt.Errorf("last sample %+v, %d pods", s, len(pods))
		}
		return nil
	})
	if err != nil {
		t.Errorf("cluster %s: no scale-down to ~%d pods: %v; replicas%s", name, wantLow, err, describe(log.snapshot(), loadStart))
		return
	}
	// Settled: up once, down once. A trace that rises and falls once
	// gives one reversal of direction; the v1.37 controller on this load
	// gives one too (the differential compares them step by step).
	vs := values(log.snapshot())
	if r := reversals(vs); r > 1 {
		t.Errorf("cluster %s: replicas changed direction %d times (%v): oscillation", name, r, vs)
	}
	t.Logf("cluster %s: replicas%s", name, describe(log.snapshot(), loadStart))
}

// checkGaps fails when a cluster went longer than maxDecisionGap without
// a decision on the platform's Watch.
func checkGaps(t *testing.T, name string, got []decisionSeen, loadStart time.Time, bound time.Duration) {
	if len(got) < 10 {
		t.Errorf("cluster %s: only %d decisions seen on Watch", name, len(got))
		return
	}
	var worst time.Duration
	var worstAt time.Time
	for i := 1; i < len(got); i++ {
		if gap := got[i].decided.Sub(got[i-1].decided); gap > worst {
			worst, worstAt = gap, got[i].decided
		}
	}
	t.Logf("cluster %s: %d decisions, longest gap %v (ending at %v)", name, len(got), worst.Round(time.Millisecond), worstAt.Sub(loadStart).Round(time.Millisecond))
	if worst > bound {
		t.Errorf("cluster %s went %v without a decision (bound %v)", name, worst, bound)
	}
}

// checkLogged fails when a decision the platform saw, or a replica count
// the agent wrote, is not in the cluster's decision log.
func checkLogged(t *testing.T, admin *setpointclient.Client, name string, got []decisionSeen, writes []replicaPoint) {
	key := setpointclient.Key(name, workloadNS, workloadName)
	logged := map[int64]int32{}
	rescaledTo := map[int32]bool{}
	token := ""
	for {
		resp, err := admin.ListDecisions(t.Context(), &setpointv1.ListDecisionsRequest{Target: key, PageSize: 5000, PageToken: token})
		if err != nil {
			t.Errorf("cluster %s: ListDecisions: %v", name, err)
			return
		}
		for _, d := range resp.GetDecisions() {
			logged[d.GetDecisionTime().AsTime().UnixNano()] = d.GetDesiredReplicas()
			if d.GetRescale() {
				rescaledTo[d.GetDesiredReplicas()] = true
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	lost := 0
	for _, d := range got {
		if desired, ok := logged[d.decided.UnixNano()]; !ok || desired != d.desired {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("cluster %s: %d of %d decisions seen on Watch are not in the decision log", name, lost, len(got))
	}
	// The first point is the Deployment as created; every later one is
	// a scale write the agent made after a decision.
	for i, w := range writes {
		if i > 0 && !rescaledTo[w.replicas] {
			t.Errorf("cluster %s: the Deployment was scaled to %d, which no logged decision decided", name, w.replicas)
		}
	}
	t.Logf("cluster %s: %d decisions logged, %d seen on Watch, %d scale writes, none lost", name, len(logged), len(got), len(writes)-1)
}

// checkIsolation: an agent's identity reaches its own cluster's targets
// only; the platform's sees every cluster.
func checkIsolation(t *testing.T, svc *service) {
	agentA := svc.client(t, "agent-a")
	own, err := agentA.ListTargets(t.Context(), &setpointv1.ListTargetsRequest{Cluster: "a"})
	if err != nil {
		t.Fatalf("agent a lists its own cluster: %v", err)
	}
	if len(own.GetTargets()) != 1 || own.GetTargets()[0].GetKey().GetCluster() != "a" {
		t.Errorf("agent a's own targets: %v", own.GetTargets())
	}
	other := setpointclient.Key("b", workloadNS, workloadName)
	denied := map[string]error{}
	_, denied["GetTarget"] = agentA.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: other})
	_, denied["ListTargets"] = agentA.ListTargets(t.Context(), &setpointv1.ListTargetsRequest{Cluster: "b"})
	_, denied["DeleteTarget"] = agentA.DeleteTarget(t.Context(), &setpointv1.DeleteTargetRequest{Target: other})
	_, denied["ListDecisions"] = agentA.ListDecisions(t.Context(), &setpointv1.ListDecisionsRequest{Target: other})
	_, denied["Recommend"] = agentA.Recommend(t.Context(), &setpointv1.RecommendRequest{Target: other})
	for ch, err := range agentA.Changes(t.Context(), &setpointv1.WatchRequest{Cluster: "b"}) {
		_ = ch
		denied["Watch"] = err
		break
	}
	for rpc, err := range denied {
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("agent a's %s of cluster b's target: %v, want PermissionDenied", rpc, err)
		}
	}
	// The target survived agent a's DeleteTarget.
	if _, err := svc.client(t, "agent-b").GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: other}); err != nil {
		t.Errorf("cluster b's target after agent a tried to delete it: %v", err)
	}
	all, err := svc.client(t, "platform").ListTargets(t.Context(), &setpointv1.ListTargetsRequest{})
	if err != nil {
		t.Fatalf("platform ListTargets: %v", err)
	}
	var clusters []string
	for _, tg := range all.GetTargets() {
		clusters = append(clusters, tg.GetKey().GetCluster())
	}
	sort.Strings(clusters)
	if fmt.Sprint(clusters) != "[a b c]" {
		t.Errorf("the platform lists targets of clusters %v, want [a b c]", clusters)
	}
	// The web console answers as the API does.
	code, body := svc.consoleGet(t, "platform", "api/targets")
	var listed struct {
		List struct {
			Targets []struct {
				Key struct{ Cluster string }
			}
		}
	}
	if err := json.Unmarshal(body, &listed); code != http.StatusOK || err != nil {
		t.Fatalf("console targets as the platform: %d %v: %s", code, err, body)
	}
	clusters = nil
	for _, tg := range listed.List.Targets {
		clusters = append(clusters, tg.Key.Cluster)
	}
	sort.Strings(clusters)
	if fmt.Sprint(clusters) != "[a b c]" {
		t.Errorf("the console shows the platform targets of clusters %v, want [a b c]: %.300s", clusters, body)
	}
	if code, body := svc.consoleGet(t, "agent-a", "api/targets?cluster=b"); code != http.StatusForbidden {
		t.Errorf("the console's targets of cluster b as agent a: %d %s, want 403", code, body)
	}
}

// rolledOut reports whether every replica of the Deployment runs its
// latest template and is available.
func rolledOut(d *appsv1.Deployment) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == *d.Spec.Replicas &&
		s.Replicas == *d.Spec.Replicas && s.AvailableReplicas == *d.Spec.Replicas
}

// leaderOf returns the Setpoint etcd's leader, waiting for an election.
func leaderOf(t *testing.T, svc *service) int {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		i, err := svc.etcd.Leader(ctx)
		if err == nil {
			return i
		}
		if ctx.Err() != nil {
			t.Errorf("no etcd leader: %v", err)
			return 0
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }
