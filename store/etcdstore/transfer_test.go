package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/etcdstore"
)

// A leadership transfer (etcd's move-leader, or a leader stopping
// gracefully) makes raft drop the proposals that reach the leader
// meanwhile, which etcd answers with codes.Unknown. Such a write was never
// applied: it is tried on another member, and when none takes it answers
// store.ErrUnavailable, never an error that would reach a caller as
// INTERNAL.
func TestLeaderTransferAnswersUnavailable(t *testing.T) {
	c := etcdtest.Start(t, 3) // its own cluster: the leadership moves
	cli, err := clientv3.New(etcdstore.ClientConfig(clientv3.Config{Endpoints: c.Endpoints}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	st, err := etcdstore.New(t.Context(), cli, etcdstore.Options{Prefix: "/transfer/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var (
		mu     sync.Mutex
		acked  int
		failed = map[string]int{}
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := decide(ctx, st, fmt.Sprint("t", w), fmt.Sprintf("w%d-%d", w, i))
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					acked++
				case errors.Is(err, store.ErrUnavailable):
					failed["unavailable"]++
				default:
					failed["other: "+err.Error()]++
				}
				mu.Unlock()
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		time.Sleep(300 * time.Millisecond)
		if err := c.MoveLeader(ctx, (leader+1+i)%3); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("6 leadership transfers: %d writes acknowledged, failed: %v", acked, failed)
	for kind, n := range failed {
		if kind != "unavailable" {
			t.Errorf("%d writes failed with %s: want store.ErrUnavailable", n, kind)
		}
	}
	if acked == 0 {
		t.Error("no write was acknowledged")
	}
}
