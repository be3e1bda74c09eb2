package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/setpointhq/setpoint/internal/servertest"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
)

// Concurrent Recommends of one target through two servers on one etcd
// prefix are all recorded, in one order: each server's Watch streams the
// same decisions in the same order, and a stream resumed from the middle
// continues it.
func TestConcurrentRecommendsThroughTwoServers(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/examples/recommend.json")
	if err != nil {
		t.Fatal(err)
	}
	req := &setpointv1.RecommendRequest{}
	if err := protojson.Unmarshal(raw, req); err != nil {
		t.Fatal(err)
	}
	// The example's instant, a millisecond further at each call, so that
	// every decision has its own time.
	var ticks atomic.Int64
	now := func() time.Time {
		return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(ticks.Add(1)) * time.Millisecond)
	}
	prefix := fmt.Sprintf("/servers-%d/", time.Now().UnixNano())
	var clients []setpointv1.AutoscalerServiceClient
	for range 2 {
		st := open(t, prefix)
		srv, err := servertest.Run(servertest.Config{Wrap: func(store.Store) store.Store { return st }, Options: server.Options{Now: now}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Stop() })
		conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		clients = append(clients, setpointv1.NewAutoscalerServiceClient(conn))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const calls = 20
	streams := make([]grpc.ServerStreamingClient[setpointv1.WatchResponse], 2)
	var after [2]uint64 // the revision each stream starts after
	for i, c := range clients {
		if streams[i], err = c.Watch(ctx, &setpointv1.WatchRequest{}); err != nil {
			t.Fatal(err)
		}
		// Watch returns before the server has subscribed the stream to its
		// feed; the header comes once it has, and the stream delivers the
		// changes after the header's revision. A decision recorded before
		// (a server slow to take the stream) would never be streamed.
		md, err := streams[i].Header()
		if err != nil {
			t.Fatalf("server %d's Watch header: %v", i, err)
		}
		v := md.Get(server.RevisionHeader)
		if len(v) != 1 {
			t.Fatalf("server %d's Watch header %v has no %s", i, md, server.RevisionHeader)
		}
		if after[i], err = strconv.ParseUint(v[0], 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		wg    sync.WaitGroup
	)
	for i := range calls {
		wg.Go(func() {
			resp, err := clients[i%2].Recommend(ctx, req)
			if err != nil {
				t.Errorf("Recommend %d: %v", i, err)
				return
			}
			mu.Lock()
			acked[resp.GetDecision().GetDecisionId()] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(acked) != calls {
		t.Fatalf("%d distinct decisions acknowledged, want %d", len(acked), calls)
	}
	type seen struct {
		rev uint64
		id  string
	}
	var orders [2][]seen
	for i, s := range streams {
		for len(orders[i]) < calls {
			r, err := s.Recv()
			if err != nil {
				t.Fatalf("server %d's Watch after %d decisions: %v", i, len(orders[i]), err)
			}
			if r.GetRevision() <= after[i] {
				t.Errorf("server %d's Watch streamed revision %d, not after its header's %d", i, r.GetRevision(), after[i])
			}
			orders[i] = append(orders[i], seen{r.GetRevision(), r.GetDecision().GetDecisionId()})
		}
	}
	if diff := cmp.Diff(orders[0], orders[1], cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("the servers' Watch streams differ (-server 0 +server 1):\n%s", diff)
	}
	for i, s := range orders[0] {
		if !acked[s.id] {
			t.Errorf("Watch streamed decision %q, not acknowledged", s.id)
		}
		if i > 0 && s.rev <= orders[0][i-1].rev {
			t.Errorf("revision %d after %d", s.rev, orders[0][i-1].rev)
		}
	}
	// Resumed from the middle on the other server, the stream continues.
	half := orders[0][calls/2-1]
	resumed, err := clients[1].Watch(ctx, &setpointv1.WatchRequest{ResumeAfter: half.rev})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range orders[0][calls/2:] {
		r, err := resumed.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got := (seen{r.GetRevision(), r.GetDecision().GetDecisionId()}); got != want {
			t.Errorf("resumed after %d: got %+v, want %+v", half.rev, got, want)
		}
	}
}
