package ha

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const (
	// notServingWithin bounds how soon a server cut off from etcd must
	// say NOT_SERVING: setpoint-server checks etcd every 2 s, each check
	// given 2 s (cmd/setpoint-server's watchHealth), so 4 s and the
	// scheduling of a loaded machine.
	notServingWithin = 8 * time.Second
	// servingWithin bounds how soon it must say SERVING again once the
	// partition has healed: the next check, after the etcd client has
	// reconnected when the partition reset its connections.
	servingWithin = 15 * time.Second
)

// cut is when server was partitioned from etcd, in the history's time.
type cut struct {
	server   int
	from, to int64
}

// partition cuts a random server off from every etcd member, both ways,
// while etcd and the other servers still reach each other: the server's
// link holds every byte, as a network that drops packets does, and
// closes nothing. The server must then answer no call (checkCuts; the
// ones it took fail, or, when the partition healed before their deadline,
// must be linearizable, which check checks) and turn its health
// NOT_SERVING within notServingWithin. The partition is healed by
// delivering what it held back (TCP retransmitting after a short
// partition: requests sent into it reach etcd late) or, every other time
// in a long run, by resetting the connections it held (a partition that
// outlasted TCP's retries); the server must then turn SERVING within
// servingWithin and serve.
func (f *faults) partition() {
	f.t.Helper()
	i := f.rng.IntN(servers)
	n := f.c.nodes[i]
	health := healthOf(f.t, n.srv.Addr)
	before, began, from := f.acked(), time.Now(), f.l.hist.now()
	n.link.Cut()
	if !health.await(healthpb.HealthCheckResponse_NOT_SERVING, notServingWithin) {
		f.t.Errorf("server %d, cut off from etcd, still did not say NOT_SERVING after %v", i, notServingWithin)
	}
	notServing := time.Since(began)
	// The others serve meanwhile. (The load's count of acknowledged calls
	// says little here: its callers do not follow health, and within a
	// second each has a call stuck on the partitioned server.)
	for j, m := range f.c.nodes {
		if j == i {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		_, err := m.probe.Recommend(ctx, request("partition-probe", replicas, 100))
		cancel()
		if err != nil {
			f.t.Errorf("server %d did not serve while server %d was partitioned from etcd: %v", j, i, err)
		}
	}
	time.Sleep(f.down())
	during := f.acked() - before
	reset := *duration != 0 && f.partitions%2 == 1
	to, healed := f.l.hist.now(), time.Now()
	if reset {
		n.link.HealReset()
	} else {
		n.link.Heal()
	}
	if !health.await(healthpb.HealthCheckResponse_SERVING, servingWithin) {
		f.t.Errorf("server %d, its partition from etcd healed, still did not say SERVING after %v", i, servingWithin)
	}
	f.cuts = append(f.cuts, cut{i, from, to})
	f.windows = append(f.windows, window{"a partition", from, f.l.hist.now()})
	f.partitions++
	how := map[bool]string{false: "what it held delivered", true: "its connections reset"}[reset]
	f.t.Logf("server %d partitioned from etcd for %v: NOT_SERVING after %v, %d calls acknowledged meanwhile; healed (%s), SERVING after %v",
		i, healed.Sub(began).Round(time.Millisecond), notServing.Round(time.Millisecond), during, how, time.Since(healed).Round(time.Millisecond))
	f.settle(f.down())
}

// checkCuts checks that no server answered a call it began to serve
// while it was partitioned from etcd, before the partition healed: every
// answer needs etcd (a linearizable read, or a transaction comparing the
// record's revision), so one given then would come from the server's own,
// possibly stale, view.
func (f *faults) checkCuts() {
	f.t.Helper()
	var answered int
	for _, c := range f.cuts {
		for name, calls := range f.l.hist.calls {
			for _, k := range calls {
				if k.server == c.server && !k.out.unknown && k.start >= c.from && k.end <= c.to {
					answered++
					f.t.Errorf("%s: server %d answered %s during its partition from etcd ([%.3f s, %.3f s] within [%.3f s, %.3f s])",
						name, c.server, describe(k.in, k.out), float64(k.start)/1e9, float64(k.end)/1e9, float64(c.from)/1e9, float64(c.to)/1e9)
				}
			}
		}
	}
	if len(f.cuts) > 0 {
		f.t.Logf("partitions: %d calls answered by a server while it was cut off from etcd", answered)
	}
}

// health asks one server's gRPC health service.
type health struct {
	client healthpb.HealthClient
}

// healthOf is a health client of the server at addr, closed at cleanup.
func healthOf(t *testing.T, addr string) health {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return health{healthpb.NewHealthClient(conn)}
}

// await polls the server's overall health until it is want, for at most
// within; it reports whether it got there.
func (h health) await(want healthpb.HealthCheckResponse_ServingStatus, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := h.client.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == want {
			return true
		}
	}
	return false
}
