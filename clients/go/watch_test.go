package setpointclient_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// proxy forwards TCP connections to a server and can drop them all and
// refuse new ones, like a network partition.
type proxy struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	down   bool
	// refused counts the connections refused while down.
	refused int
	conns   []net.Conn
	wg      sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: lis, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		lis.Close()
		p.partition(true)
		p.wg.Wait()
	})
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.refused++
			p.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			in.Close()
			continue
		}
		p.conns = append(p.conns, in, out)
		p.wg.Add(2)
		p.mu.Unlock()
		go func() { defer p.wg.Done(); io.Copy(out, in); out.Close() }()
		go func() { defer p.wg.Done(); io.Copy(in, out); in.Close() }()
	}
}

// partition drops every connection and, while down, refuses new ones.
func (p *proxy) partition(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestChangesResumes: a watch broken by a partition resumes from the last
// revision it saw, so the decisions made meanwhile arrive, once, in order.
func TestChangesResumes(t *testing.T) {
	srvAddr := startServer(t, server.Options{Now: func() time.Time { return exampleNow }})
	px := startProxy(t, srvAddr)
	fast := grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.2, MaxDelay: 200 * time.Millisecond}, MinConnectTimeout: time.Second})
	watcher, err := setpointclient.Dial(px.lis.Addr().String(), setpointclient.Options{DialOptions: []grpc.DialOption{fast}})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	direct, err := setpointclient.Dial(srvAddr, setpointclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	type change struct {
		rev      uint64
		decision string
	}
	changes := make(chan change)
	errs := make(chan error, 1)
	go func() {
		for ch, err := range watcher.Changes(ctx, &setpointv1.WatchRequest{Cluster: "dev"}) {
			if err != nil {
				errs <- err
				return
			}
			select {
			case changes <- change{ch.GetRevision(), ch.GetDecision().GetDecisionId()}:
			case <-ctx.Done():
			}
		}
	}()
	decide := func(name string) string {
		t.Helper()
		req := readRequest()
		req.Target.Name = name
		d, err := direct.Decide(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return d.GetDecisionId()
	}
	next := func() change {
		t.Helper()
		select {
		case ch := <-changes:
			return ch
		case err := <-errs:
			t.Fatalf("watch ended: %v", err)
		case <-ctx.Done():
			t.Fatal("no change arrived")
		}
		return change{}
	}

	// Until the watch is up, decisions pass unseen: decide until one is
	// seen. Any warm-up decision may be the first seen (one decided before
	// the watch was up is not; one decided later may arrive after the next
	// is made); the stream then holds every later one, in order, up to the
	// last, which is read before the partition.
	var first change
	warmup := map[string]bool{}
	var lastWarmup string
	for first.decision == "" {
		lastWarmup = decide("web")
		warmup[lastWarmup] = true
		select {
		case first = <-changes:
			if !warmup[first.decision] {
				t.Fatalf("first change is decision %q, not one of the warm-up's %v", first.decision, warmup)
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	for first.decision != lastWarmup {
		prev := first
		first = next()
		if !warmup[first.decision] || first.rev <= prev.rev {
			t.Fatalf("warm-up change: decision %q revision %d, want a later warm-up decision after revision %d", first.decision, first.rev, prev.rev)
		}
	}

	px.partition(true)
	missed := []string{decide("api"), decide("worker")}
	testkit.Eventually(t, 10*time.Second, "the watcher to be refused a reconnection", func() error {
		px.mu.Lock()
		defer px.mu.Unlock()
		if px.refused == 0 {
			return errors.New("no connection attempt refused yet")
		}
		return nil
	})
	px.partition(false)

	last := first.rev
	for i, want := range missed {
		ch := next()
		if ch.decision != want || ch.rev <= last {
			t.Fatalf("change %d after the partition: decision %q revision %d, want decision %q after revision %d", i, ch.decision, ch.rev, want, last)
		}
		last = ch.rev
	}
	after := decide("web")
	if ch := next(); ch.decision != after {
		t.Errorf("change after resuming: %q, want %q", ch.decision, after)
	}
	cancel()
	if err := <-errs; err != context.Canceled {
		t.Errorf("watch ended with %v, want context.Canceled", err)
	}
}
