package etcdstore_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/etcdstore"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// cutProxy forwards TCP connections to one address until cut, which closes
// them and refuses new ones until mend: a server cut off from etcd.
type cutProxy struct {
	lis   net.Listener
	to    string
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func newCutProxy(t *testing.T, to string) *cutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis, to: to}
	t.Cleanup(func() { lis.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.to)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

// setCut cuts (closing every connection) or mends the proxy.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestFeedGapAfterCompaction: a server cut off from etcd while others
// write, and etcd compacts past what it had seen, cannot hand its
// followers the changes it missed: it tells them with a ChangeGap instead
// of going on as if nothing had happened, and drops its cache.
func TestFeedGapAfterCompaction(t *testing.T) {
	ctx := context.Background()
	client(t) // the shared cluster
	prefix := fmt.Sprintf("/gap-%d/", time.Now().UnixNano())
	other := open(t, store.Options{}, prefix)
	proxy := newCutProxy(t, strings.TrimPrefix(endpoints[0], "http://"))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + proxy.lis.Addr().String()},
		DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	cut, err := etcdstore.New(ctx, cli, etcdstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cut.Close() })

	var (
		mu   sync.Mutex
		seen []store.ChangeKind
	)
	stop := cut.Follow(func(cs []store.Change) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			seen = append(seen, c.Kind)
		}
	})
	defer stop()
	key := func(n int) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint(n)} }
	kinds := func() []store.ChangeKind {
		mu.Lock()
		defer mu.Unlock()
		return append([]store.ChangeKind(nil), seen...)
	}
	storetest.Put(t, other, target.Record{Key: key(0), Last: &target.LastDecision{ID: "a"}})
	testkit.Eventually(t, 10*time.Second, "the first change followed", func() error {
		if len(kinds()) == 0 {
			return fmt.Errorf("nothing followed")
		}
		return nil
	})

	proxy.setCut(true)
	for i := 1; i <= 3; i++ {
		storetest.Put(t, other, target.Record{Key: key(i), Last: &target.LastDecision{ID: "b"}})
	}
	cs, err := other.Changes(ctx, 0, 10)
	if err != nil || len(cs) != 4 {
		t.Fatalf("Changes = %d, %v; want 4", len(cs), err)
	}
	compactAt(t, other, cs[3].Revision)
	storetest.Put(t, other, target.Record{Key: key(4), Last: &target.LastDecision{ID: "c"}})
	proxy.setCut(false)

	// Compaction keeps the write at its revision: after the gap come the
	// fourth write's change and the last one.
	want := []store.ChangeKind{store.ChangeDecision, store.ChangeGap, store.ChangeDecision, store.ChangeDecision}
	testkit.Eventually(t, 30*time.Second, "a gap, then the changes kept", func() error {
		if got := kinds(); !slices.Equal(got, want) {
			return fmt.Errorf("followed %v, want %v", got, want)
		}
		return nil
	})
}
