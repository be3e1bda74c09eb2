package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// This file is how the store reaches etcd. A member that hangs keeps its
// TCP connection open and answers nothing, so neither the gRPC balancer nor
// keepalives (at least 10 s in gRPC) notice it soon. The store therefore
// sends each request over its own connection to one member, chosen
// round-robin among the healthy ones, and probes every member every
// ProbeInterval with a linearizable read that must answer within
// ProbeTimeout (it needs the member to have a leader, and that leader to
// answer). A member that fails a probe gets no new requests until one
// succeeds, and the requests it holds are cancelled (also, once a new
// leader is elected, those that began under the old one), to be tried on
// another member or answered as the package doc says. Every request also
// has a per-attempt bound, Options.RequestTimeout, and asks for a member
// with a leader (clientv3.WithRequireLeader), so that a member without one
// refuses at once instead of holding it. Writes go to the leader when it is
// healthy (a probe that sees a new term asks its member whether it leads):
// a write sent to a follower costs the members a forward to the leader
// (docs/benchmarks.md, "etcd: batched writes"). A write whose proposal raft
// dropped (during a leadership transfer) was not applied either: it is
// tried on another member too, and answers UNAVAILABLE when none took it.

// member is one etcd endpoint and the store's own connection to it.
type member struct {
	endpoint string
	conn     *grpc.ClientConn
	kv       clientv3.KV
	watcher  clientv3.Watcher
	maint    pb.MaintenanceClient

	mu       sync.Mutex
	healthy  bool
	term     uint64 // the raft term its last answered probe saw
	inflight map[*attempt]struct{}
}

// attempt is one request or feed watch on one member: when it began and
// how to end it.
type attempt struct {
	began  time.Time
	watch  bool
	cancel context.CancelFunc
}

// members are the cluster's members as the store reaches them.
type members struct {
	all    []*member
	next   atomic.Uint64
	leader atomic.Pointer[member] // the member that last said it leads
	every  time.Duration          // probe interval
	within time.Duration          // probe timeout
	bound  time.Duration          // per-attempt bound of a request
	probe  string                 // the key a probe reads
	log    *slog.Logger
}

// dialMembers opens a connection to each of cli's endpoints, with cli's
// credentials and dial options; every member starts healthy.
func dialMembers(cli *clientv3.Client, opts Options, probeKey string) (*members, error) {
	ms := &members{every: opts.ProbeInterval, within: opts.ProbeTimeout, bound: opts.RequestTimeout, probe: probeKey, log: opts.Logger}
	for _, ep := range cli.Endpoints() {
		conn, err := cli.Dial(ep)
		if err != nil {
			ms.close()
			return nil, fmt.Errorf("etcdstore: dial %s: %w", ep, err)
		}
		ms.all = append(ms.all, &member{
			endpoint: ep, conn: conn, healthy: true,
			kv:       clientv3.NewKVFromKVClient(pb.NewKVClient(conn), cli),
			watcher:  clientv3.NewWatchFromWatchClient(pb.NewWatchClient(conn), cli),
			maint:    pb.NewMaintenanceClient(conn),
			inflight: map[*attempt]struct{}{},
		})
	}
	if len(ms.all) == 0 {
		return nil, errors.New("etcdstore: the client has no endpoints")
	}
	return ms, nil
}

// close closes the members' connections.
func (ms *members) close() {
	for _, m := range ms.all {
		m.watcher.Close()
		m.conn.Close()
	}
}

// pick returns the next healthy member, round-robin, skipping except;
// when none is healthy, the next of all.
func (ms *members) pick(except *member) *member {
	n := uint64(len(ms.all))
	start := ms.next.Add(1)
	for i := range n {
		m := ms.all[(start+i)%n]
		if m != except && m.isHealthy() {
			return m
		}
	}
	m := ms.all[start%n]
	if m == except && n > 1 {
		m = ms.all[(start+1)%n]
	}
	return m
}

// isHealthy reports whether m passed its last probe and its connection
// is not failing (a member that is down refuses connections: no need to
// wait for a probe to learn it).
func (m *member) isHealthy() bool {
	m.mu.Lock()
	healthy := m.healthy
	m.mu.Unlock()
	return healthy && m.conn.GetState() != connectivity.TransientFailure
}

// begin starts an attempt on m under ctx, bounded by d when d > 0 (watch:
// the feed's watch, which a new raft term leaves alone); end must be called
// when it is over.
func (m *member) begin(ctx context.Context, d time.Duration, watch bool) (actx context.Context, end func()) {
	var cancel context.CancelFunc
	if d > 0 {
		actx, cancel = context.WithTimeout(ctx, d)
	} else {
		actx, cancel = context.WithCancel(ctx)
	}
	a := &attempt{began: time.Now(), watch: watch, cancel: cancel}
	m.mu.Lock()
	m.inflight[a] = struct{}{}
	m.mu.Unlock()
	return clientv3.WithRequireLeader(actx), func() {
		m.mu.Lock()
		delete(m.inflight, a)
		m.mu.Unlock()
		cancel()
	}
}

// run calls attempt on one member, a write's on the leader when it is
// healthy, within an attempt's bound, and on others while it may be
// retried: a read whose member failed, timed out or had no leader, a write
// refused for want of a leader (so not applied). It gives up when ctx ends
// or every member was tried.
func (ms *members) run(ctx context.Context, read bool, attempt func(actx context.Context, m *member) error) error {
	var last *member
	for tries := 1; ; tries++ {
		m := ms.pick(last)
		if l := ms.leader.Load(); !read && l != nil && l != last && l.isHealthy() {
			m = l
		}
		actx, end := m.begin(ctx, ms.bound, false)
		err := attempt(actx, m)
		end()
		if proposalDropped(err) {
			err = errProposalDropped
		}
		if err == nil || ctx.Err() != nil || tries >= len(ms.all)+1 {
			return err
		}
		if !(read && unavailable(err)) && !errors.Is(err, rpctypes.ErrNoLeader) && !errors.Is(err, errProposalDropped) {
			return err
		}
		last = m
	}
}

// errProposalDropped is what a write answers when raft dropped its
// proposal: UNAVAILABLE, as etcd's own "no leader".
var errProposalDropped = status.Error(codes.Unavailable, "etcdserver: raft proposal dropped")

// proposalDropped reports whether err is raft's refusal of a proposal it
// never appended (a leadership transfer under way, a member between
// leaders). etcd sends it with codes.Unknown and raft's message, so it is
// recognised by both; the write was not applied and may be tried on
// another member, as one refused for want of a leader.
func proposalDropped(err error) bool {
	st, ok := status.FromError(err)
	return ok && err != nil && st.Code() == codes.Unknown && st.Message() == "raft proposal dropped"
}

// readOnly reports whether a transaction of these branches only reads.
func readOnly(then, els []clientv3.Op) bool {
	writes := func(o clientv3.Op) bool { return !o.IsGet() }
	return !slices.ContainsFunc(then, writes) && !slices.ContainsFunc(els, writes)
}

// probeLoop probes every member every ms.every until ctx ends.
func (ms *members) probeLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(ms.every)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	busy := make([]atomic.Bool, len(ms.all))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, m := range ms.all {
			if busy[i].Swap(true) {
				continue // its last probe is still waiting
			}
			wg.Go(func() {
				defer busy[i].Store(false)
				ms.probeOne(ctx, m)
			})
		}
	}
}

// probeOne reads the probe key linearizably from m within ms.within and
// sets m's health from the answer. A failed probe also cancels the
// requests and the feed watch m holds: they wait on what the probe waited
// on, and are better tried on another member. A probe that sees a new
// raft term (a leader was elected since the last) cancels the requests
// that began before it: a write m forwarded to a leader that died is
// neither committed nor refused until etcd's own timeout (7 s).
func (ms *members) probeOne(ctx context.Context, m *member) {
	began := time.Now()
	pctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), ms.within)
	resp, err := m.kv.Get(pctx, ms.probe, clientv3.WithCountOnly())
	cancel()
	if ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	was := m.healthy
	m.healthy = err == nil
	newTerm := err == nil && resp.Header.RaftTerm > m.term
	var stuck []*attempt
	for a := range m.inflight {
		if err != nil || m.term != 0 && newTerm && !a.watch && a.began.Before(began) {
			stuck = append(stuck, a)
		}
	}
	if newTerm {
		m.term = resp.Header.RaftTerm
	}
	m.mu.Unlock()
	for _, a := range stuck {
		a.cancel()
	}
	switch {
	case err != nil:
		ms.leader.CompareAndSwap(m, nil)
	case newTerm:
		sctx, cancel := context.WithTimeout(ctx, ms.within)
		st, serr := m.maint.Status(sctx, &pb.StatusRequest{})
		cancel()
		if serr == nil && st.Leader == st.Header.MemberId {
			ms.leader.Store(m)
		} else {
			ms.leader.CompareAndSwap(m, nil)
		}
	}
	if ms.log != nil && was != (err == nil) {
		if err != nil {
			ms.log.Warn("etcdstore: an etcd member failed its probe; requests go to the others until it answers", "member", m.endpoint, "err", err, "cancelled", len(stuck))
		} else {
			ms.log.Info("etcdstore: an etcd member answers its probe again", "member", m.endpoint)
		}
	}
}
