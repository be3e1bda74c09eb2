package ha

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// This file holds the gray failures: parts that hang or slow down instead
// of crashing. A member is paused with SIGSTOP (a paused VM, a disk that
// stopped answering), or its proxies on every server's link blackhole or
// delay its traffic (a network dropping or queueing packets), or its disk
// turns slow (its data is on slowfs, whose fsync then takes seconds: the
// process still answers, keepalives included); a server is paused and
// continued. Each must leave the fleet acknowledging writes.

// Bounds the CI run asserts for an etcd member's gray failure; the tight
// figures come from `make chaos` (docs/reliability.md). The target is 2 s
// without an acknowledged write; a loaded 2-core CI machine gets margin.
const (
	grayStallBound = 5 * time.Second
)

// grayDown is how long a gray failure lasts: 3 s in CI (longer than an
// etcd election, 1 s), 15 s in a long run (the acceptance's figure).
func (f *faults) grayDown() time.Duration {
	if *duration == 0 {
		return 3 * time.Second
	}
	return 15 * time.Second
}

// slowFsync is how long each fsync of the slow-disk member takes during
// its fault: twice etcd's election timeout (1 s), so that a leader on it
// misses its heartbeats and a follower answers nothing linearizable in
// the store's probe timeout (750 ms), as a disk that barely answers does.
const slowFsync = 2 * time.Second

// grayKinds are the windows' names of the etcd members' gray failures.
var grayKinds = []string{"an etcd leader pause", "an etcd member pause", "an etcd member blackholed", "an etcd member delayed", "an etcd leader's disk slow", "an etcd member's disk slow"}

// pauseMember stops an etcd member, the leader or another, with SIGSTOP
// for grayDown, then continues it.
func (f *faults) pauseMember(leader bool) {
	f.t.Helper()
	i := f.c.leader(f.t)
	if !leader {
		i = (i + 1 + f.rng.IntN(2)) % 3
	}
	what := map[bool]string{false: "an etcd member pause", true: "an etcd leader pause"}[leader]
	from := f.l.hist.now()
	if err := f.c.etcd.Pause(i); err != nil {
		f.t.Fatal(err)
	}
	d := f.grayDown()
	time.Sleep(d)
	if err := f.c.etcd.Resume(i); err != nil {
		f.t.Fatal(err)
	}
	f.gray(what, fmt.Sprintf("m%d", i), from, d)
}

// slowMember makes an etcd member unreachable to every server (its
// proxies hold every byte: blackhole) or slow (each chunk held a second
// each way) for grayDown, then heals it.
func (f *faults) slowMember(blackhole bool) {
	f.t.Helper()
	i := f.rng.IntN(3)
	what := map[bool]string{false: "an etcd member delayed", true: "an etcd member blackholed"}[blackhole]
	from := f.l.hist.now()
	for _, n := range f.c.nodes {
		if blackhole {
			n.link.Member(i).Cut()
		} else {
			n.link.Member(i).Delay(time.Second)
		}
	}
	d := f.grayDown()
	time.Sleep(d)
	for _, n := range f.c.nodes {
		n.link.Member(i).Delay(0)
		n.link.Member(i).Heal()
	}
	f.gray(what, fmt.Sprintf("m%d", i), from, d)
}

// slowDisk makes every fsync of the member on slowfs take slowFsync for
// grayDown, then heals it; that member leads during the fault, or (leader
// false) another does. Without a slow-disk member (no root) it does
// nothing.
func (f *faults) slowDisk(leader bool) {
	f.t.Helper()
	if f.c.disk == nil {
		return
	}
	i := f.c.slowDisk
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	to := i
	if !leader {
		to = (i + 1 + f.rng.IntN(2)) % 3
	}
	if err := f.c.etcd.MoveLeader(ctx, to); err != nil {
		f.t.Fatal(err)
	}
	// The leadership transfer is not the fault: the 2 s before the fault,
	// against which its throughput is measured, start after it.
	f.settle(3 * time.Second)
	what := map[bool]string{false: "an etcd member's disk slow", true: "an etcd leader's disk slow"}[leader]
	_, delayedBefore := f.c.disk.Stats()
	from := f.l.hist.now()
	f.c.disk.SetDelay(slowFsync)
	d := f.grayDown()
	time.Sleep(d)
	f.c.disk.SetDelay(0)
	syncs, delayed := f.c.disk.Stats()
	if delayed == delayedBefore {
		f.t.Errorf("no fsync of m%d was delayed during %s: its disk was not in its way (fsyncs so far: %d)", i, what, syncs)
	}
	f.t.Logf("%s: m%d's fsyncs took %v each, %d of them delayed", what, i, slowFsync, delayed-delayedBefore)
	f.gray(what, fmt.Sprintf("m%d", i), from, d)
}

// pauseServer stops a server with SIGSTOP for down, then continues it.
// Its callers' calls wait on it (a client cannot tell a paused server from
// a slow one before its deadline); the other servers serve meanwhile.
func (f *faults) pauseServer() {
	f.t.Helper()
	i := f.rng.IntN(servers)
	n := f.c.nodes[i]
	from := f.l.hist.now()
	signal := func(sig syscall.Signal) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.proc != nil {
			_ = n.proc.Process.Signal(sig)
		}
	}
	signal(syscall.SIGSTOP)
	d := f.down()
	time.Sleep(d)
	signal(syscall.SIGCONT)
	f.windows = append(f.windows, window{"a server pause", from, f.l.hist.now()})
	f.grays++
	f.t.Logf("server %d paused for %v", i, d)
	f.settle(f.down())
}

// gray records the window of a member's gray failure and checks that
// every server acknowledged calls during it.
func (f *faults) gray(what, member string, from int64, d time.Duration) {
	f.t.Helper()
	to := f.l.hist.now()
	f.windows = append(f.windows, window{what, from, to})
	f.grays++
	by := f.l.ackedBy(from, to)
	// The member caught up before the next fault: two members behind at
	// once would be two faults, and no quorum.
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.c.etcd.WaitInSync(ctx); err != nil {
		f.t.Fatal(err)
	}
	f.t.Logf("%s (%s) for %v: acknowledged by server %v; the members in sync %v later", what, member, d, by, time.Since(began).Round(time.Millisecond))
	for s, n := range by {
		if n == 0 {
			f.t.Errorf("server %d acknowledged no call during %s (%s, %v): every server should route around one member", s, what, member, d)
		}
	}
	f.settle(f.down())
}

// ackedBy counts the acknowledged Recommends and Observes that ended in
// [from, to], by server.
func (l *load) ackedBy(from, to int64) [servers]int {
	l.hist.mu.Lock()
	defer l.hist.mu.Unlock()
	var out [servers]int
	for _, calls := range l.hist.calls {
		for _, c := range calls {
			if (c.in.kind == recommend || c.in.kind == observe) && !c.out.unknown && !c.out.refused && c.end >= from && c.end <= to {
				out[c.server]++
			}
		}
	}
	return out
}

// rates returns, for a fault's window, the acknowledged calls per second
// during it and in the 2 s before it, from acks (sorted end times).
func rates(acks []int64, w window) (during, before float64) {
	count := func(from, to int64) int {
		return len(acks[firstAt(acks, from):firstAt(acks, to)])
	}
	const lead = int64(2 * time.Second)
	during = float64(count(w.from, w.to)) / (float64(w.to-w.from) / 1e9)
	before = float64(count(w.from-lead, w.from)) / (float64(lead) / 1e9)
	return during, before
}

// firstAt is the index of the first of acks at or after t.
func firstAt(acks []int64, t int64) int {
	i, _ := slices.BinarySearch(acks, t)
	return i
}

// resumes moves Watch streams between servers while the faults run: a
// stream follows one server, and at each change (at most every 20 ms) a
// second Watch resumes from that change's revision on another server,
// whose feed may be behind. A resume point one server gave out is still
// kept (nothing is compacted here), so none may answer OUT_OF_RANGE.
// Meanwhile a client of all three servers follows the feed with Changes,
// which must not end while a server serves.
type resumes struct {
	mu      sync.Mutex
	total   int
	byCode  map[codes.Code]int
	changes int    // changes the following client got
	ended   error  // what ended the following client's Changes early
	order   string // the first revision it got out of order
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// startResumes starts the resuming streams on clients (one per server)
// and the following client, dialed to every server.
func startResumes(c *cluster, clients []*setpointclient.Client, all *setpointclient.Client) *resumes {
	ctx, cancel := context.WithCancel(context.Background())
	r := &resumes{byCode: map[codes.Code]int{}, stop: cancel}
	r.wg.Go(func() { r.hop(ctx, clients) })
	r.wg.Go(func() { r.follow(ctx, all) })
	return r
}

// Stop stops the streams and waits for them.
func (r *resumes) Stop() {
	r.stop()
	r.wg.Wait()
}

// hop is the resuming loop.
func (r *resumes) hop(ctx context.Context, clients []*setpointclient.Client) {
	rng := rand.New(rand.NewPCG(31, 31))
	for s := 0; ctx.Err() == nil; s = (s + 1) % servers {
		stream, err := clients[s].Watch(ctx, &setpointv1.WatchRequest{})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		last := time.Time{}
		for {
			ch, err := stream.Recv()
			if err != nil {
				break // the server went away: follow the next one
			}
			if time.Since(last) < 20*time.Millisecond {
				continue
			}
			last = time.Now()
			other := (s + 1 + rng.IntN(servers-1)) % servers
			r.record(resume(ctx, clients[other], ch.GetRevision()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// resume opens a Watch on cl from rev and returns the code of its start:
// OK once the server sent the stream's header.
func resume(ctx context.Context, cl *setpointclient.Client, rev uint64) codes.Code {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	stream, err := cl.Watch(ctx, &setpointv1.WatchRequest{ResumeAfter: rev})
	if err != nil {
		return status.Code(err)
	}
	if md, err := stream.Header(); err == nil && len(md.Get("setpoint-revision")) == 1 {
		if got, _ := strconv.ParseUint(md.Get("setpoint-revision")[0], 10, 64); got != rev {
			return codes.DataLoss // it started elsewhere than asked: counted as a mistake
		}
		return codes.OK
	}
	_, err = stream.Recv()
	return status.Code(err)
}

func (r *resumes) record(code codes.Code) {
	if code == codes.Canceled {
		return // the run ended
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	r.byCode[code]++
}

// follow runs Changes on the client of every server until ctx ends.
func (r *resumes) follow(ctx context.Context, all *setpointclient.Client) {
	var prev uint64
	for ch, err := range all.Changes(ctx, &setpointv1.WatchRequest{}) {
		r.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				r.ended = err
			}
			r.mu.Unlock()
			return
		}
		r.changes++
		if ch.GetRevision() <= prev && r.order == "" {
			r.order = fmt.Sprintf("revision %d after %d", ch.GetRevision(), prev)
		}
		prev = ch.GetRevision()
		r.mu.Unlock()
	}
}

// check fails t when a resume answered OUT_OF_RANGE or started elsewhere,
// or the following client's Changes ended or went out of order.
func (r *resumes) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("cross-server Watch resumes: %d, by code %v; the client of every server followed %d changes", r.total, r.byCode, r.changes)
	if n := r.byCode[codes.OutOfRange]; n > 0 {
		t.Errorf("%d of %d resumes from a point another server gave out answered OUT_OF_RANGE: the point is kept", n, r.total)
	}
	if n := r.byCode[codes.DataLoss]; n > 0 {
		t.Errorf("%d resumes started from another revision than asked", n)
	}
	if r.total == 0 {
		t.Error("no Watch was resumed across servers")
	}
	if r.ended != nil {
		t.Errorf("the client following every server stopped: %v", r.ended)
	}
	if r.order != "" {
		t.Errorf("the client following every server got %s", r.order)
	}
	if r.changes == 0 {
		t.Error("the client following every server got no change")
	}
}
