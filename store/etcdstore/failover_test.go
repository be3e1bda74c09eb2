package etcdstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/etcdstore"
	"github.com/setpointhq/setpoint/target"
)

// Under writes from two stores (two servers) on their own 3-member
// cluster, the etcd leader is killed: both stores' writes resume (each
// acknowledges decisions made after the kill), every acknowledged decision
// is in its target's history afterwards, once, and the feed holds the
// histories in the same order.
func TestLeaderKillLosesNoAcknowledgedDecision(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	var stores []*etcdstore.Store
	for range 2 {
		cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		st, err := etcdstore.New(ctx, cli, etcdstore.Options{Prefix: "/failover/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		stores = append(stores, st)
	}
	key := func(i int) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("t", i%4)} }

	var (
		mu     sync.Mutex
		acked  = map[string]bool{}
		killed bool
		after  [2]int // decisions acknowledged by each store after the kill
		wg     sync.WaitGroup
	)
	// ackedBy reports how many decisions store s acknowledged after the
	// kill, or in all before it.
	ackedBy := func(s int) int {
		mu.Lock()
		defer mu.Unlock()
		if !killed {
			return len(acked)
		}
		return after[s]
	}
	stop := make(chan struct{})
	for w := range 8 {
		st := stores[w%2]
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := st.Update(cctx, key(w), func(r *target.Record) error {
					r.Last = &target.LastDecision{ID: id}
					r.Events = append(r.Events, target.Event{Kind: target.EventApplied, DecisionID: id})
					return nil
				})
				cancel()
				if err == nil {
					mu.Lock()
					acked[id] = true
					if killed {
						after[w%2]++
					}
					mu.Unlock()
				}
			}
		})
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("after 30s: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("20 decisions acknowledged before the kill", func() bool { return ackedBy(0) >= 20 })
	leader := -1
	for i, ep := range c.Endpoints {
		sc, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := sc.Status(ctx, ep)
		sc.Close()
		if err == nil && s.Leader == s.Header.MemberId {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no leader found")
	}
	c.Kill(leader) // returns once the process is gone
	mu.Lock()
	killed = true
	mu.Unlock()
	// Each store has 4 writers, so at least 6 of 10 were begun after the
	// kill.
	waitFor("both stores acknowledging writes again after the leader's kill", func() bool { return ackedBy(0) >= 10 && ackedBy(1) >= 10 })
	close(stop)
	wg.Wait()

	// Every acknowledged decision is in the feed, once; each target's
	// feed order is the order of its recorded events.
	cs, err := stores[1].Changes(ctx, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	perTarget := map[string][]string{}
	for _, ch := range cs {
		if ch.Kind == store.ChangeDecision {
			seen[ch.Decision.ID]++
			perTarget[ch.Key.Name] = append(perTarget[ch.Key.Name], ch.Decision.ID)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no decision was acknowledged")
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Errorf("acknowledged decision %s is in the feed %d times", id, seen[id])
		}
	}
	for name, ids := range perTarget {
		rec, err := stores[0].Get(ctx, target.Key{Cluster: "c", Namespace: "n", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		var evs []string
		for _, e := range rec.Events {
			evs = append(evs, e.DecisionID)
		}
		// The record keeps the newest events; they are the feed's tail.
		tail := ids[max(0, len(ids)-len(evs)):]
		if fmt.Sprint(tail) != fmt.Sprint(evs) {
			t.Errorf("%s: events %v, feed tail %v", name, evs, tail)
		}
	}
	t.Logf("%d decisions acknowledged, %d changes, leader m%d killed", len(acked), len(cs), leader)
}
