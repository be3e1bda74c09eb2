package ha

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

const (
	// replicas is the load's current replica count (and the maximum): above
	// every proposal, so that each decision scales down to the largest
	// proposal of the stabilization window (model_test.go).
	replicas = 1000
	// perTarget is how many load Recommends a target gets before its lane
	// moves on to a fresh one: fewer Applied events than the store keeps
	// (64), so that a read sees every one.
	perTarget = 40
	// callTimeout bounds each call of the load.
	callTimeout = 5 * time.Second
)

// proposal is the proposal of a target's j-th load Recommend: perTarget
// distinct values in 2…782, in an order that goes up and down, so that the
// decisions tell which calls came before them. All are below 90% of
// replicas, outside the tolerance.
func proposal(j int) int32 { return int32(2 + (j*17%perTarget)*20) }

// key is the key of a target of these tests.
func key(name string) *setpointv1.TargetKey {
	return &setpointv1.TargetKey{Cluster: "ha", Namespace: "ns", Name: name}
}

// request is a Recommend for target name at n replicas whose one External
// metric (target average value 1) totals value: the proposal is value,
// unless value/n is within the tolerance of 1, when it is n.
func request(name string, n, value int32) *setpointv1.RecommendRequest {
	return &setpointv1.RecommendRequest{
		Target: key(name),
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    testkit.Ptr[int32](1),
			MaxReplicas:    replicas,
			Metrics: []*setpointv1.MetricSpec{{Type: "External", External: &setpointv1.ExternalMetricSource{
				Metric: &setpointv1.MetricIdentifier{Name: "queue_depth"},
				Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "1"},
			}}},
		},
		// An hour's window keeps every proposal of a run in the history.
		Settings: &setpointv1.ControllerSettings{DownscaleStabilizationWindow: durationpb.New(time.Hour)},
		Scale:    &setpointv1.Scale{Replicas: n, StatusReplicas: n, Selector: "app=" + name},
		Observations: []*setpointv1.MetricObservation{{Values: []*setpointv1.MetricValue{{
			Value: strconv.Itoa(int(value)), Timestamp: timestamppb.Now(),
		}}}},
	}
}

// history is every call of a run, by target; safe for concurrent use.
type history struct {
	began time.Time

	mu      sync.Mutex
	calls   map[string][]call
	targets []string // in the order they were set up
}

func newHistory() *history { return &history{began: time.Now(), calls: map[string][]call{}} }

// now is the time since the run began, in nanoseconds (monotonic).
func (h *history) now() int64 { return time.Since(h.began).Nanoseconds() }

func (h *history) add(target string, c call) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[target] = append(h.calls[target], c)
}

// lane is a sequence of targets that several callers work on together,
// perTarget Recommends each: concurrent calls for one target, from
// different callers through different servers.
type lane struct {
	name  string
	mu    sync.Mutex
	n     int // load Recommends handed out
	ready int // targets set up
}

func (l *lane) target(k int) string { return fmt.Sprintf("%s-t%d", l.name, k) }

// current is the target the lane's callers work on; false before the
// first.
func (l *lane) current() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ready == 0 {
		return "", false
	}
	return l.target(l.ready - 1), true
}

// counters count the load's outcomes.
type counters struct {
	recommends, observes, refused, unknown, reads atomic.Int64

	mu     sync.Mutex
	byCode map[codes.Code]int // calls of unknown outcome, by status code
	// odd are the first calls that failed otherwise than a fault should
	// (UNAVAILABLE, DEADLINE_EXCEEDED): what, where, when, the error.
	odd []string
}

// load is callers and readers working until stop.
type load struct {
	c     *cluster
	hist  *history
	lanes []*lane
	count counters
	stop  chan struct{}
	wg    sync.WaitGroup

	errMu sync.Mutex
	errs  []string // answers that show a mistake of the test's own
}

// startLoad starts callers (each with its own connection to every server)
// in lanes of about three, and readers.
func startLoad(c *cluster, clients [][]*setpointclient.Client, readers int) *load {
	l := &load{c: c, hist: newHistory(), stop: make(chan struct{})}
	for i := range max(1, (len(clients)-readers)/servers) {
		l.lanes = append(l.lanes, &lane{name: fmt.Sprintf("l%d", i)})
	}
	for w, cl := range clients[:len(clients)-readers] {
		l.wg.Go(func() { l.work(w, cl) })
	}
	for r, cl := range clients[len(clients)-readers:] {
		l.wg.Go(func() { l.readLoop(r, cl) })
	}
	return l
}

// Stop stops the callers and readers and waits for them.
func (l *load) Stop() {
	close(l.stop)
	l.wg.Wait()
}

func (l *load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *load) mistake(format string, args ...any) {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// next hands out lane ln's next load Recommend: its target and proposal.
// The first caller to reach a target sets it up: one acknowledged
// Recommend at 1 replica (proposal 1, which reads leave out), so that the
// history the load's decisions stabilize over starts below every proposal.
func (l *load) next(ln *lane, clients []*setpointclient.Client) (string, int32, bool) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	k := ln.n / perTarget
	for ln.ready <= k {
		name := ln.target(ln.ready)
		for i := 0; ; i++ {
			if l.stopped() {
				return "", 0, false
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			_, err := clients[i%servers].Recommend(ctx, request(name, 1, 1))
			cancel()
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		l.hist.mu.Lock()
		l.hist.targets = append(l.hist.targets, name)
		l.hist.mu.Unlock()
		ln.ready++
	}
	j := ln.n % perTarget
	ln.n++
	return ln.target(k), proposal(j), true
}

// work is caller w: Recommend, then Observe(applied) of the decision
// through the next server, recording both.
func (l *load) work(w int, clients []*setpointclient.Client) {
	ln := l.lanes[w%len(l.lanes)]
	for i := 0; !l.stopped(); i++ {
		name, p, ok := l.next(ln, clients)
		if !ok {
			return
		}
		s := (w + i) % servers
		c := call{client: w, in: input{kind: recommend, p: p}, server: s}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		c.start = l.hist.now()
		resp, err := clients[s].Recommend(ctx, request(name, replicas, p))
		c.end = l.hist.now()
		cancel()
		if err != nil {
			if l.failed(name, &c, err) {
				time.Sleep(5 * time.Millisecond)
			}
			continue
		}
		d := resp.GetDecision()
		c.out.desired, c.id, c.at = d.GetDesiredReplicas(), d.GetDecisionId(), d.GetDecisionTime().AsTime().UnixNano()
		l.hist.add(name, c)
		l.count.recommends.Add(1)

		s = (s + 1) % servers
		o := call{client: w, in: input{kind: observe, p: p}, server: s}
		ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
		o.start = l.hist.now()
		_, err = clients[s].Observe(ctx, &setpointv1.ObserveRequest{
			Target: key(name), DecisionId: c.id,
			Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: replicas, To: c.out.desired}},
		})
		o.end = l.hist.now()
		cancel()
		switch {
		case err == nil:
			l.hist.add(name, o)
			l.count.observes.Add(1)
		case status.Code(err) == codes.InvalidArgument:
			// Another decision came after this one: the model says when
			// that may be.
			o.out.refused = true
			l.hist.add(name, o)
			l.count.refused.Add(1)
		default:
			l.failed(name, &o, err)
		}
	}
}

// failed records a call that failed: of unknown outcome, unless the
// answer says it was never carried out. It reports whether the server
// seemed away (so the caller backs off a moment).
func (l *load) failed(name string, c *call, err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument:
		l.mistake("%s to server %d: %v", describe(c.in, c.out), c.server, err)
		return false
	case codes.ResourceExhausted: // refused before it was carried out
		return true
	}
	c.out.unknown = true
	l.hist.add(name, *c)
	l.count.unknown.Add(1)
	l.count.mu.Lock()
	if l.count.byCode == nil {
		l.count.byCode = map[codes.Code]int{}
	}
	l.count.byCode[status.Code(err)]++
	if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded && len(l.count.odd) < 10 {
		l.count.odd = append(l.count.odd, fmt.Sprintf("%s to server %d, %v into the run: %v", describe(c.in, c.out), c.server, time.Since(l.hist.began).Round(time.Millisecond), err))
	}
	l.count.mu.Unlock()
	return true
}

// readLoop is reader r: GetTarget of a lane's current target from a
// random server, over and over.
func (l *load) readLoop(r int, clients []*setpointclient.Client) {
	rng := rand.New(rand.NewPCG(uint64(r), 14))
	for !l.stopped() {
		name, ok := l.lanes[rng.IntN(len(l.lanes))].current()
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s := rng.IntN(servers)
		if c, ok := l.read(name, clients[s], 1000+r, s); ok {
			l.hist.add(name, c)
			l.count.reads.Add(1)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// read is one GetTarget of name as a recorded call; false when it failed
// (a read that failed has no effect to check).
func (l *load) read(name string, cl *setpointclient.Client, client, server int) (call, bool) {
	c := call{client: client, in: input{kind: read}, server: server}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c.start = l.hist.now()
	resp, err := cl.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key(name)})
	c.end = l.hist.now()
	if err != nil && status.Code(err) != codes.NotFound { // a lost target reads as empty
		return c, false
	}
	c.readRecs, c.readIDs = seen(resp.GetTarget())
	return c, true
}

// seen is what a read of t says in the model's terms: the history's
// proposals (without the setup's, 1) and the Applied events' decisions.
func seen(t *setpointv1.Target) (recs []int32, applied []string) {
	for _, r := range t.GetHistory().GetRecommendations() {
		if r.GetReplicas() != 1 {
			recs = append(recs, r.GetReplicas())
		}
	}
	for _, e := range t.GetEvents() {
		if e.GetKind() == "Applied" {
			applied = append(applied, e.GetDecisionId())
		}
	}
	return recs, applied
}
