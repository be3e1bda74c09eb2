package setpointclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/etcdstore"
	"github.com/setpointhq/setpoint/target"
)

// shutdownTimeout bounds the replicas' graceful stop.
const shutdownTimeout = 30 * time.Second

// replica is one of several servers sharing an etcd store, on a listener
// that can be cut as a machine's death cuts its connections.
type replica struct {
	*servertest.Server
	lis   *cuttable
	reads *heldReads
}

// heldReads is a replica's store whose next Get, once Hold is called,
// waits until Release: a read the test knows to be in flight on that
// replica.
type heldReads struct {
	store.Store
	mu      sync.Mutex
	hold    bool
	entered chan struct{} // closed when a held Get has started
	release chan struct{}
}

// Hold makes the next Get wait for Release; the returned channel is
// closed once that Get has started.
func (h *heldReads) Hold() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold, h.entered, h.release = true, make(chan struct{}), make(chan struct{})
	return h.entered
}

// Release lets the held Get go on.
func (h *heldReads) Release() { close(h.release) }

// Get is the store's Get, held as Hold says.
func (h *heldReads) Get(ctx context.Context, k target.Key) (target.Record, error) {
	h.mu.Lock()
	held := h.hold
	h.hold = false
	entered, release := h.entered, h.release
	h.mu.Unlock()
	if held {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	return h.Store.Get(ctx, k)
}

// startReplicas runs n servers on loopback, each with its own etcd client
// and store on one prefix of cluster: one history, several servers.
func startReplicas(t *testing.T, cluster *etcdtest.Cluster, n int) []*replica {
	t.Helper()
	var out []*replica
	for range n {
		cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		st, err := etcdstore.New(t.Context(), cli, etcdstore.Options{Prefix: "/replicas/"})
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis := &cuttable{Listener: l}
		reads := &heldReads{Store: st}
		srv, err := servertest.Run(servertest.Config{Backend: reads, Listener: lis, Options: server.Options{ShutdownTimeout: shutdownTimeout}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			err := srv.Stop()
			if lis.wasCut() {
				err = nil // its listener's end is the error
			}
			if err := errors.Join(err, st.Close(), cli.Close()); err != nil {
				t.Error(err)
			}
		})
		out = append(out, &replica{Server: srv, lis: lis, reads: reads})
	}
	return out
}

// cuttable is a listener whose connections Cut closes at once, with the
// listener: to the clients, the server is gone.
type cuttable struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func (l *cuttable) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns = append(l.conns, c)
	return c, nil
}

// Cut closes the listener and every connection it accepted.
func (l *cuttable) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	l.Listener.Close()
	for _, c := range l.conns {
		c.Close()
	}
}

func (l *cuttable) wasCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut
}

// calls counts the calls each server answered and the errors callers saw.
type calls struct {
	mu     sync.Mutex
	served map[string]int
	errs   map[string][]error // by method
}

func newCalls() *calls { return &calls{served: map[string]int{}, errs: map[string][]error{}} }

// do makes one call with call, recording who answered or the error.
func (c *calls) do(method string, call func(opts ...grpc.CallOption) error) error {
	var p peer.Peer
	err := call(grpc.Peer(&p))
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errs[method] = append(c.errs[method], err)
		return err
	}
	c.served[p.Addr.String()]++
	return nil
}

func (c *calls) snapshot() (map[string]int, map[string][]error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	served := map[string]int{}
	for k, v := range c.served {
		served[k] = v
	}
	errs := map[string][]error{}
	for k, v := range c.errs {
		errs[k] = append([]error(nil), v...)
	}
	c.served, c.errs = map[string]int{}, map[string][]error{}
	return served, errs
}

// recommendAndRead makes one Recommend of req and one GetTarget of its
// target, recording each in cs.
func recommendAndRead(ctx context.Context, c *setpointclient.Client, cs *calls, req *setpointv1.RecommendRequest) {
	cs.do("Recommend", func(opts ...grpc.CallOption) error {
		_, err := c.Recommend(ctx, req, opts...)
		return err
	})
	cs.do("GetTarget", func(opts ...grpc.CallOption) error {
		_, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: req.Target}, opts...)
		return err
	})
}

// load runs workers callers of recommendAndRead until stop is closed.
func load(ctx context.Context, c *setpointclient.Client, cs *calls, req *setpointv1.RecommendRequest, workers int, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				recommendAndRead(ctx, c, cs, req)
			}
		})
	}
	return wg.Wait
}

// A client given three servers that share one etcd store spreads its
// calls over all three, and they build one history; a server that says
// NOT_SERVING gets no calls until it serves again; a server shut down
// gracefully costs the callers no error; a server whose connections are
// cut costs at most the writes in flight on it (UNAVAILABLE, not retried
// by the service config), and no read. The clients' health streams do not
// hold a server's shutdown.
func TestCallsSpreadAndFailOverAcrossReplicas(t *testing.T) {
	cluster := etcdtest.Start(t, 3)
	reps := startReplicas(t, cluster, 3)
	addrs := make([]string, len(reps))
	for i, r := range reps {
		addrs[i] = r.Addr
	}
	c, err := setpointclient.Dial(strings.Join(addrs, ","), setpointclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	req := readRequest()
	cs := newCalls()

	// Spread: once connected to all three, each server answers a third of
	// the calls, and every decision is in the one log.
	if _, err := c.Recommend(ctx, req); err != nil {
		t.Fatal(err)
	}
	answered := map[string]int{}
	testkit.Eventually(t, 10*time.Second, "connections to all three servers", func() error {
		recommendAndRead(ctx, c, cs, req)
		served, errs := cs.snapshot()
		if len(errs) > 0 {
			t.Fatalf("errors with every server up: %v", errs)
		}
		for a, n := range served {
			answered[a] += n
		}
		for _, a := range addrs {
			if answered[a] == 0 {
				return fmt.Errorf("%s answered none of %v", a, answered)
			}
		}
		return nil
	})
	logged, err := c.ListDecisions(ctx, &setpointv1.ListDecisionsRequest{Target: req.Target})
	if err != nil {
		t.Fatal(err)
	}
	before := len(logged.GetDecisions())
	const rounds = 30
	for range rounds {
		recommendAndRead(ctx, c, cs, req)
	}
	served, errs := cs.snapshot()
	if len(errs) > 0 {
		t.Fatalf("errors with every server up: %v", errs)
	}
	for _, a := range addrs {
		if served[a] < rounds/3 {
			t.Errorf("server %s answered %d of %d calls, want about a third: %v", a, served[a], 2*rounds, served)
		}
	}
	logged, err = c.ListDecisions(ctx, &setpointv1.ListDecisionsRequest{Target: req.Target})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(logged.GetDecisions()) - before; n != rounds {
		t.Errorf("decision log gained %d decisions, want the %d made through three servers", n, rounds)
	}

	// Health: a server answering NOT_SERVING is left out, then taken back.
	reps[0].Server.Server.SetServing(false)
	testkit.Eventually(t, 10*time.Second, "no call to the NOT_SERVING server", func() error {
		for range 12 {
			recommendAndRead(ctx, c, cs, req)
		}
		served, errs := cs.snapshot()
		if len(errs) > 0 {
			t.Fatalf("errors while a server is NOT_SERVING: %v", errs)
		}
		if served[addrs[0]] > 0 {
			return fmt.Errorf("it answered %d of 24 calls", served[addrs[0]])
		}
		return nil
	})
	reps[0].Server.Server.SetServing(true)
	testkit.Eventually(t, 10*time.Second, "calls to the server serving again", func() error {
		recommendAndRead(ctx, c, cs, req)
		served, _ := cs.snapshot()
		if served[addrs[0]] == 0 {
			return errors.New("none yet")
		}
		return nil
	})

	// A graceful stop (what SIGTERM does) under load: no caller sees it.
	const workers = 4
	stop := make(chan struct{})
	wait := load(ctx, c, cs, req, workers, stop)
	time.Sleep(300 * time.Millisecond)
	stopping := time.Now()
	if err := reps[0].Stop(); err != nil {
		t.Fatal(err)
	}
	// The health streams the balancing clients hold end with the
	// server's GOAWAY: they do not hold the stop until its timeout.
	if took := time.Since(stopping); took > shutdownTimeout/3 {
		t.Errorf("graceful stop took %v of its %v timeout", took, shutdownTimeout)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wait()
	served, errs = cs.snapshot()
	if len(errs) > 0 {
		t.Errorf("errors across a graceful stop: %v", errs)
	}
	t.Logf("answered across the graceful stop: %v", served)
	if served[addrs[1]] == 0 || served[addrs[2]] == 0 {
		t.Errorf("calls answered across the stop: %v, want the two others serving", served)
	}

	// A cut (the machine is gone) under load: reads are retried on the
	// last server; at most the writes in flight on the cut one fail. One
	// read is held on the server to be cut, so a read is surely in flight
	// at the cut.
	inFlight := reps[1].reads.Hold()
	stop = make(chan struct{})
	wait = load(ctx, c, cs, req, workers, stop)
	select {
	case <-inFlight:
	case <-time.After(30 * time.Second):
		t.Fatal("no read reached the server to be cut")
	}
	reps[1].lis.Cut()
	reps[1].reads.Release()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wait()
	_, errs = cs.snapshot()
	t.Logf("across the cut: %d writes failed", len(errs["Recommend"]))
	if len(errs["GetTarget"]) > 0 {
		t.Errorf("reads failed across the cut: %v", errs["GetTarget"])
	}
	if len(errs["Recommend"]) > workers {
		t.Errorf("%d writes failed across the cut, want at most the %d in flight: %v", len(errs["Recommend"]), workers, errs["Recommend"])
	}
	for _, err := range errs["Recommend"] {
		if status.Code(err) != codes.Unavailable {
			t.Errorf("a write failed across the cut with %v, want UNAVAILABLE", err)
		}
	}
	for range 10 {
		recommendAndRead(ctx, c, cs, req)
	}
	served, errs = cs.snapshot()
	if len(errs) > 0 || served[addrs[2]] != 20 {
		t.Errorf("after the cut: answered %v, errors %v; want every call answered by %s", served, errs, addrs[2])
	}
}
