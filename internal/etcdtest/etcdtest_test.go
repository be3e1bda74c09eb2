package etcdtest_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/internal/etcdtest"
)

// MoveLeader hands the leadership to a member that follows, and to the
// leader itself changes nothing.
func TestMoveLeader(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	leader := waitLeader(ctx, t, c)
	to := (leader + 1) % 3
	if err := c.MoveLeader(ctx, to); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Leader(ctx); err != nil || got != to {
		t.Fatalf("after MoveLeader(%d) the leader is m%d (%v)", to, got, err)
	}
	if err := c.MoveLeader(ctx, to); err != nil {
		t.Fatalf("MoveLeader to the leader: %v", err)
	}
}

// Killing the leader makes another member leader; the killed member,
// restarted on its data, catches up with what was written meanwhile.
func TestKillLeaderAndRestart(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	leader := waitLeader(ctx, t, c)
	c.Kill(leader)
	if c.Running(leader) {
		t.Fatalf("m%d runs after Kill", leader)
	}
	if next := waitLeader(ctx, t, c); next == leader {
		t.Fatalf("the killed member m%d is still the leader", leader)
	}
	cli := client(t, c.Endpoints...)
	if _, err := cli.Put(ctx, "k", "written while the old leader was down"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, leader); err == nil {
		t.Error("Restart of a running member: no error")
	}
	// A serializable read is answered from the member's own store.
	restarted := client(t, c.Endpoints[leader])
	resp, err := restarted.Get(ctx, "k", clientv3.WithSerializable())
	for err == nil && len(resp.Kvs) == 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		resp, err = restarted.Get(ctx, "k", clientv3.WithSerializable())
	}
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("restarted m%d does not have the key written while it was down: %v %v", leader, resp, err)
	}
}

func waitLeader(ctx context.Context, t *testing.T, c *etcdtest.Cluster) int {
	t.Helper()
	for {
		i, err := c.Leader(ctx)
		if err == nil {
			return i
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func client(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// A paused member answers nothing (a read of it alone times out) while
// the other two still write; continued, it catches up (WaitInSync) and
// has what was written meanwhile.
func TestPauseAndResume(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	paused := (waitLeader(ctx, t, c) + 1) % 3
	if err := c.Pause(paused); err != nil {
		t.Fatal(err)
	}
	alone := client(t, c.Endpoints[paused])
	rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := alone.Get(rctx, "k", clientv3.WithSerializable())
	rcancel()
	if err == nil {
		t.Fatalf("paused m%d answered a read", paused)
	}
	var others []string
	for i, ep := range c.Endpoints {
		if i != paused {
			others = append(others, ep)
		}
	}
	if _, err := client(t, others...).Put(ctx, "k", "written while a member was paused"); err != nil {
		t.Fatal(err)
	}
	if err := c.Resume(paused); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitInSync(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := alone.Get(ctx, "k", clientv3.WithSerializable())
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("m%d, continued and in sync, does not have the key written while it was paused: %v %v", paused, resp, err)
	}
}
