package ha

import (
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/test/internal/acked"
)

var (
	duration = flag.Duration("ha.duration", 0, "load this long with faults at random moments (0: CI's short run, one fault of each kind)")
	workers  = flag.Int("ha.workers", 6, "concurrent callers, each spreading its calls over the servers")
	seed     = flag.Uint64("ha.seed", 0, "random seed of the faults (0: from the clock)")
	checkFor = flag.Duration("ha.check-timeout", time.Minute, "how long the linearizability checker may take for one target")
	skew     = flag.Duration("ha.skew", 2*time.Second, "the servers' clocks are this much behind, right and ahead of the test's")
)

// binary is the setpoint-server binary TestMain built.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	// The testclock build reads SETPOINT_TEST_CLOCK_OFFSET: the servers
	// run with different clocks.
	os.Exit(acked.Main(m, &binary, "testclock"))
}

// TestFaultsUnderLoad: under load spread over three servers whose clocks
// disagree (-ha.skew), a server is killed and restarted, an etcd member is
// killed and restarted, the etcd leader is killed (and restarted), a
// server is partitioned from etcd (and healed); nothing acknowledged is
// lost, each target's history is linearizable, its decisions are stamped
// in the order they were recorded, and the partitioned server answers
// nothing while it cannot reach etcd and tells its health.
func TestFaultsUnderLoad(t *testing.T) {
	rng := acked.Seeded(t, *seed, "ha.seed")
	c := startClusterWith(t, skewed(*skew), rng.IntN(3))
	c.checkClocks(t)
	const readers = 2
	var clients [][]*setpointclient.Client
	for range *workers + readers {
		clients = append(clients, c.dial(t))
	}
	l := startLoad(c, clients, readers)
	all, err := setpointclient.Dial(c.addrs(), setpointclient.Options{DialOptions: []grpc.DialOption{grpc.WithConnectParams(acked.FastReconnect)}})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	r := startResumes(c, c.dial(t), all)
	f := &faults{t: t, c: c, l: l, rng: rng}
	f.settle(2 * time.Second)
	if *duration == 0 {
		f.killServer()
		f.killMember(false)
		f.killMember(true)
		f.partition()
		f.pauseMember(false)
		f.pauseMember(true)
		f.slowMember(true)
		f.slowMember(false)
		f.pauseServer()
		f.slowDisk(true)
		f.slowDisk(false)
	} else {
		for end := time.Now().Add(*duration); time.Now().Before(end); {
			switch rng.IntN(11) {
			case 0:
				f.killServer()
			case 1:
				f.killMember(false)
			case 2:
				f.killMember(true)
			case 3:
				f.partition()
			case 4:
				f.pauseMember(false)
			case 5:
				f.pauseMember(true)
			case 6:
				f.slowMember(true)
			case 7:
				f.slowMember(false)
			case 8:
				f.slowDisk(true)
			case 9:
				f.slowDisk(false)
			default:
				f.pauseServer()
			}
		}
	}
	r.Stop()
	l.Stop()
	t.Logf("load ran %v", time.Since(l.hist.began).Round(time.Millisecond))
	for _, e := range l.errs {
		t.Errorf("the load's own mistake: %s", e)
	}
	t.Logf("faults: %d server kills, %d etcd member kills, %d etcd leader kills, %d partitions of a server from etcd, %d gray failures (pauses, blackholes, delays)", f.servers, f.members, f.leaders, f.partitions, f.grays)
	f.logGaps()
	r.check(t)
	t.Logf("load: %d Recommend and %d Observe acknowledged, %d Observe refused (a later decision came first), %d calls of unknown outcome, %d reads",
		l.count.recommends.Load(), l.count.observes.Load(), l.count.refused.Load(), l.count.unknown.Load(), l.count.reads.Load())
	t.Logf("calls of unknown outcome by status: %v", l.count.byCode)
	for _, o := range l.count.odd {
		t.Logf("failed otherwise than a fault should: %s", o)
	}
	if len(l.count.odd) > 0 {
		for _, w := range f.windows {
			t.Logf("%s from %v to %v into the run", w.what, time.Duration(w.from).Round(time.Millisecond), time.Duration(w.to).Round(time.Millisecond))
		}
	}
	for code, n := range l.count.byCode {
		// A fault is UNAVAILABLE (the server or etcd away) or the caller's
		// deadline (etcd or a partition holding the call), never an
		// internal error.
		if code != codes.Unavailable && code != codes.DeadlineExceeded {
			t.Errorf("%d calls failed with %v: a fault should answer UNAVAILABLE or leave the call to its deadline", n, code)
		}
	}
	began := time.Now()
	check(t, l)
	f.checkCuts()
	checkStamps(t, l)
	t.Logf("checks took %v", time.Since(began).Round(time.Millisecond))
}

// faults injects faults into a cluster under load, one at a time, each
// healed before the next.
type faults struct {
	t   *testing.T
	c   *cluster
	l   *load
	rng *rand.Rand

	servers, members, leaders, partitions, grays int
	windows                                      []window
	cuts                                         []cut
}

// window is when a fault lasted, in the history's time.
type window struct {
	what     string
	from, to int64
}

// down is how long a fault lasts: a second in CI, up to three in a long
// run.
func (f *faults) down() time.Duration {
	if *duration == 0 {
		return time.Second
	}
	return time.Duration(500+f.rng.IntN(2500)) * time.Millisecond
}

// acked is the number of acknowledged calls so far.
func (f *faults) acked() int64 { return f.l.count.recommends.Load() + f.l.count.observes.Load() }

// settle lets the load run for at least d and until it has made progress
// since the last fault was healed (it fails the test when it makes none
// within 30 s).
func (f *faults) settle(d time.Duration) {
	f.t.Helper()
	before := f.acked()
	time.Sleep(d)
	for deadline := time.Now().Add(30 * time.Second); f.acked() < before+20; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatalf("the load made no progress within 30 s of the last fault's end (%d calls acknowledged)", f.acked()-before)
		}
	}
}

// killServer kills a random server with SIGKILL and starts it again: the
// other two serve meanwhile.
func (f *faults) killServer() {
	f.t.Helper()
	i := f.rng.IntN(servers)
	before, from := f.acked(), f.l.hist.now()
	f.c.kill(i)
	d := f.down()
	time.Sleep(d)
	during := f.acked() - before
	took := f.c.restart(f.t, i)
	f.windows = append(f.windows, window{"a server kill", from, f.l.hist.now()})
	f.servers++
	f.t.Logf("server %d killed for %v: %d calls acknowledged meanwhile; restarted in %v", i, d, during, took)
	if during == 0 {
		f.t.Errorf("no call was acknowledged in the %v server %d was down: the other servers should serve", d, i)
	}
	f.settle(f.down())
}

// killMember kills an etcd member, the leader or another, and starts it
// again: with two of three members the store keeps serving.
func (f *faults) killMember(leader bool) {
	f.t.Helper()
	i := f.c.leader(f.t)
	if !leader {
		i = (i + 1 + f.rng.IntN(2)) % 3
	}
	before, began, from := f.acked(), time.Now(), f.l.hist.now()
	f.c.etcd.Kill(i)
	what := "etcd member"
	if leader {
		what = "etcd leader"
		next := f.c.leader(f.t)
		f.t.Logf("etcd leader m%d killed; m%d elected after %v", i, next, time.Since(began).Round(time.Millisecond))
	}
	d := f.down()
	time.Sleep(d)
	during := f.acked() - before
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.c.etcd.Restart(ctx, i); err != nil {
		f.t.Fatal(err)
	}
	f.t.Logf("%s m%d down for %v: %d calls acknowledged meanwhile; restarted", what, i, time.Since(began).Round(time.Millisecond), during)
	f.windows = append(f.windows, window{map[bool]string{false: "an etcd member kill", true: "an etcd leader kill"}[leader], from, f.l.hist.now()})
	if leader {
		f.leaders++
	} else {
		f.members++
		if during == 0 {
			f.t.Errorf("no call was acknowledged in the %v etcd member m%d was down: two of three members should serve", d, i)
		}
	}
	f.settle(f.down())
}

// logGaps logs, for each kind of fault, the longest time in which no call
// was acknowledged while a fault of that kind lasted: how long the service
// was unavailable to a caller that tries every server.
func (f *faults) logGaps() {
	var acks []int64
	for _, calls := range f.l.hist.calls {
		for _, c := range calls {
			if (c.in.kind == recommend || c.in.kind == observe) && !c.out.unknown && !c.out.refused {
				acks = append(acks, c.end)
			}
		}
	}
	slices.Sort(acks)
	longest := map[string]time.Duration{}
	ratio := map[string]float64{}
	var kinds []string
	for _, w := range f.windows {
		if _, ok := longest[w.what]; !ok {
			kinds = append(kinds, w.what)
			ratio[w.what] = 1e9
		}
		var gap int64
		for i := 1; i < len(acks); i++ {
			if acks[i] >= w.from && acks[i-1] <= w.to {
				gap = max(gap, acks[i]-max(acks[i-1], w.from))
			}
		}
		longest[w.what] = max(longest[w.what], time.Duration(gap))
		if during, before := rates(acks, w); before > 0 {
			ratio[w.what] = min(ratio[w.what], during/before)
		}
	}
	for _, k := range kinds {
		f.t.Logf("longest time without an acknowledged call during %s: %v; the lowest throughput during one, against the 2 s before it: %.0f%%",
			k, longest[k].Round(time.Millisecond), 100*ratio[k])
		if slices.Contains(grayKinds, k) && longest[k] > grayStallBound {
			f.t.Errorf("%v without an acknowledged call during %s: the servers should route around the member within about a second (bound %v)", longest[k].Round(time.Millisecond), k, grayStallBound)
		}
	}
}

// check reads every target from every server once the load has stopped,
// then checks that every acknowledged call is there and that each
// target's history is linearizable.
func check(t *testing.T, l *load) {
	t.Helper()
	clients := l.c.dial(t)
	h := l.hist
	final := map[string][]*setpointv1.Target{}
	lastRead := map[string]call{}
	var found, lost, disordered int
	for k, name := range h.targets {
		for s, cl := range clients {
			c, ok := finalRead(l, name, cl, s)
			if !ok {
				t.Fatalf("GetTarget %s from server %d failed after the faults", name, s)
			}
			h.add(name, c.call)
			final[name] = append(final[name], c.target)
			lastRead[name] = c.call
		}
		log := decisionLog(t, clients[k%servers], name)
		f, l := checkAcked(t, name, h.calls[name], final[name], log)
		found, lost = found+f, lost+l
		if d := disorder(final[name], log); len(d) > 0 {
			if disordered++; disordered <= 5 {
				t.Errorf("%s: decisions out of order:\n  %s", name, strings.Join(d, "\n  "))
			} else {
				t.Errorf("%s: decisions out of order", name)
			}
		}
	}
	t.Logf("acknowledged calls looked up on every server (and Recommends in the decision log): %d found, %d lost, over %d targets", found, lost, len(h.targets))
	t.Logf("decision order: %d of %d targets with decisions stamped out of the order of their history or decision log", disordered, len(h.targets))
	var checked, illegal int
	began := time.Now()
	for _, name := range h.targets {
		calls := h.calls[name]
		proposalOf := map[string]int32{}
		for _, c := range calls {
			if c.in.kind == recommend && c.id != "" {
				proposalOf[c.id] = c.in.p
			}
		}
		ops, model, err := operations(calls, lastRead[name], proposalOf)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		res, info := porcupine.CheckOperationsVerbose(model, ops, *checkFor)
		checked++
		switch res {
		case porcupine.Illegal:
			illegal++
			slices.SortFunc(calls, func(a, b call) int { return int(a.start - b.start) })
			path := filepath.Join(t.ArtifactDir(), name+".html")
			if err := porcupine.VisualizePath(model, info, path); err != nil {
				t.Log(err)
			}
			if illegal > 3 {
				t.Errorf("%s: the history is not linearizable (porcupine's picture: %s)", name, path)
				continue
			}
			t.Errorf("%s: the history is not linearizable (porcupine's picture: %s); its calls:\n%s", name, path, explain(calls))
		case porcupine.Unknown:
			t.Logf("%s: the checker gave up after %v", name, *checkFor)
		}
	}
	t.Logf("linearizability: %d targets checked in %v, %d not linearizable", checked, time.Since(began).Round(time.Millisecond), illegal)
}

// finalCall is a final read: the recorded call and what it returned.
type finalCall struct {
	call   call
	target *setpointv1.Target
}

// finalRead reads name from server s, retrying a few times; a target the
// server does not have reads as empty.
func finalRead(l *load, name string, cl *setpointclient.Client, s int) (finalCall, bool) {
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		c := call{client: 2000 + s, in: input{kind: read}, server: s}
		c.start = l.hist.now()
		resp, err := cl.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key(name)})
		c.end = l.hist.now()
		cancel()
		if err == nil || status.Code(err) == codes.NotFound { // a lost target reads as empty
			c.readRecs, c.readIDs = seen(resp.GetTarget())
			return finalCall{c, resp.GetTarget()}, true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return finalCall{}, false
}

// decisionLog is name's whole decision log, as ListDecisions pages it.
func decisionLog(t *testing.T, cl *setpointclient.Client, name string) []*setpointv1.LoggedDecision {
	t.Helper()
	var out []*setpointv1.LoggedDecision
	for token := ""; ; {
		resp, err := cl.ListDecisions(t.Context(), &setpointv1.ListDecisionsRequest{Target: key(name), PageToken: token})
		if err != nil {
			t.Fatalf("ListDecisions %s: %v", name, err)
		}
		out = append(out, resp.GetDecisions()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out
		}
	}
}

// checkAcked checks that every acknowledged Recommend of a target is in
// its history on every server (its proposal at its decision time) and in
// its decision log, and that every acknowledged Observe left its Applied
// event on every server. It returns how many look-ups found the call and
// how many did not.
func checkAcked(t *testing.T, name string, calls []call, final []*setpointv1.Target, log []*setpointv1.LoggedDecision) (found, lost int) {
	t.Helper()
	miss := func(format string, args ...any) {
		lost++
		if lost <= 20 {
			t.Errorf("LOST: "+format, args...)
		}
	}
	idOf := map[int32]string{}
	for _, c := range calls {
		if c.in.kind != recommend || c.out.unknown {
			continue
		}
		idOf[c.in.p] = c.id
		for s, tg := range final {
			if !slices.ContainsFunc(tg.GetHistory().GetRecommendations(), func(r *setpointv1.Recommendation) bool {
				return r.GetReplicas() == c.in.p && r.GetTime().AsTime().UnixNano() == c.at
			}) {
				miss("acknowledged Recommend of %s (proposal %d, decision %s at %d ns, via server %d) is not in the history read from server %d",
					name, c.in.p, c.id, c.at, c.server, s)
			} else {
				found++
			}
		}
		if !slices.ContainsFunc(log, func(d *setpointv1.LoggedDecision) bool {
			return d.GetDecisionTime().AsTime().UnixNano() == c.at && d.GetDesiredReplicas() == c.out.desired
		}) {
			miss("acknowledged Recommend of %s (proposal %d, decision %s at %d ns, desired %d) is not in the decision log",
				name, c.in.p, c.id, c.at, c.out.desired)
		} else {
			found++
		}
	}
	for _, c := range calls {
		if c.in.kind != observe || c.out.unknown || c.out.refused {
			continue
		}
		for s, tg := range final {
			if !slices.ContainsFunc(tg.GetEvents(), func(e *setpointv1.Event) bool {
				return e.GetKind() == "Applied" && e.GetDecisionId() == idOf[c.in.p]
			}) {
				miss("acknowledged Observe of %s (decision %s, proposal %d, via server %d) left no Applied event on server %d",
					name, idOf[c.in.p], c.in.p, c.server, s)
			} else {
				found++
			}
		}
	}
	return found, lost
}
