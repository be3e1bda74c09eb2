package etcdstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/etcdstore"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// TestFeedGapAfterCompaction: a server cut off from etcd while others
// write, and etcd compacts past what it had seen, cannot hand its
// followers the changes it missed: it tells them with a ChangeGap instead
// of going on as if nothing had happened, and drops its cache.
func TestFeedGapAfterCompaction(t *testing.T) {
	ctx := context.Background()
	client(t) // the shared cluster
	prefix := fmt.Sprintf("/gap-%d/", time.Now().UnixNano())
	other := open(t, prefix)
	proxy := etcdtest.NewProxy(t, strings.TrimPrefix(endpoints[0], "http://"))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + proxy.Addr},
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

	proxy.Cut()
	for i := 1; i <= 3; i++ {
		storetest.Put(t, other, target.Record{Key: key(i), Last: &target.LastDecision{ID: "b"}})
	}
	cs, err := other.Changes(ctx, 0, 10)
	if err != nil || len(cs) != 4 {
		t.Fatalf("Changes = %d, %v; want 4", len(cs), err)
	}
	compactAt(t, other, cs[3].Revision)
	storetest.Put(t, other, target.Record{Key: key(4), Last: &target.LastDecision{ID: "c"}})
	// Long enough for etcd to compact: the connections the cut held are
	// gone, and the server reconnects.
	proxy.HealReset()

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

// A feed entry the server cannot read (here an earlier version's form, put
// by hand) is changes missed: the followers get a ChangeGap, then the
// changes after it.
func TestUnreadableFeedEntryIsAGap(t *testing.T) {
	ctx := context.Background()
	prefix := fmt.Sprintf("/unreadable-%d/", time.Now().UnixNano())
	st := open(t, prefix)
	var (
		mu   sync.Mutex
		seen []store.ChangeKind
	)
	stop := st.Follow(func(cs []store.Change) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			seen = append(seen, c.Kind)
		}
	})
	defer stop()
	// Form 0x02 of the feed before EtcdFeed: a reference to a record.
	if _, err := client(t).Put(ctx, prefix+"feed", "\x02\x00"); err != nil {
		t.Fatal(err)
	}
	storetest.Put(t, st, target.Record{Key: target.Key{Cluster: "c", Namespace: "n", Name: "a"}, Last: &target.LastDecision{ID: "a"}})
	want := []store.ChangeKind{store.ChangeGap, store.ChangeDecision}
	testkit.Eventually(t, 10*time.Second, "a gap, then the change after it", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(seen, want) {
			return fmt.Errorf("followed %v, want %v", seen, want)
		}
		return nil
	})
}
